import jsonata from "jsonata";

/**
 * JSONata expressions of a destination (filter, mapping, placeholders: docs/design/shaping.md),
 * compiled once and evaluated within bounds, so that a hostile expression cannot stall a
 * dispatcher. JSONata itself has no I/O (network, files, process): the sandbox is the language.
 */

/** Evaluation stops after this long (checked at every step). */
export const EXPRESSION_TIMEOUT_MS = 25;
const MAX_PAD_WIDTH = 10_000;
const MAX_RANGE = 10_000;
const ENTRY = Symbol.for("jsonata.__evaluate_entry");
/** The binding that carries an evaluation's bounds (readable by the expression: two numbers). */
const BOUNDS = "__hookpost_bounds";

interface Bounds {
  deadline: number;
}

interface Environment {
  lookup(name: string): unknown;
}

/** A compiled expression; evaluate with `evaluateExpression`. */
export interface Expression {
  readonly text: string;
  readonly compiled: jsonata.Expression;
}

/** Why an expression could not be compiled or evaluated; says where, never echoes the input. */
export class ExpressionError extends Error {
  override readonly name = "ExpressionError";
}

/** The expression compiled, or an ExpressionError with the position of the problem. */
export function compileExpression(text: string): Expression {
  let compiled: jsonata.Expression;
  try {
    compiled = jsonata(text);
  } catch (err) {
    throw new ExpressionError(describe(err));
  }
  const refused = unbounded(compiled.ast());
  if (refused !== undefined) throw new ExpressionError(refused);
  // Shadow what could escape the bounds: $eval compiles text at run time (regexes included), and
  // $pad allocates its width in one step.
  compiled.assign("eval", () => {
    throw new ExpressionError("$eval is not allowed");
  });
  compiled.assign("pad", boundedPad);
  // JSONata looks its step hooks up in the expression's environment (not in per-evaluation
  // bindings, which take string keys only); each evaluation's own bounds travel as a binding.
  // Time only: every step of JSONata's evaluator awaits, so runaway recursion never grows the
  // call stack; it grows promises, which the deadline stops (an exit hook for depth cost a third
  // of a mapping's time).
  compiled.assign(ENTRY as unknown as string, (_expr: unknown, _input: unknown, env: Environment) => {
    const b = env.lookup(BOUNDS) as Bounds | undefined;
    if (b !== undefined && performance.now() > b.deadline) {
      throw new ExpressionError(`ran longer than ${EXPRESSION_TIMEOUT_MS} ms`);
    }
  });
  return { text, compiled };
}

/** Compiled expressions by text: destinations share them, and a new revision compiles only what changed. */
const cache = new Map<string, Expression>();
const MAX_CACHED = 2048;

/** compileExpression, cached by text (a refused text throws again, it is not cached). */
export function cachedExpression(text: string): Expression {
  let e = cache.get(text);
  if (e === undefined) {
    e = compileExpression(text);
    if (cache.size >= MAX_CACHED) cache.clear();
    cache.set(text, e);
  }
  return e;
}

/**
 * The expression's value for `input`, with `bindings` as `$name` variables; ExpressionError when
 * it fails or runs longer than EXPRESSION_TIMEOUT_MS.
 */
export async function evaluateExpression(
  e: Expression,
  input: unknown,
  bindings: Record<string, unknown>,
): Promise<unknown> {
  const bounds: Bounds = { deadline: performance.now() + EXPRESSION_TIMEOUT_MS };
  try {
    return await e.compiled.evaluate(input, { ...bindings, [BOUNDS]: bounds });
  } catch (err) {
    if (err instanceof ExpressionError) throw err;
    throw new ExpressionError(describe(err));
  }
}

/** JSONata's errors carry a code, a position and a message; RangeError (string length) none. */
function describe(err: unknown): string {
  const e = err as { message?: string; position?: number; code?: string };
  const message = (e.message ?? String(err)).replace(/[\r\n]+/g, " ").slice(0, 300);
  return typeof e.position === "number" ? `position ${e.position}: ${message}` : message;
}

/**
 * What in a JSONata AST could run unbounded in a single step, which the step hooks cannot
 * interrupt: a regex (a JavaScript RegExp backtracks without limit) or a range whose size is not
 * a literal of at most MAX_RANGE items (`[1..10000000]` allocates and sums for a second).
 */
function unbounded(node: unknown, seen = new Set<unknown>()): string | undefined {
  if (typeof node !== "object" || node === null || seen.has(node)) return undefined;
  seen.add(node);
  const n = node as { type?: string; position?: number; value?: unknown; lhs?: Literal; rhs?: Literal };
  const at = `position ${n.position ?? 0}`;
  if (n.type === "regex" || n.value instanceof RegExp) {
    return `${at}: regular expressions are not allowed (their running time cannot be bounded)`;
  }
  if (n.type === "binary" && n.value === "..") {
    const from = n.lhs?.type === "number" ? Number(n.lhs.value) : Number.NaN;
    const to = n.rhs?.type === "number" ? Number(n.rhs.value) : Number.NaN;
    if (!(to - from < MAX_RANGE)) {
      return `${at}: a range [a..b] needs number literals and at most ${MAX_RANGE} items`;
    }
  }
  for (const child of Object.values(node)) {
    const found = unbounded(child, seen);
    if (found !== undefined) return found;
  }
  return undefined;
}

interface Literal {
  type?: string;
  value?: unknown;
}

/** JSONata's $pad, refusing widths that would allocate megabytes in one step. */
function boundedPad(str: unknown, width: number, char?: string): string | undefined {
  if (str === undefined) return undefined;
  if (Math.abs(width) > MAX_PAD_WIDTH) throw new ExpressionError(`$pad width is at most ${MAX_PAD_WIDTH}`);
  const s = String(str);
  const fill = char === undefined || char === "" ? " " : char;
  const missing = Math.abs(width) - [...s].length;
  if (missing <= 0) return s;
  const padding = fill.repeat(Math.ceil(missing / fill.length)).slice(0, missing);
  return width > 0 ? s + padding : padding + s;
}
