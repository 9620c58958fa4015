import { setTimeout as sleep } from "node:timers/promises";
import { EVENTS_STREAM } from "@hookpost/core";
import type { JetStreamManager } from "nats";
import { expect } from "vitest";
import { type Answer, post } from "../http/helpers.js";
import { until } from "./until.js";

export const BLOB = "x".repeat(4 * 1024);

/**
 * Sends 4 KiB track calls with `writeKey` to the HTTP APIs at `urls` in turn (as behind a load
 * balancer) until one is refused; every `paceEvery` calls it waits `paceMs`, so that each replica
 * sees the others' calls through JetStream. Resolves with the refusal (undefined after `max`).
 */
export async function sendUntilRefused(
  urls: readonly string[],
  writeKey: string,
  o: { paceEvery?: number; paceMs?: number; max?: number; messageIdPrefix?: string } = {},
): Promise<{ refused: Answer | undefined; accepted: number }> {
  let accepted = 0;
  for (let i = 0; i < (o.max ?? 300); i++) {
    const messageId = o.messageIdPrefix === undefined ? undefined : `${o.messageIdPrefix}-${i}`;
    const r = await post(
      urls[i % urls.length]!,
      "/v1/track",
      { userId: "u", event: "E", messageId, properties: { blob: BLOB } },
      { writeKey },
    );
    if (r.status !== 200) return { refused: r, accepted };
    accepted++;
    // not a wait: paces the load generator (so a refill of the quota is part of the scenario)
    if (o.paceEvery !== undefined && i % o.paceEvery === o.paceEvery - 1) await sleep(o.paceMs ?? 300);
  }
  return { refused: undefined, accepted };
}

/** Calls of a source on EVENTS (per-subject counts). */
export async function eventsOf(jsm: JetStreamManager, sourceId: string): Promise<number> {
  const info = await jsm.streams.info(EVENTS_STREAM, { subjects_filter: `hookpost.events.${sourceId}.>` });
  return Object.values(info.state.subjects ?? {}).reduce((n, c) => n + c, 0);
}

/**
 * With source A at its quota: every replica refuses A and accepts B; once A's calls left EVENTS
 * (purged here, as if delivered), every replica accepts A again.
 */
export async function expectOnlyARefusedUntilDrained(
  jsm: JetStreamManager,
  urls: readonly string[],
  a: { id: string; writeKey: string },
  b: { writeKey: string },
): Promise<void> {
  const track = (url: string, writeKey: string) =>
    post(url, "/v1/track", { userId: "u", event: "E" }, { writeKey });
  for (const url of urls) {
    // A replica sees the others' calls at its next read of JetStream (every second): until then
    // it may still accept A's small calls.
    await until(async () => (await track(url, a.writeKey)).status === 429, {
      message: `A refused by ${url}`,
    });
    expect((await track(url, b.writeKey)).status, `B at ${url}`).toBe(200);
  }
  await jsm.streams.purge(EVENTS_STREAM, { filter: `hookpost.events.${a.id}.>` });
  for (const url of urls) {
    await until(async () => (await track(url, a.writeKey)).status === 200, {
      message: `A accepted again by ${url}`,
    });
  }
}
