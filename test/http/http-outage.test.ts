import { EVENTS_STREAM } from "@hookpost/core";
import { beforeAll, describe, expect, it } from "vitest";
import { NO_SOURCE_QUOTA, useHarness } from "../ingest/harness.js";
import { type Answer, post } from "./helpers.js";

const h = useHarness({
  topology: { eventsMaxBytes: 64 * 1024 },
  // The stream itself fills up here, not a source's quota.
  config: { httpAddress: "127.0.0.1:0", quota: NO_SOURCE_QUOTA },
});
let writeKey: string;
let base: string;

beforeAll(async () => {
  // A small EVENTS stream, so that filling it takes a few dozen calls.
  writeKey = (await h.source("web")).writeKey;
  base = h.httpBase;
});

const properties = { blob: "x".repeat(4 * 1024) };

describe("answers that make SDKs retry", () => {
  it("429 with Retry-After when the stream is full; older calls are kept", async () => {
    await h.jsm.streams.purge(EVENTS_STREAM);
    let full: Answer | undefined;
    for (let i = 0; i < 100 && !full; i++) {
      const r = await post(
        base,
        "/v1/track",
        { userId: "u", event: "E", messageId: `fill-${i}`, properties },
        { writeKey },
      );
      if (r.status !== 200) full = r;
    }
    expect(full, "the stream filled up").toBeDefined();
    expect(full!.status).toBe(429);
    expect(full!.body.code).toBe("RESOURCE_EXHAUSTED");
    expect(Number(full!.headers.get("retry-after"))).toBeGreaterThan(0);
    const batch = await post(
      base,
      "/v1/batch",
      { batch: [{ type: "track", userId: "u", event: "E", properties }] },
      { writeKey },
    );
    expect(batch.status).toBe(429);
    expect(await h.find("fill-0")).toBeDefined();
  });

  it("503 with Retry-After while NATS is down", async () => {
    await h.nats.kill();
    const r = await post(base, "/v1/track", { userId: "u", event: "E" }, { writeKey });
    expect(r.status).toBe(503);
    expect(r.body.code).toBe("UNAVAILABLE");
    expect(r.body.message).toContain("retry");
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});
