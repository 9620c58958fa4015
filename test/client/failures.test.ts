import { createServer } from "node:net";
import { Analytics, AnalyticsError, type AnalyticsOptions } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import { describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { useFakeIngest } from "./fake-ingest.js";

const clients: Analytics[] = [];
const ingest = useFakeIngest({ clients });

/** A client with fast retries that records its error events. */
function client(options: AnalyticsOptions = {}, writeKey = ingest.writeKey) {
  const a = new Analytics(writeKey, {
    endpoint: ingest.target,
    flushAfter: 60_000,
    retryInitialDelayMs: 50,
    retryMaxDelayMs: 400,
    ...options,
  });
  const errors: AnalyticsError[] = [];
  a.on("error", (err) => errors.push(err));
  clients.push(a);
  return { a, errors };
}

/** A loopback port with nothing listening. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address() as { port: number };
  await new Promise((r) => srv.close(r));
  return port;
}

describe("retries", () => {
  it("stores a batch once after the server was down and came back on the same port", async () => {
    const { a, errors } = client({ flushAt: 5, maxRetries: 20 });
    await ingest.stop();
    const results: Array<AnalyticsError | undefined> = [];
    const ids = Array.from({ length: 5 }, (_, i) =>
      a.track({ userId: "u", event: `E${i}` }, (err) => results.push(err)),
    );
    // not a wait: 400 ms of outage in which attempts fail and no callback fires (the assertion)
    await new Promise((r) => setTimeout(r, 400));
    expect(results).toEqual([]);
    await ingest.restart();
    await a.flush();
    expect((await ingest.stored()).map((s) => s.messageId)).toEqual(ids);
    expect(ingest.batches).toHaveLength(1);
    expect(results).toEqual([undefined, undefined, undefined, undefined, undefined]);
    expect(errors).toEqual([]);
  });

  it("keeps the message ids on a retry, so a batch whose answer was lost is stored once", async () => {
    const { a, errors } = client({ flushAt: 3 });
    ingest.failNext(1, Code.UNAVAILABLE, true); // stored, then the answer fails
    const ids = [1, 2, 3].map((i) => a.identify({ userId: `u${i}` }));
    await a.flush();
    expect(ingest.attempts).toBe(2);
    expect(ingest.batches.map((b) => b.messageIds)).toEqual([ids, ids]); // received twice...
    expect((await ingest.stored()).map((s) => s.messageId)).toEqual(ids); // ...stored once
    expect(errors).toEqual([]);
  });

  it("retries DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED", async () => {
    const { a, errors } = client({ flushAt: 1 });
    ingest.failNext(1, Code.RESOURCE_EXHAUSTED);
    ingest.failNext(1, Code.DEADLINE_EXCEEDED);
    a.track({ userId: "u", event: "E" });
    await a.flush();
    expect(ingest.attempts).toBe(3);
    expect(ingest.storedNow).toHaveLength(1);
    expect(errors).toEqual([]);
  });
});

describe("failures are reported", () => {
  it("reports calls to an unreachable endpoint with the error event and callbacks", async () => {
    const { a, errors } = client({ endpoint: `127.0.0.1:${await closedPort()}`, flushAt: 2, maxRetries: 2 });
    const callbackErrors: Array<AnalyticsError | undefined> = [];
    const ids = [
      a.track({ userId: "u", event: "A" }, (err) => callbackErrors.push(err)),
      a.track({ userId: "u", event: "B" }, (err) => callbackErrors.push(err)),
    ];
    await a.flush();
    expect(errors).toHaveLength(1);
    const err = errors[0]!;
    expect(err).toBeInstanceOf(AnalyticsError);
    expect(err.code).toBe("delivery_failed");
    expect(err.grpcCode).toBe(Code.UNAVAILABLE);
    expect(err.message).toMatch(/2 call\(s\) not stored after 3 attempt\(s\): UNAVAILABLE/);
    expect(err.calls.map((c) => c.messageId)).toEqual(ids);
    expect(err.calls[0]).toMatchObject({ type: "track", userId: "u", event: "A" });
    expect(err.calls[0]!.timestamp).toBeInstanceOf(Date);
    expect(callbackErrors).toEqual([err, err]);
  });

  it("fails at once on a status that retrying cannot fix", async () => {
    const { a, errors } = client({ flushAt: 1 }, "wrong-key");
    a.track({ userId: "u", event: "E" });
    await a.flush();
    expect(ingest.attempts).toBe(1);
    expect(errors.map((e) => [e.code, e.grpcCode])).toEqual([["delivery_failed", Code.UNAUTHENTICATED]]);
  });

  it("fails only the calls the server refused and stores the others", async () => {
    ingest.refuse = (call) =>
      (call.value as { event?: string }).event === "Bad" ? "event name not allowed" : undefined;
    const { a, errors } = client({ flushAt: 3 });
    const [ok1, bad, ok2] = ["Good", "Bad", "Fine"].map((event) => a.track({ userId: "u", event }));
    await a.flush();
    expect((await ingest.stored()).map((s) => s.messageId)).toEqual([ok1, ok2]);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.code).toBe("invalid_call");
    expect(errors[0]!.grpcCode).toBe(Code.INVALID_ARGUMENT);
    expect(errors[0]!.calls.map((c) => c.messageId)).toEqual([bad]);
  });

  it("a batch over the server's MAX_BATCH_CALLS is sent again in smaller batches, not failed", async () => {
    ingest.maxBatchCalls = 4; // an operator's setting the client cannot know
    const { a, errors } = client({ flushAt: 100 });
    const results: Array<AnalyticsError | undefined> = [];
    const ids = Array.from({ length: 10 }, (_, i) =>
      a.track({ userId: "u", event: `E${i}` }, (err) => results.push(err)),
    );
    await a.flush();
    expect(errors.map((e) => e.message)).toEqual([]);
    expect((await ingest.stored()).map((s) => s.messageId)).toEqual(ids);
    expect(results).toEqual(ids.map(() => undefined));
    expect(Math.max(...ingest.batches.map((b) => b.messageIds.length))).toBeLessThanOrEqual(4);
  });

  it("close() with a timeout reports what it could not deliver and resolves", async () => {
    const { a, errors } = client({
      endpoint: `127.0.0.1:${await closedPort()}`,
      flushAt: 1,
      maxRetries: 1000,
    });
    const id = a.track({ userId: "u", event: "E" });
    const started = Date.now();
    await a.close({ timeoutMs: 300 });
    expect(Date.now() - started).toBeLessThan(5000);
    await until(() => errors.length > 0, { message: "error event" });
    expect(errors.flatMap((e) => e.calls.map((c) => c.messageId))).toEqual([id]);
    expect(errors[0]!.code).toBe("delivery_failed");
  });
});
