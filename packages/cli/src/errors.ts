import { Code, type FieldViolation, HookpostError } from "@hookpost/contract";

/** Exit status of a command that failed (server refused, file invalid, endpoint down). */
export const EXIT_FAILURE = 1;
/** Exit status of a command line that does not make sense (unknown flag, bad flag value). */
export const EXIT_USAGE = 2;

/** A problem with the command line itself: exit 2, nothing was sent. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** One problem in a piece of input, located by a path (`destinations[1].urls`). */
export interface InputProblem {
  path: string;
  message: string;
}

/** Bad input that is not a flag (a file, a reference to something missing): exit 1, nothing was sent. */
export class InputError extends Error {
  override readonly name = "InputError";
  readonly problems: readonly InputProblem[];

  constructor(message: string, problems: readonly InputProblem[] = []) {
    super(message);
    this.problems = problems;
  }
}

/** What the error renderer needs to know about the failed invocation to give a useful hint. */
export interface ErrorScene {
  endpoint: string;
  /** The credential the failing call carried. */
  auth: "admin" | "write-key" | undefined;
  /** Whether the connection used TLS. */
  tls?: boolean;
}

export interface RenderedError {
  exitCode: number;
  /** Lines for people: `error: …`, violations indented, then hints. */
  lines: string[];
  /** The same for machines (`--json`). */
  json: {
    error: { code: string; message: string; fieldViolations?: FieldViolation[]; hint?: string };
  };
}

export function renderError(err: unknown, scene: ErrorScene): RenderedError {
  if (err instanceof UsageError) {
    return {
      exitCode: EXIT_USAGE,
      lines: [`error: ${err.message}`, "(run with --help for usage)"],
      json: { error: { code: "USAGE", message: err.message } },
    };
  }
  if (err instanceof InputError) {
    const fieldViolations = err.problems.map((p) => ({ field: p.path, description: p.message }));
    return {
      exitCode: EXIT_FAILURE,
      lines: [`error: ${err.message}`, ...fieldViolations.map(violationLine)],
      json: {
        error: {
          code: "INVALID_INPUT",
          message: err.message,
          ...(fieldViolations.length > 0 ? { fieldViolations } : {}),
        },
      },
    };
  }
  if (err instanceof HookpostError) {
    const violations = [...err.fieldViolations];
    // The server's message repeats the violations inline; listing them once, one per line, reads better.
    const message =
      violations.length > 0 && err.message === HookpostError.invalid(violations).message
        ? "invalid request"
        : transportMessage(err, scene) || err.message || err.codeName;
    const hint = hintFor(err.code, scene, err.message);
    return {
      exitCode: EXIT_FAILURE,
      lines: [`error: ${message}`, ...violations.map(violationLine), ...(hint ? [`hint: ${hint}`] : [])],
      json: {
        error: {
          code: err.codeName,
          message,
          ...(violations.length > 0 ? { fieldViolations: violations } : {}),
          ...(hint ? { hint } : {}),
        },
      },
    };
  }
  const message = err instanceof Error ? err.message : String(err);
  return {
    exitCode: EXIT_FAILURE,
    lines: [`error: ${message}`],
    json: { error: { code: "INTERNAL", message } },
  };
}

/** grpc-js's "No connection established. Last error: Error: connect ECONNREFUSED …. Resolution note: " */
function transportMessage(err: HookpostError, scene: ErrorScene): string | undefined {
  if (err.code !== Code.UNAVAILABLE || !err.message.startsWith("No connection established")) return undefined;
  let last = /Last error: (?:Error: )?(.*?)\.?(?: Resolution note:.*)?$/s.exec(err.message)?.[1]?.trim();
  // OpenSSL's "806C…:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:…"
  const ssl = last && /SSL routines:[^:]*:([^:]+)/.exec(last);
  if (ssl) last = `TLS: ${ssl[1]}`;
  last = last?.replace(/\s*\(\d{4}-\d\d-\d\dT[^)]*\)$/, ""); // "Failed to connect (2026-…Z)"
  return `cannot reach ${scene.endpoint}${last ? ` (${last})` : ""}`;
}

function violationLine(v: FieldViolation): string {
  return `  ${v.field}: ${v.description}`;
}

/** grpc-js's own UNAVAILABLE messages (no server answered), as opposed to the ingest's. */
const TRANSPORT =
  /^(No connection established|Failed to connect|Connection dropped|Name resolution failed|connect E)/i;

function hintFor(code: Code, scene: ErrorScene, message: string): string | undefined {
  switch (code) {
    case Code.UNAVAILABLE:
      if (!TRANSPORT.test(message))
        return "the ingest answered but cannot serve right now (is NATS up?); retry shortly";
      if (/certificate|self.signed|unable to (get|verify)/i.test(message)) {
        return "the server's TLS certificate is not trusted: pass --ca-file with the CA that signed it";
      }
      if (/wrong version number|packet length|ssl|tls|protocol error/i.test(message)) {
        return `does ${scene.endpoint} speak TLS? add --tls (or --ca-file) for a TLS endpoint, drop it for plaintext`;
      }
      return `is the ingest running at ${scene.endpoint}? (set --endpoint or HOOKPOST_ENDPOINT${scene.tls ? "" : "; add --tls if it serves TLS"})`;
    case Code.DEADLINE_EXCEEDED:
      return `no answer from ${scene.endpoint} in time (raise --timeout, or check the endpoint)`;
    case Code.UNAUTHENTICATED:
    case Code.PERMISSION_DENIED:
      return scene.auth === "write-key"
        ? "check the write key (--write-key or HOOKPOST_WRITE_KEY); `hookpost sources rotate-key <id>` issues a new one"
        : "check the admin token: set ADMIN_TOKEN (or pass --token) to the ingest's ADMIN_TOKEN";
    default:
      return undefined;
  }
}
