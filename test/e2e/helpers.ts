import { connect, createServer, type Server, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { IngestHandle } from "@hookpost/api";
import { startTestIngest } from "../helpers/ingest.js";
import type { Receiver } from "../helpers/receiver.js";
import { STACK_ADMIN_TOKEN } from "../helpers/stack.js";

/**
 * Longer pulls than the Stack's 1 s: nats.js ends a fetch on its own timer at 1.05 x expires, and
 * on a loaded machine the server may still hand messages to that pull afterwards; they are lost to
 * the client and come back only after the consumer's ack wait (30 s for the router). 5 % of 3 s
 * leaves enough slack (see the report on services/dispatcher/puller.ts).
 */
export const STACK_OPTIONS = { dispatcher: { pullExpiresMs: 3_000 } };

/** A loopback port that was free a moment ago (listen on 0, read it, close). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** An extra in-process ingest on a given address, on the stack's NATS (same admin token). */
export function ingestOn(natsUrl: string, address: string): Promise<IngestHandle> {
  return startTestIngest(natsUrl, STACK_ADMIN_TOKEN, { address });
}

/** Parsed JSON bodies of what a receiver got. */
export function bodies(receiver: Receiver): Array<Record<string, unknown>> {
  return receiver.requests.map((r) => JSON.parse(r.body.toString()) as Record<string, unknown>);
}

/**
 * Asserts by waiting: gives the pipeline `ms` to deliver anything extra, then returns the count.
 * Used after the expected requests arrived, to show that nothing more (a duplicate, a
 * notification to the wrong destination) follows.
 */
export async function settledCount(receiver: Receiver, ms = 600): Promise<number> {
  await sleep(ms); // not a wait: nothing more arrives during ms (the assertion)
  return receiver.requests.length;
}

/** Sum of a counter of a prom-client registry over the series matching `labels`. */
export async function counterValue(
  registry: { getSingleMetric(name: string): { get(): unknown } | undefined },
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return 0;
  const data = (await metric.get()) as { values: Array<{ value: number; labels: Record<string, unknown> }> };
  return data.values
    .filter((v) => Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want))
    .reduce((sum, v) => sum + v.value, 0);
}

/**
 * A TCP proxy in front of a gRPC server. In `swallow` mode it still forwards what the client
 * sends but drops what the server answers, so a request can be stored while its answer is lost;
 * `cut()` then drops every connection (the client sees UNAVAILABLE and retries).
 */
export class LossyProxy {
  swallow = false;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(upstreamPort: number): Promise<LossyProxy> {
    const server = createServer();
    const proxy = new LossyProxy(server);
    server.on("connection", (client: Socket) => {
      const upstream = connect(upstreamPort, "127.0.0.1");
      for (const s of [client, upstream]) {
        proxy.#sockets.add(s);
        s.on("close", () => proxy.#sockets.delete(s));
        s.on("error", () => {});
      }
      client.on("data", (d: Buffer) => upstream.write(d));
      upstream.on("data", (d: Buffer) => {
        if (!proxy.swallow) client.write(d);
      });
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    return proxy;
  }

  get target(): string {
    return `127.0.0.1:${(this.#server.address() as { port: number }).port}`;
  }

  /** Drops every open connection. */
  cut(): void {
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
