import { InputError, renderError, UsageError } from "@hookpost/cli";
import { Code, HookpostError } from "@hookpost/contract";
import { describe, expect, it } from "vitest";

const scene = { endpoint: "ingest.internal:50051", auth: "admin" as const, tls: false };

describe("renderError", () => {
  it("lists field violations once, one per line", () => {
    const err = HookpostError.invalid([
      { field: "destination.urls[0]", description: "must be an absolute http(s) URL" },
      { field: "destination.headers", description: "at most 5 headers" },
    ]);
    expect(renderError(err, scene)).toEqual({
      exitCode: 1,
      lines: [
        "error: invalid request",
        "  destination.urls[0]: must be an absolute http(s) URL",
        "  destination.headers: at most 5 headers",
      ],
      json: {
        error: {
          code: "INVALID_ARGUMENT",
          message: "invalid request",
          fieldViolations: [
            { field: "destination.urls[0]", description: "must be an absolute http(s) URL" },
            { field: "destination.headers", description: "at most 5 headers" },
          ],
        },
      },
    });
  });

  /** What the CLI prints for an UNAVAILABLE answer carrying `message`. */
  const unavailable = (message: string, tls = false) =>
    renderError(new HookpostError(Code.UNAVAILABLE, message), { ...scene, tls }).lines;

  it("turns grpc-js connection failures into one readable line with a hint", () => {
    expect(
      unavailable(
        "No connection established. Last error: Error: connect ECONNREFUSED 10.0.0.1:50051. Resolution note: ",
      ),
    ).toEqual([
      "error: cannot reach ingest.internal:50051 (connect ECONNREFUSED 10.0.0.1:50051)",
      "hint: is the ingest running at ingest.internal:50051? (set --endpoint or HOOKPOST_ENDPOINT; add --tls if it serves TLS)",
    ]);
    expect(
      unavailable(
        "No connection established. Last error: Error: 80:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../x.c:350:. Resolution note: ",
        true,
      ),
    ).toEqual([
      "error: cannot reach ingest.internal:50051 (TLS: wrong version number)",
      "hint: does ingest.internal:50051 speak TLS? add --tls (or --ca-file) for a TLS endpoint, drop it for plaintext",
    ]);
  });

  it("keeps the ingest's own UNAVAILABLE message, with a retry hint", () => {
    expect(unavailable("NATS (where configuration is stored) is unreachable: nothing was changed")).toEqual([
      "error: NATS (where configuration is stored) is unreachable: nothing was changed",
      "hint: the ingest answered but cannot serve right now (is NATS up?); retry shortly",
    ]);
  });

  it("hints at the credential the call used", () => {
    const err = new HookpostError(Code.UNAUTHENTICATED, "unknown write key");
    expect(renderError(err, { ...scene, auth: "write-key" }).lines[1]).toMatch(/^hint: check the write key/);
    expect(renderError(err, scene).lines[1]).toMatch(/^hint: check the admin token: set ADMIN_TOKEN/);
  });

  it("usage errors exit 2; input errors exit 1 with their problems", () => {
    expect(renderError(new UsageError("nothing to change"), scene)).toMatchObject({
      exitCode: 2,
      lines: ["error: nothing to change", "(run with --help for usage)"],
    });
    expect(
      renderError(
        new InputError("f.yaml has 1 problem", [{ path: "sources[0].id", message: "is required" }]),
        scene,
      ),
    ).toMatchObject({ exitCode: 1, lines: ["error: f.yaml has 1 problem", "  sources[0].id: is required"] });
  });
});
