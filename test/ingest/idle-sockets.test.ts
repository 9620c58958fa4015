import { connect as h2connect, constants as h2constants } from "node:http2";
import { connect, type Socket } from "node:net";
import { type Client, connectivityState } from "@grpc/grpc-js";
import { Code } from "@hookpost/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useIngestProcess } from "../helpers/ingest.js";
import { useNats } from "../helpers/use-nats.js";
import { ADMIN_TOKEN, adminClient, rawCall, rawClient } from "./harness.js";

const HEALTH = "/grpc.health.v1.Health/Check";

/**
 * Raw TCP connections that never speak must not pile up in ingest until it runs out of file
 * descriptors (issue 10, finding 4). A real ingest process with small limits; the sockets are
 * opened here and never closed by this side: the server has to close them, while a real client
 * connected before keeps working on its connection throughout.
 */
/** Long enough that the sockets over the cap are surely refused before the first timeout frees a slot. */
const HANDSHAKE_MS = 3_000;
const OPS_IDLE_MS = 1_000;
const GRPC_CAP = 200;
const OPS_CAP = 10;

const nats = useNats();
const ingest = useIngestProcess(nats, ADMIN_TOKEN, {
  OPS_ADDR: "127.0.0.1:0",
  GRPC_HANDSHAKE_TIMEOUT: `${HANDSHAKE_MS}ms`,
  GRPC_MAX_CONNECTIONS: String(GRPC_CAP),
  OPS_MAX_CONNECTIONS: String(OPS_CAP),
  OPS_IDLE_TIMEOUT: `${OPS_IDLE_MS}ms`,
});
let grpcAddress: string;
let opsAddress: string;
const held: Socket[] = [];

beforeAll(() => {
  grpcAddress = String(ingest.listening.address);
  opsAddress = String(ingest.listening.ops);
});

afterAll(() => {
  for (const s of held) s.destroy();
});

interface Opened {
  socket: Socket;
  /** performance.now() when the server closed it. */
  closedAt: Promise<number>;
}

/** Opens a TCP connection that sends nothing and records when the server closes it. */
function silentSocket(address: string): Promise<Opened> {
  const i = address.lastIndexOf(":");
  return new Promise((resolve, reject) => {
    const socket = connect({ host: address.slice(0, i), port: Number(address.slice(i + 1)) });
    held.push(socket);
    socket.on("error", () => {});
    socket.once("connect", () => {
      const closedAt = new Promise<number>((res) => socket.once("close", () => res(performance.now())));
      // Read (and drop) what the server sends, so that its GOAWAY cannot hold the socket open.
      socket.resume();
      resolve({ socket, closedAt });
    });
    socket.once("error", reject);
  });
}

function summary(times: number[]) {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (q: number) =>
    Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0);
  return { min: at(0), median: at(0.5), max: at(1) };
}

/** hookpost_ingest_grpc_connections_closed_total by reason, from the ops port. */
async function closedByReason(): Promise<Record<string, number>> {
  const text = await (await fetch(`http://${opsAddress}/metrics`)).text();
  const out: Record<string, number> = { handshake_timeout: 0, max_connections: 0, ping_strikes: 0 };
  for (const m of text.matchAll(
    /^hookpost_ingest_grpc_connections_closed_total\{reason="(\w+)"\} (\d+)$/gm,
  )) {
    out[m[1]!] = Number(m[2]);
  }
  return out;
}

describe("idle sockets", () => {
  it("closes silent gRPC connections (over the cap at once, the rest after the handshake timeout) while a real client keeps working", async () => {
    const admin = adminClient(grpcAddress);
    await admin.createSource({ name: "before" });
    // A plain grpc-js client, to watch its channel: a reconnect shows as a state change.
    const raw = rawClient(grpcAddress);
    expect((await rawCall(raw, HEALTH, new Uint8Array())).code).toBe(Code.OK);
    const states = watchStates(raw);

    const N = GRPC_CAP + 150;
    const t0 = performance.now();
    const opened = await Promise.all(Array.from({ length: N }, () => silentSocket(grpcAddress)));
    let calls = 0;
    let stop = false;
    const traffic = (async () => {
      while (!stop) {
        const r = await rawCall(raw, HEALTH, new Uint8Array());
        expect(r.code, r.details).toBe(Code.OK);
        calls++;
      }
    })();
    const closedAt = await Promise.all(opened.map((o) => o.closedAt));
    stop = true;
    await traffic;
    expect(closedAt).toHaveLength(N);
    expect(calls).toBeGreaterThan(0);
    // Every silent socket was closed by one of the two limits, and the cap did refuse some.
    const closed = await closedByReason();
    expect(closed.handshake_timeout + closed.max_connections).toBe(N);
    expect(closed.max_connections).toBeGreaterThan(0);
    // The real client's connection was never closed under it.
    expect(states.stop(), "channel state changes").toEqual([]);
    raw.close();

    // And the port takes new clients again.
    const fresh = adminClient(grpcAddress);
    expect((await fresh.listSources({})).sources.map((s) => s.name)).toContain("before");
    fresh.close();
    admin.close();
    const refused = closedAt.map((t) => t - t0).filter((t) => t < HANDSHAKE_MS);
    const timedOut = closedAt.map((t) => t - t0).filter((t) => t >= HANDSHAKE_MS);
    console.log(
      `gRPC port: ${N} silent sockets (GRPC_MAX_CONNECTIONS ${GRPC_CAP}, GRPC_HANDSHAKE_TIMEOUT ${HANDSHAKE_MS} ms), all closed by ingest: ` +
        `${closed.max_connections} refused over the cap (closed ${JSON.stringify(summary(refused))} ms after opening began), ` +
        `${closed.handshake_timeout} closed by the handshake timeout (${JSON.stringify(summary(timedOut))}); ` +
        `${calls} health calls OK on the real client meanwhile, its channel never left READY`,
    );
  }, 120_000);

  it("keeps a client that completed the HTTP/2 handshake past the handshake timeout", async () => {
    const session = h2connect(`http://${grpcAddress}`);
    await new Promise<void>((resolve, reject) => {
      session.once("remoteSettings", () => resolve());
      session.once("error", reject);
    });
    // A silent socket opened after it: once the server has closed that one, the handshake
    // timeout has passed for the session too.
    const later = await silentSocket(grpcAddress);
    await later.closedAt;
    expect(session.closed || session.destroyed).toBe(false);
    session.close();
  }, 60_000);

  it("closes a connection that pings too often without calls (GOAWAY ENHANCE_YOUR_CALM, too_many_pings)", async () => {
    const session = h2connect(`http://${grpcAddress}`);
    session.on("error", () => {});
    const goaway = new Promise<{ code: number; data: string }>((resolve) =>
      session.once("goaway", (code, _last, data) => resolve({ code, data: data?.toString() ?? "" })),
    );
    await new Promise<void>((resolve) => session.once("remoteSettings", () => resolve()));
    // Without calls one ping per two hours is allowed; GRPC_MAX_PING_STRIKES (2) more are tolerated.
    let acked = 0;
    for (let i = 0; i < 4 && !session.destroyed; i++) {
      await new Promise<void>((resolve) =>
        session.ping((err) => {
          if (!err) acked++;
          resolve();
        }),
      );
    }
    expect(await goaway).toEqual({ code: h2constants.NGHTTP2_ENHANCE_YOUR_CALM, data: "too_many_pings" });
    expect(acked).toBeLessThanOrEqual(4);
    expect((await closedByReason()).ping_strikes).toBe(1);
    session.destroy();
  }, 60_000);

  it("closes silent ops-port connections and still answers /healthz", async () => {
    const N = OPS_CAP + 20;
    const t0 = performance.now();
    const opened = await Promise.all(Array.from({ length: N }, () => silentSocket(opsAddress)));
    const closedAfter = (await Promise.all(opened.map((o) => o.closedAt))).map((t) => t - t0);
    expect(closedAfter).toHaveLength(N);
    const res = await fetch(`http://${opsAddress}/healthz`);
    expect(res.status).toBe(200);
    const early = closedAfter.filter((t) => t < OPS_IDLE_MS);
    console.log(
      `ops port: ${N} silent sockets (OPS_MAX_CONNECTIONS ${OPS_CAP}, OPS_IDLE_TIMEOUT ${OPS_IDLE_MS} ms) all closed by ingest: ` +
        `${early.length} before the idle timeout (over the cap; ${JSON.stringify(summary(early))} ms), ` +
        `${N - early.length} by it (${JSON.stringify(summary(closedAfter.filter((t) => t >= OPS_IDLE_MS)))} ms)`,
    );
  }, 60_000);
});

/** Records the connectivity states a client's channel goes through until `stop()`. */
function watchStates(client: Client): { stop(): string[] } {
  const channel = client.getChannel();
  const seen: string[] = [];
  let stopped = false;
  const watch = () => {
    const current = channel.getConnectivityState(false);
    channel.watchConnectivityState(current, Date.now() + 600_000, (err) => {
      if (err || stopped) return;
      seen.push(connectivityState[channel.getConnectivityState(false)]!);
      watch();
    });
  };
  watch();
  return {
    stop: () => {
      stopped = true;
      return seen;
    },
  };
}
