import { setTimeout as sleep } from "node:timers/promises";
import { connect, type NatsConnection } from "nats";
import type { Logger } from "../log/logger.js";

/**
 * Connects and keeps reconnecting forever: services must survive NATS restarts and
 * come back on their own. Waits for the first connection too, so a service can start
 * before NATS does.
 */
export async function connectNats(url: string, name: string, log: Logger): Promise<NatsConnection> {
  const nc = await connect({
    servers: url.split(","),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
    // A frozen or partitioned server is noticed within about 6 s and left for another cluster
    // member, inside ingest's publish deadline (PUBLISH_TIMEOUT_MS, 8 s).
    pingInterval: 2_000,
    maxPingOut: 2,
    // A frozen server still accepts TCP connections but never answers: give up on it quickly.
    timeout: 3_000,
    // Otherwise nats.js captures a stack trace for every request (PubAcks, pulls, KV): about
    // 20 % of a publish's client CPU in the profiles (bench/PROFILE.md).
    noAsyncTraces: true,
  });
  log.info({ server: nc.getServer() }, "connected to NATS");
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === "disconnect" || s.type === "reconnect" || s.type === "error") {
        log.warn({ event: s.type, data: String(s.data) }, "NATS connection status");
      }
    }
  })();
  return nc;
}

/**
 * Drains the connection (flushes what is pending), then closes it; bounded by `timeoutMs`, as a
 * drain cannot finish while NATS is away.
 */
export async function drainNats(nc: NatsConnection, timeoutMs: number): Promise<void> {
  const drained = await Promise.race([
    nc.drain().then(
      () => true,
      () => false,
    ),
    sleep(timeoutMs, false, { ref: false }),
  ]);
  if (!drained) await nc.close().catch(() => {});
}
