import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";

export function toDate(ts: Timestamp | undefined): Date | undefined {
  return ts ? timestampDate(ts) : undefined;
}

/** "3 min ago" / "in 20 s"; "—" when unknown. */
export function relative(ts: Timestamp | undefined, now = Date.now()): string {
  const d = toDate(ts);
  if (!d) return "—";
  const s = Math.round((d.getTime() - now) / 1000);
  const a = Math.abs(s);
  const text =
    a < 60
      ? `${a} s`
      : a < 3600
        ? `${Math.round(a / 60)} min`
        : a < 86400
          ? `${Math.round(a / 3600)} h`
          : `${Math.round(a / 86400)} d`;
  return s <= 0 ? `${text} ago` : `in ${text}`;
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
