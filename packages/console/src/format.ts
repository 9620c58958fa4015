import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";

export function toDate(ts: Timestamp | undefined): Date | undefined {
  return ts ? timestampDate(ts) : undefined;
}

/** "3 min ago" / "in 20 s"; "—" when unknown. */
export function relative(ts: Timestamp | undefined, now = Date.now()): string {
  const d = toDate(ts);
  if (!d) return "—";
  const ms = d.getTime() - now;
  const text = span(Math.abs(ms));
  return Math.round(ms / 1000) <= 0 ? `${text} ago` : `in ${text}`;
}

/** A length of time, rounded to its largest unit: "45 s", "3 min", "2 h", "4 d". */
export function span(ms: number): string {
  const a = Math.round(ms / 1000);
  return a < 60
    ? `${a} s`
    : a < 3600
      ? `${Math.round(a / 60)} min`
      : a < 86400
        ? `${Math.round(a / 3600)} h`
        : `${Math.round(a / 86400)} d`;
}

export function absolute(ts: Timestamp | undefined): string {
  const d = toDate(ts);
  return d ? d.toLocaleString() : "";
}

export function percent(rate: number, attempts: number): string {
  return attempts === 0 ? "—" : `${(rate * 100).toFixed(rate >= 0.999 || rate === 0 ? 0 : 1)} %`;
}

/** Pretty-prints JSON bodies; other text as is. */
export function prettyBody(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}
