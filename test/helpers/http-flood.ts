import { request } from "node:http";
import { connect, type Socket } from "node:net";
import { basic } from "../http/helpers.js";
import { until } from "./until.js";

// A slow-connection flood of the ingest HTTP port from loopback addresses (127.0.0.2 and up),
// and real requests from 127.0.0.9 during it: test/http/flood.test.ts and bench/http-flood.ts.

export interface FloodTarget {
  host: string;
  port: number;
  /** Write key of the real requests. */
  writeKey: string;
}

/** The target of a flood of ingest's HTTP listener at `address` (`host:port`). */
export function floodTarget(address: string, writeKey: string): FloodTarget {
  const i = address.lastIndexOf(":");
  return { host: address.slice(0, i), port: Number(address.slice(i + 1)), writeKey };
}

/**
 * The slowloris: `total` connections that send request headers (or, with `body`, a request's
 * headers then its body) a byte at a time and never finish.
 */
export class Flood {
  /** Open connections, by when they connected (oldest first). */
  readonly #open = new Map<Socket, number>();
  #stopped = false;
  /** Connection attempts that got an answer (connected, or refused/reset). */
  attempts = 0;
  readonly #trickle: NodeJS.Timeout;

  readonly #opening: string;

  readonly #target: FloodTarget;

  constructor(target: FloodTarget, sources: readonly string[], total: number, body: boolean) {
    this.#target = target;
    // No write key in the headers: the body is read for one.
    this.#opening = body
      ? "POST /v1/track HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
      : "POST /v1/track HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (let i = 0; i < total; i++) this.#slot(sources[i % sources.length]!);
    // One byte per open connection every 500 ms: never a complete request, never silent.
    // not a wait: the slow client's trickle (the behaviour under test)
    this.#trickle = setInterval(() => {
      for (const s of this.#open.keys()) if (s.writable) s.write("a");
    }, 500);
  }

  #slot(localAddress: string): void {
    if (this.#stopped) return;
    const socket = connect({ host: this.#target.host, port: this.#target.port, localAddress });
    let counted = false;
    const count = () => {
      if (!counted) this.attempts++;
      counted = true;
    };
    socket.on("connect", () => {
      count();
      this.#open.set(socket, performance.now());
      socket.write(this.#opening);
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      count();
      this.#open.delete(socket);
      // Like an attacker, it comes back when cut off (after a second: the test shares 2 cores).
      // not a wait: the flood's reconnect pace (the load generator, not a fact awaited)
      if (!this.#stopped) setTimeout(() => this.#slot(localAddress), 1_000).unref();
    });
  }

  /** How long the oldest open connection has been held (ms). */
  get heldMs(): number {
    const first = this.#open.values().next().value;
    return first === undefined ? 0 : performance.now() - first;
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#trickle);
    for (const s of this.#open.keys()) s.destroy();
  }
}

/** One real `/v1/track` from `localAddress` on a fresh connection: its status, or the error. */
export function track(target: FloodTarget, localAddress: string, n: number): Promise<number | string> {
  const { host, port } = target;
  const body = JSON.stringify({ userId: "real", event: "Real", messageId: `real-${localAddress}-${n}` });
  return new Promise((resolve) => {
    const req = request(
      {
        host,
        port,
        localAddress,
        agent: false,
        method: "POST",
        path: "/v1/track",
        timeout: 5_000,
        headers: {
          "Content-Type": "application/json",
          "Content-Length": Buffer.byteLength(body),
          Authorization: basic(target.writeKey),
        },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
        res.on("error", (err) => resolve(err.message));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", (err) => resolve((err as NodeJS.ErrnoException).code ?? err.message));
    req.end(body);
  });
}

/** A real request's answer (HTTP status, or the error code) and how long it took. */
export interface RealAnswer {
  answer: number | string;
  ms: number;
}

/**
 * Floods from `sources` (none: no flood), then sends 36 real requests from 127.0.0.9 while the
 * flood goes on.
 */
export async function underFlood(
  target: FloodTarget,
  sources: readonly string[],
  body = false,
): Promise<RealAnswer[]> {
  const total = sources.length === 0 ? 0 : 1_100;
  const flood = new Flood(target, sources, total, body);
  try {
    // Every slot tried, and some held long enough (1.5 s) to count as slow for the listener.
    await until(() => total === 0 || (flood.attempts >= total && flood.heldMs >= 1_500), {
      timeout: 15_000,
      interval: 50,
      message: `the flood to try ${total} connections and hold some 1.5 s`,
    }).catch((err: Error) => {
      throw new Error(`${err.message}: ${flood.attempts} tried, held ${flood.heldMs} ms`);
    });
    const answers: RealAnswer[] = [];
    for (let n = 0; n < 36; n++) {
      const started = performance.now();
      const answer = await track(target, "127.0.0.9", n);
      answers.push({ answer, ms: performance.now() - started });
      // Spread over the flood (a few seconds), as real traffic would be.
      await new Promise((r) => setTimeout(r, 40)); // not a wait: paces the real traffic over the flood
    }
    return answers;
  } finally {
    flood.stop();
  }
}
