import { request } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterValue } from "../e2e/helpers.js";
import { Harness } from "../ingest/harness.js";
import { basic } from "./helpers.js";

// Issue 22 finding 8: ~1 100 connections trickling bytes held every slot of the HTTP port,
// and 0-1 of 36 real requests got through. Default limits throughout: the test is about them.

let h: Harness;
let src: { id: string; writeKey: string };
let host: string;
let port: number;

beforeAll(async () => {
  h = await Harness.start({ config: { httpAddress: "127.0.0.1:0" } });
  src = await h.source("flooded");
  const address = h.ingest.httpAddress!;
  host = address.slice(0, address.lastIndexOf(":"));
  port = Number(address.slice(address.lastIndexOf(":") + 1));
});

afterAll(async () => {
  await h?.close();
});

/**
 * The slowloris: `total` connections that send request headers (or, with `body`, a request's
 * headers then its body) a byte at a time and never finish.
 */
class Flood {
  /** Open connections, by when they connected (oldest first). */
  readonly #open = new Map<Socket, number>();
  #stopped = false;
  /** Connection attempts that got an answer (connected, or refused/reset). */
  attempts = 0;
  readonly #trickle: NodeJS.Timeout;

  readonly #opening: string;

  constructor(sources: readonly string[], total: number, body: boolean) {
    // No write key in the headers: the body is read for one.
    this.#opening = body
      ? "POST /v1/track HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
      : "POST /v1/track HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (let i = 0; i < total; i++) this.#slot(sources[i % sources.length]!);
    // One byte per open connection every 500 ms: never a complete request, never silent.
    this.#trickle = setInterval(() => {
      for (const s of this.#open.keys()) if (s.writable) s.write("a");
    }, 500);
  }

  #slot(localAddress: string): void {
    if (this.#stopped) return;
    const socket = connect({ host, port, localAddress });
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
function track(localAddress: string, n: number): Promise<number | string> {
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
          Authorization: basic(src.writeKey),
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

/** Floods from `sources`, then sends 36 real requests from 127.0.0.9 while the flood goes on. */
async function underFlood(sources: readonly string[], body = false): Promise<(number | string)[]> {
  const total = 1_100;
  const flood = new Flood(sources, total, body);
  try {
    const deadline = Date.now() + 15_000;
    // Every slot tried, and some held long enough (1.5 s) to count as slow for the listener.
    while (flood.attempts < total || flood.heldMs < 1_500) {
      if (Date.now() > deadline) {
        throw new Error(`flood: ${flood.attempts} of ${total} connections tried, held ${flood.heldMs} ms`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const answers: (number | string)[] = [];
    for (let n = 0; n < 36; n++) {
      answers.push(await track("127.0.0.9", n));
      // Spread over the flood (a few seconds), as real traffic would be.
      await new Promise((r) => setTimeout(r, 40));
    }
    return answers;
  } finally {
    flood.stop();
  }
}

const succeeded = (answers: (number | string)[]) => answers.filter((a) => a === 200).length;
const closedFor = (reason: string) =>
  counterValue(h.ingest.metrics.registry, "hookpost_ingest_http_connections_closed_total", { reason });

describe("a flood of slow connections (issue 22 finding 8)", () => {
  it("from 4 addresses leaves real requests from another address served (>= 35 of 36)", async () => {
    const answers = await underFlood(["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]);
    expect(succeeded(answers), `answers: ${answers.join(" ")}`).toBeGreaterThanOrEqual(35);
    const perIp = await closedFor("per_ip");
    expect(perIp, "connections over the per-address cap are counted").toBeGreaterThan(0);
  });

  it("from 1 address leaves real requests from another address served (>= 35 of 36)", async () => {
    const answers = await underFlood(["127.0.0.2"]);
    expect(succeeded(answers), `answers: ${answers.join(" ")}`).toBeGreaterThanOrEqual(35);
  });

  const many = Array.from({ length: 22 }, (_, i) => `127.0.1.${i + 1}`);

  it("from 22 addresses (under the per-address cap, over the total) sheds the slowest, not newcomers", async () => {
    const answers = await underFlood(many);
    expect(succeeded(answers), `answers: ${answers.join(" ")}`).toBeGreaterThanOrEqual(35);
    const shed = await closedFor("shed");
    expect(shed, "connections shed at the total cap are counted").toBeGreaterThan(0);
  });

  it("of bodies trickling from 22 addresses sheds the slowest requests, not newcomers", async () => {
    const answers = await underFlood(many, true);
    expect(succeeded(answers), `answers: ${answers.join(" ")}`).toBeGreaterThanOrEqual(35);
    // A request cut off mid-body is a cancelled call, not an internal error (nor an error log).
    const calls = (code: string) =>
      counterValue(h.ingest.metrics.registry, "hookpost_ingest_calls_total", { transport: "http", code });
    expect(await calls("CANCELLED")).toBeGreaterThan(0);
    expect(await calls("INTERNAL")).toBe(0);
  });
});
