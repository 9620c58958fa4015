import type { JsonObject } from "@bufbuild/protobuf";
import { parseDuration, parseIsoTimestamp, scanJsonText, timestampProblem } from "@hookpost/contract";
import { InvalidArgumentError } from "commander";

/** Flag value parsers for commander; a bad value is a usage error (exit 2) naming the flag. */

/** For repeatable flags: `--url a --url b`. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export function positiveInt(max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1 || n > max) {
      throw new InvalidArgumentError(`expected a whole number from 1 to ${max}`);
    }
    return n;
  };
}

/** A stream sequence number (uint64, from 1). */
export function sequence(value: string): bigint {
  const t = value.trim();
  if (!/^\d{1,20}$/.test(t) || BigInt(t) < 1n || BigInt(t) > 0xffffffffffffffffn) {
    throw new InvalidArgumentError(`expected a stream sequence number (1, 2, …), got "${t}"`);
  }
  return BigInt(t);
}

/** Repeatable sequence numbers; also accepts `1,2,3`. */
export function collectSequences(value: string, previous: bigint[] = []): bigint[] {
  return [...previous, ...value.split(",").map(sequence)];
}

/**
 * A JSON object (for Struct fields such as --properties). What JSON.parse would change silently
 * (a repeated key, an integer beyond ±(2^53 - 1)) is refused, as ingest's HTTP API refuses it.
 */
export function jsonObject(value: string): JsonObject {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (err) {
    throw new InvalidArgumentError(`not valid JSON: ${(err as Error).message}`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new InvalidArgumentError('expected a JSON object, like \'{"plan":"pro"}\'');
  }
  const [problem] = scanJsonText(Buffer.from(value)).violations;
  if (problem) throw new InvalidArgumentError(`${problem.field}: ${problem.description}`);
  return parsed as JsonObject;
}

/** An ISO 8601 date-time with a zone, for --timestamp: the contract's forms and range. */
export function isoDate(value: string): Date {
  const ts = parseIsoTimestamp(value);
  const problem = timestampProblem(ts);
  if (problem) throw new InvalidArgumentError(`the timestamp ${problem}`);
  return new Date(ts as number);
}

/** Repeatable `--header "Name: value"`. Later flags for the same name (any case) win. */
export function collectHeader(value: string, previous: [string, string][] = []): [string, string][] {
  const colon = value.indexOf(":");
  if (colon <= 0) throw new InvalidArgumentError('expected "Name: value"');
  const name = value.slice(0, colon).trim();
  const headerValue = value.slice(colon + 1).trim();
  if (name === "") throw new InvalidArgumentError('expected "Name: value"');
  return [...previous.filter(([n]) => n.toLowerCase() !== name.toLowerCase()), [name, headerValue]];
}

/** `1h`, `30m` (that long ago) or an ISO 8601 date-time with a zone: for --since/--until. */
export function pointInTime(value: string): Date {
  const t = value.trim();
  try {
    return t.includes("T") ? isoDate(t) : new Date(Date.now() - parseDuration(t));
  } catch {
    throw new InvalidArgumentError(
      "expected a duration ago (like 1h, 30m) or a date-time with a zone (like 2026-11-21T09:30:00Z)",
    );
  }
}
