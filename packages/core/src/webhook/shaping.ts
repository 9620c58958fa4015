import { filterListsDecision, isTemplate, parseTemplate, type TemplatePart } from "@hookpost/contract";
import type { DestinationRecord } from "../model/destination.js";
import { cachedExpression, type Expression, ExpressionError, evaluateExpression } from "./expression.js";

/** A template with its placeholders compiled. */
export type CompiledTemplate = ReadonlyArray<{ text: string } | { expression: Expression; at: number }>;

/**
 * A destination's filter, mapping and templates compiled (docs/design/shaping.md). `plain`: none
 * of them is set, and the request is today's: the stored body, POSTed, no JSON parsed.
 */
export interface Shaping {
  plain: boolean;
  filterExpression?: Expression;
  mapping?: Expression;
  /** Per URL, in order; undefined where the URL has no placeholder. */
  urls: Array<CompiledTemplate | undefined>;
  /** Header name → compiled value, for values with placeholders. */
  headers: Map<string, CompiledTemplate>;
}

/** Records are replaced, never changed, on a configuration revision: compiled once per record. */
const shapings = new WeakMap<DestinationRecord, Shaping>();

/** The destination's shaping; ExpressionError (prefixed with the field) when one does not compile. */
export function shapingOf(dest: DestinationRecord): Shaping {
  let s = shapings.get(dest);
  if (s === undefined) {
    s = compileShaping(dest);
    shapings.set(dest, s);
  }
  return s;
}

function compileShaping(dest: DestinationRecord): Shaping {
  const filter = dest.filter;
  const s: Shaping = { plain: true, urls: [], headers: new Map() };
  if (filter?.types?.length || filter?.events?.length) s.plain = false;
  if (filter?.expression) {
    s.filterExpression = compileAs("filter.expression", filter.expression);
    s.plain = false;
  }
  if (dest.mapping) {
    s.mapping = compileAs("mapping", dest.mapping);
    s.plain = false;
  }
  (dest.urls ?? []).forEach((url, i) => {
    const t = isTemplate(url) ? compileTemplate(`urls[${i}]`, url) : undefined;
    if (t) s.plain = false;
    s.urls.push(t);
  });
  for (const [name, value] of Object.entries(dest.headers ?? {})) {
    if (!isTemplate(value)) continue;
    s.headers.set(name, compileTemplate(`headers[${JSON.stringify(name)}]`, value));
    s.plain = false;
  }
  return s;
}

function compileAs(field: string, text: string): Expression {
  try {
    return cachedExpression(text);
  } catch (err) {
    throw new ExpressionError(`${field}: ${(err as Error).message}`);
  }
}

function compileTemplate(field: string, template: string): CompiledTemplate {
  const parts = parseTemplate(template);
  if (typeof parts === "string") throw new ExpressionError(`${field}: ${parts}`);
  return parts.map((p: TemplatePart) =>
    "text" in p ? p : { expression: compileAs(`${field} at position ${p.at}`, p.expression), at: p.at },
  );
}

/**
 * What is wrong with a destination's expressions and templates, by field (the admin API refuses
 * it with these): each compiled on its own, so every problem is reported.
 */
export function shapingProblems(
  dest: Pick<DestinationRecord, "filter" | "mapping" | "urls" | "headers">,
): Array<{
  field: string;
  problem: string;
}> {
  const out: Array<{ field: string; problem: string }> = [];
  const check = (field: string, compile: () => unknown) => {
    try {
      compile();
    } catch (err) {
      if (!(err instanceof ExpressionError)) throw err;
      out.push({
        field,
        problem: err.message.startsWith(`${field}`) ? err.message.slice(field.length + 2) : err.message,
      });
    }
  };
  if (dest.filter?.expression) check("filter.expression", () => cachedExpression(dest.filter!.expression!));
  if (dest.mapping) check("mapping", () => cachedExpression(dest.mapping!));
  (dest.urls ?? []).forEach((url, i) => {
    if (isTemplate(url)) check(`urls[${i}]`, () => compileTemplate(`urls[${i}]`, url));
  });
  for (const [name, value] of Object.entries(dest.headers ?? {})) {
    const field = `headers[${JSON.stringify(name)}]`;
    if (isTemplate(value)) check(field, () => compileTemplate(field, value));
  }
  return out;
}

/** The filter's lists, for the router (which has the call) and delivery (which has the body). */
export function filterListsOf(
  dest: DestinationRecord,
  call: { type: string; event?: unknown },
): string | undefined {
  return dest.filter ? filterListsDecision(call, dest.filter) : undefined;
}

/**
 * Whether the destination's filter expression passes the call (its default body `input`);
 * undefined when it cannot tell (the expression failed: the caller routes the call, and delivery
 * records the failure).
 */
export async function filterExpressionPasses(
  dest: DestinationRecord,
  input: unknown,
  ids: { messageId: string; sourceId: string; destinationId: string },
): Promise<boolean | undefined> {
  try {
    const e = shapingOf(dest).filterExpression;
    if (e === undefined) return true;
    return truthy(await evaluateExpression(e, input, { ...ids }));
  } catch {
    return undefined;
  }
}

/** JSONata's truthiness for a filter: false, undefined, null, 0, "" and empty arrays do not pass. */
export function truthy(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  return Boolean(v);
}
