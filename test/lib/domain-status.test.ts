import { Code, HookpostError } from "@hookpost/contract";
import { AlreadyExistsError, ConflictError, DomainError, toHookpostError } from "@hookpost/core";
import { describe, expect, it } from "vitest";

// Stores throw domain errors; the edges answer them with one map (core/grpc/domain-status.ts).
describe("domain errors at the gRPC edge", () => {
  it("maps every domain code to its status and keeps the message and retry delay", () => {
    const cases: Array<[DomainError, Code]> = [
      [new DomainError("NOT_FOUND", "x"), Code.NOT_FOUND],
      [new AlreadyExistsError("taken"), Code.ALREADY_EXISTS],
      [new ConflictError("changed"), Code.ABORTED],
      [new DomainError("FULL", "full", { retryAfterMs: 5_000 }), Code.RESOURCE_EXHAUSTED],
      [new DomainError("UNAVAILABLE", "down"), Code.UNAVAILABLE],
      [new DomainError("INVALID", "bad"), Code.INVALID_ARGUMENT],
      [new DomainError("CORRUPT", "digest"), Code.INTERNAL],
    ];
    for (const [err, code] of cases) {
      const answered = toHookpostError(err);
      expect(answered?.code, err.code).toBe(code);
      expect(answered?.message).toBe(err.message);
      expect(answered?.retryAfterMs).toBe(err.retryAfterMs);
    }
  });

  it("passes HookpostErrors through and leaves anything else to the edge (INTERNAL, logged)", () => {
    const herr = new HookpostError(Code.PERMISSION_DENIED, "no");
    expect(toHookpostError(herr)).toBe(herr);
    expect(toHookpostError(new Error("bug"))).toBeUndefined();
  });
});
