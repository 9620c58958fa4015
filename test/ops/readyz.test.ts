import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { httpStatus } from "./helpers.js";

// /readyz of both services follows the NATS connection: ready, NATS killed -> 503 within a few
// seconds, NATS back -> ready again. /healthz (the process is alive) stays 200 throughout.

let stack: Stack;

beforeAll(async () => {
  stack = await Stack.start({
    ingest: { opsAddress: "127.0.0.1:0" },
    dispatcher: { opsAddr: "127.0.0.1:0" },
  });
});

afterAll(async () => {
  await stack?.close();
});

describe("/readyz flips when NATS goes away", () => {
  it("ingest and dispatcher: 200, 503 while NATS is down, 200 when it is back", async () => {
    const src = await stack.source("readyz");
    await stack.destination({ sourceIds: [src.id] });
    await stack.destination({ sourceIds: [src.id], name: "second" });
    const ingest = `http://${stack.ingest.opsAddress}`;
    const dispatcher = `http://127.0.0.1:${stack.dispatchers[0]!.opsPort}`;

    for (const base of [ingest, dispatcher]) {
      expect(await httpStatus(`${base}/readyz`), base).toBe(200);
      expect(await httpStatus(`${base}/healthz`), base).toBe(200);
    }
    const body = (await (await fetch(`${dispatcher}/readyz`)).json()) as Record<string, unknown>;
    // Both destinations known; every delivery partition pulled (no consumer per destination).
    expect(body).toMatchObject({ status: "ready", nats: true, enabled: 2, pulling: true });

    await stack.nats.kill();
    for (const base of [ingest, dispatcher]) {
      await until(async () => (await httpStatus(`${base}/readyz`)) === 503, {
        timeout: 5_000,
        message: `${base}/readyz to answer 503`,
      });
      expect(await httpStatus(`${base}/healthz`), base).toBe(200);
    }
    const down = (await (await fetch(`${ingest}/readyz`)).json()) as Record<string, unknown>;
    expect(down).toMatchObject({ status: "not ready", nats: false });
    // /metrics still answers while NATS is away (the backlog lookup, which needs NATS, is bounded),
    // and shows the connection down.
    for (const base of [ingest, dispatcher]) {
      const started = Date.now();
      const res = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(30_000) });
      const text = await res.text();
      expect(res.status, base).toBe(200);
      expect(Date.now() - started, `${base}/metrics while NATS is down`).toBeLessThan(8_000);
      if (base === ingest) expect(text).toContain("hookpost_ingest_nats_connected 0");
      else expect(text).toContain("hookpost_dispatcher_deliveries_total");
    }

    await stack.nats.restart();
    for (const base of [ingest, dispatcher]) {
      await until(async () => (await httpStatus(`${base}/readyz`)) === 200, {
        timeout: 20_000,
        message: `${base}/readyz to answer 200`,
      });
    }

    // And the pipeline works again.
    await src.client.track({ userId: "u-1", event: "Back" });
    await stack.receiver.waitFor(1);
  });
});
