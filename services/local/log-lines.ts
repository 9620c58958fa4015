/**
 * `npm start` shows the services' pino records as lines for people: one line per failed
 * delivery attempt (`✗ dest https://… 500 (attempt 3, next in 8 s): <start of the body>`),
 * warnings and errors as `[service] warn: message (key=value …)`, nothing else.
 */

type LogRecord = Record<string, unknown>;

/** Fields that are pino's own, not the message's. */
const PINO_FIELDS = new Set(["level", "time", "pid", "hostname", "name", "service", "msg", "v"]);
const WARN = 40;

export function humanLine(service: string, rec: LogRecord): string | undefined {
  switch (rec.msg) {
    case "delivery retry scheduled":
      return failedAttempt(rec, Number(rec.attempt), `next in ${duration(Number(rec.delayMs))}`);
    case "delivery dead-lettered":
      return failedAttempt(rec, Number(rec.attempts), `dead letter: ${String(rec.reason ?? "")}`);
    // Per-URL records: the delivery's own line above says it once per attempt.
    case "webhook attempt failed":
    case "webhook timed out":
      return undefined;
  }
  const level = typeof rec.level === "number" ? rec.level : 0;
  if (level < WARN) return undefined;
  const extra = Object.entries(rec)
    .filter(([k]) => !PINO_FIELDS.has(k))
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
  const name = level >= 60 ? "fatal" : level >= 50 ? "error" : "warn";
  return `[${service}] ${name}: ${String(rec.msg ?? "")}${extra.length > 0 ? ` (${extra.join(", ")})` : ""}`;
}

function failedAttempt(rec: LogRecord, attempt: number, next: string): string {
  const answer = rec.status ? String(rec.status) : String(rec.error ?? "failed");
  const why = oneLine(String(rec.response ?? "")) || oneLine(String(rec.detail ?? ""));
  const where = rec.url ? ` ${String(rec.url)}` : "";
  return `✗ ${String(rec.destinationId)}${where} ${answer} (attempt ${attempt}, ${next})${why ? `: ${why}` : ""}`;
}

/** The first 200 characters, on one line. */
function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim().slice(0, 200);
}

/** `850 ms`, `8 s`, `15 min`. */
export function duration(ms: number): string {
  if (!Number.isFinite(ms)) return "?";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  return `${Math.round(ms / 60_000)} min`;
}
