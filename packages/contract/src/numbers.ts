/*
 * Which numbers survive the webhook body's canonical form (SPEC section 12): a receiver verifies
 * X-Signature over JSON.stringify(JSON.parse(body)), so every number is a 64-bit float. Numbers
 * that cannot be carried that way unchanged are refused, on every transport, naming their path.
 */

/** The largest integer a 64-bit float holds exactly together with all smaller ones (2^53 - 1). */
const MAX_SAFE = String(Number.MAX_SAFE_INTEGER);

/** Why a number value cannot be carried (NaN, ±Infinity: JSON has no such numbers), or undefined. */
export function numberValueProblem(value: number, path: string): string | undefined {
  return Number.isFinite(value)
    ? undefined
    : `${path} is ${value}; numbers must be finite (JSON has no NaN or Infinity)`;
}

/**
 * Why a JSON number literal as sent would reach the webhook as another value, or undefined: an
 * integer literal beyond ±(2^53 - 1), which every JSON parser of the receiving side rounds
 * (`9007199254740993` becomes `...992`), or a number that overflows to Infinity (`1e400`).
 * Other literals keep their value (`1.0` is sent as `1`, `1E2` as `100`: same number).
 * `literal` is valid JSON number syntax.
 */
export function numberLiteralProblem(literal: string, path: string): string | undefined {
  const digits = literal.charCodeAt(0) === 0x2d ? literal.length - 1 : literal.length;
  if (isIntegerLiteral(literal)) {
    // JSON has no leading zeros: more digits is larger; as many digits compares as text.
    const sign = literal.length - digits;
    if (digits < MAX_SAFE.length || (digits === MAX_SAFE.length && literal.slice(sign) <= MAX_SAFE)) {
      return undefined;
    }
    return `${path} is ${clip(literal)}, an integer beyond ±${MAX_SAFE} (2^53 - 1): JSON parsers round it (it would arrive as ${clip(JSON.stringify(Number(literal)))}); send it as a string`;
  }
  if (Number.isFinite(Number(literal))) return undefined;
  return `${path} is ${clip(literal)}, which overflows a 64-bit float (it would become Infinity, which JSON cannot carry)`;
}

/** No fraction, no exponent. */
function isIntegerLiteral(literal: string): boolean {
  for (let i = 0; i < literal.length; i++) {
    const c = literal.charCodeAt(i);
    if (c === 0x2e || c === 0x65 || c === 0x45) return false;
  }
  return true;
}

function clip(text: string): string {
  return text.length <= 40 ? text : `${text.slice(0, 37)}...`;
}
