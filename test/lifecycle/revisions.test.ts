import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitForRevision } from "../helpers/revisions.js";
import { Stack } from "../helpers/stack.js";
import { parseMetrics } from "../ops/helpers.js";

/**
 * Configuration convergence you can see: every admin write returns the revision it created, and
 * every service shows the revision it has applied on /readyz and as hookpost_config_revision.
 */

let stack: Stack;
let replicas: string[];

beforeAll(async () => {
  stack = await Stack.start({
    dispatchers: 2,
    ingest: { opsAddress: "127.0.0.1:0" },
    dispatcher: { opsAddr: "127.0.0.1:0" },
  });
  replicas = [stack.ingest.opsAddress!, ...stack.dispatchers.map((d) => `127.0.0.1:${d.opsPort}`)];
});

afterAll(async () => {
  await stack?.close();
});

async function readyRevision(ops: string): Promise<number> {
  const body = (await (await fetch(`http://${ops}/readyz`)).json()) as { configRevision: number };
  return body.configRevision;
}

async function metricRevision(ops: string): Promise<number> {
  const samples = parseMetrics(await (await fetch(`http://${ops}/metrics`)).text());
  return samples.find((s) => s.name === "hookpost_config_revision")!.value;
}

describe("configuration revisions", () => {
  it("every admin write returns a higher revision, which every replica reports once applied", async () => {
    const src = await stack.admin.createSource({ name: "rev" });
    const created = await stack.admin.createDestination({
      destination: { name: "hook", sourceIds: [src.source!.id], urls: [stack.receiver.url()], enabled: true },
    });
    const updated = await stack.admin.updateDestination({
      destination: { id: created.destination!.id, rateLimitPerSecond: 5 },
      updateMask: { paths: ["rate_limit_per_second"] },
    });
    const rotated = await stack.admin.rotateWriteKey({ id: src.source!.id });
    const deleted = await stack.admin.deleteDestination({ id: created.destination!.id });
    const revisions = [src, created, updated, rotated, deleted].map((r) => r.revision);
    for (let i = 1; i < revisions.length; i++) expect(revisions[i]!).toBeGreaterThan(revisions[i - 1]!);
    expect(updated.destination!.rateLimitPerSecond).toBe(5);

    const last = deleted.revision;
    await waitForRevision(last, replicas);
    for (const ops of replicas) {
      expect(await readyRevision(ops)).toBeGreaterThanOrEqual(Number(last));
      expect(await metricRevision(ops)).toBeGreaterThanOrEqual(Number(last));
    }
    for (const d of stack.dispatchers) expect(d.configRevision()).toBeGreaterThanOrEqual(Number(last));
  });

  it("refuses limits out of range and output-only fields in the mask", async () => {
    const src = await stack.admin.createSource({ name: "rev2" });
    await expect(
      stack.admin.createDestination({
        destination: { name: "h", sourceIds: [src.source!.id], urls: [stack.receiver.url()], maxInFlight: 0 },
      }),
    ).rejects.toThrow(/max_in_flight/);
    const d = await stack.admin.createDestination({
      destination: { name: "h", sourceIds: [src.source!.id], urls: [stack.receiver.url()], maxInFlight: 4 },
    });
    expect(d.destination!.maxInFlight).toBe(4);
    await expect(
      stack.admin.updateDestination({
        destination: { id: d.destination!.id },
        updateMask: { paths: ["disabled_reason"] },
      }),
    ).rejects.toThrow(/cannot be changed/);
    // Naming a limit in the mask without a value clears it.
    const cleared = await stack.admin.updateDestination({
      destination: { id: d.destination!.id },
      updateMask: { paths: ["max_in_flight"] },
    });
    expect(cleared.destination!.maxInFlight).toBeUndefined();
  });
});
