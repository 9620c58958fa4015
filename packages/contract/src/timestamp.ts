/**
 * Timestamps of the contract. A call's time is kept as integer milliseconds since the epoch and
 * rendered with `Date#toISOString` (`YYYY-MM-DDTHH:mm:ss.sssZ`, SPEC section 5).
 *
 * The rule: a timestamp lies between 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z once
 * in UTC (anything else is refused: it would render as `+010000-…` or `-000001-…`); digits below
 * the millisecond are TRUNCATED, never rounded, so 9999-12-31T23:59:59.999999999Z is stored as
 * 9999-12-31T23:59:59.999Z and no accepted time moves past the one sent.
 */
export type Timestamp = number | InvalidTimestamp;

/** A timestamp that could not be read; the rules report `problem` on the timestamp field. */
export class InvalidTimestamp {
  constructor(readonly problem: string) {}
}

/** 0001-01-01T00:00:00.000Z (google.protobuf.Timestamp's lower bound). */
export const MIN_TIMESTAMP_MS = -62_135_596_800_000;
/** 9999-12-31T23:59:59.999Z (google.protobuf.Timestamp's upper bound, in milliseconds). */
export const MAX_TIMESTAMP_MS = 253_402_300_799_999;

export const TIMESTAMP_RANGE = "between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z (UTC)";

/** Why a timestamp breaks the rule, or undefined. */
export function timestampProblem(ts: Timestamp): string | undefined {
  if (ts instanceof InvalidTimestamp) return ts.problem;
  if (!Number.isInteger(ts) || ts < MIN_TIMESTAMP_MS || ts > MAX_TIMESTAMP_MS) {
    return `is out of range: it must lie ${TIMESTAMP_RANGE}`;
  }
  return undefined;
}

/** A google.protobuf.Timestamp (seconds, nanos) in contract form. */
export function fromProtoTimestamp(seconds: bigint, nanos: number): Timestamp {
  if (!Number.isInteger(nanos) || nanos < 0 || nanos > 999_999_999) {
    return new InvalidTimestamp("has invalid nanos: they must be between 0 and 999999999");
  }
  // Out-of-range seconds stay out of range as a Number; the rule refuses them.
  return Number(seconds) * 1000 + Math.floor(nanos / 1_000_000);
}

/** A JavaScript Date in contract form (an Invalid Date is refused). */
export function fromDate(date: Date): Timestamp {
  const ms = date.getTime();
  return Number.isNaN(ms) ? new InvalidTimestamp("is an invalid Date") : ms;
}

// RFC 3339 / ISO 8601 date-time as SDKs write it: `T` or a space, optional fraction (any
// number of digits), and `Z`, `+hh:mm`, `+hhmm` or `+hh`.
const ISO =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;

export const TIMESTAMP_FORMS =
  "an ISO 8601 date-time with an offset, e.g. 2026-11-21T09:30:00Z, 2026-11-21T09:30:00.123+05:30 or 2026-11-21T09:30:00+0000";

/** Reads an ISO 8601 / RFC 3339 text (the forms real SDKs write) as UTC milliseconds. */
export function parseIsoTimestamp(text: string): Timestamp {
  const m = ISO.exec(text);
  if (!m) return new InvalidTimestamp(`is not ${TIMESTAMP_FORMS}`);
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysIn(year, month) ||
    hour > 23 ||
    minute > 59 ||
    second > 59
  ) {
    return new InvalidTimestamp(`is not a real date and time (${TIMESTAMP_FORMS})`);
  }
  const offsetHours = m[10] === undefined ? 0 : Number(m[10]);
  const offsetMinutes = m[11] === undefined ? 0 : Number(m[11]);
  if (offsetHours > 23 || offsetMinutes > 59) return new InvalidTimestamp("has an invalid UTC offset");
  const sign = m[9] === "-" ? -1 : 1;
  const fraction = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, "0"));
  // Date.UTC maps years 0..99 to 1900..1999; setUTCFullYear does not.
  const d = new Date(Date.UTC(2000, month - 1, day, hour, minute, second, fraction));
  d.setUTCFullYear(year);
  return d.getTime() - sign * (offsetHours * 60 + offsetMinutes) * 60_000;
}

function daysIn(year: number, month: number): number {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!;
}
