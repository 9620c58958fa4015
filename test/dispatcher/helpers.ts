import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { StoredCall } from "@hookpost/contract";
import type { DestinationRecord } from "@hookpost/core";
import {
  ConfigStore,
  DEFAULT_TOPOLOGY,
  DeadLetters,
  EVENT_SUBJECT_PREFIX,
  EVENTS_STREAM,
  ensureTopology,
  eventSubject,
} from "@hookpost/core";
import {
  type DispatcherConfig,
  defaultDispatcherConfig,
  type RunningDispatcher,
  startDispatcher,
} from "@hookpost/dispatcher";
import { connect, type JetStreamClient, type JetStreamManager, type NatsConnection } from "nats";
import { afterAll, afterEach, beforeAll } from "vitest";
import { NatsServer } from "../helpers/nats-server.js";
import { quietLogger } from "../helpers/quiet-logger.js";
import { Receiver } from "../helpers/receiver.js";
import { waitForRevision } from "../helpers/revisions.js";
import { until } from "../helpers/until.js";

export { type ReceivedRequest, Receiver, type Reply } from "../helpers/receiver.js";

export interface TestCerts {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  selfSignedCert: string;
  selfSignedKey: string;
}

/** A test CA with a server certificate for 127.0.0.1/localhost, and a self-signed one, via openssl. */
export function makeCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), "hookpost-certs-"));
  const f = (name: string) => join(dir, name);
  const ossl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  const san = "subjectAltName=IP:127.0.0.1,DNS:localhost";
  // A new RSA key and its request (or, with -x509, its self-signed certificate).
  const req = (key: string, out: string, subj: string, ...extra: string[]) =>
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f(key), "-out", f(out), "-subj", subj, ...extra);
  const twoDays = ["-x509", "-days", "2"];
  req("ca.key", "ca.pem", "/CN=Hookpost Test CA", ...twoDays);
  req("server.key", "server.csr", "/CN=localhost");
  writeFileSync(f("ext.cnf"), `${san}\nbasicConstraints=CA:FALSE\n`);
  ossl(
    "x509",
    "-req",
    "-in",
    f("server.csr"),
    "-CA",
    f("ca.pem"),
    "-CAkey",
    f("ca.key"),
    "-CAcreateserial",
    "-out",
    f("server.pem"),
    "-days",
    "2",
    "-extfile",
    f("ext.cnf"),
  );
  req("self.key", "self.pem", "/CN=localhost", ...twoDays, "-addext", san);
  return {
    dir,
    caCert: f("ca.pem"),
    serverCert: f("server.pem"),
    serverKey: f("server.key"),
    selfSignedCert: f("self.pem"),
    selfSignedKey: f("self.key"),
  };
}

let seq = 0;

/** A destination record with sensible test defaults. */
export function destination(
  partial: Partial<DestinationRecord> & Pick<DestinationRecord, "id" | "urls">,
): DestinationRecord {
  const now = new Date(Date.UTC(2026, 0, 1, 0, 0, 0, seq++)).toISOString();
  return {
    name: partial.id,
    sourceIds: ["src1"],
    headers: {},
    signing: "segment",
    enabled: true,
    createdAt: now,
    updatedAt: now,
    ...partial,
  };
}

/** Publishes a call to EVENTS the way ingest does (Nats-Msg-Id = message id). */
export async function publishCall(js: JetStreamClient, call: StoredCall): Promise<void> {
  await js.publish(eventSubject(call.sourceId, call.type), JSON.stringify(call), { msgID: call.messageId });
}

/**
 * Waits until the router is done with every call of `sourceId`: EVENTS is a work queue, a call
 * leaves it once its fan-out is stored or attempted directly (and that attempt counted).
 */
export async function eventsRouted(jsm: JetStreamManager, sourceId: string): Promise<void> {
  await until(
    async () => {
      const info = await jsm.streams.info(EVENTS_STREAM, {
        subjects_filter: `${EVENT_SUBJECT_PREFIX}${sourceId}.>`,
      });
      return Object.keys(info.state.subjects ?? {}).length === 0;
    },
    { message: `the calls of ${sourceId} routed` },
  );
}

let callSeq = 0;

export function track(partial: Partial<StoredCall> = {}): StoredCall {
  callSeq++;
  return {
    type: "track",
    messageId: `msg-${process.pid}-${callSeq}-${Math.random().toString(36).slice(2, 8)}`,
    sourceId: "src1",
    receivedAt: "2026-11-21T09:30:00.000Z",
    timestamp: "2026-11-21T09:30:00.000Z",
    userId: "u1",
    event: "Signed Up",
    properties: { plan: "pro" },
    ...partial,
  };
}

/** Test dispatcher settings: loopback allowed, short delays. */
export function testConfig(natsUrl: string, overrides: Partial<DispatcherConfig> = {}): DispatcherConfig {
  const base = defaultDispatcherConfig(natsUrl, {
    allowedCidrs: ["127.0.0.0/8", "::1/128"],
    webhookTimeoutMs: 5000,
    retryBaseDelayMs: 100,
    pullExpiresMs: 1000,
    shutdownGraceMs: 2000,
    ackWaitMs: 5000,
  });
  return { ...base, ...overrides, topology: { ...base.topology, ...overrides.topology } };
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export interface Pipeline {
  server: NatsServer;
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  store: ConfigStore;
  deadLetters: DeadLetters;
  /**
   * Puts a destination and waits until every running dispatcher applied it (its revision; a new
   * one: its consumer exists), so that calls published next are routed to it. Returns the revision.
   */
  putDestination(record: DestinationRecord): Promise<number>;
  /** Waits until every running dispatcher applied configuration revision `revision`. */
  applied(revision: number): Promise<void>;
  /** Starts an in-process dispatcher on this server, closed by close(). */
  dispatcher(overrides?: Partial<DispatcherConfig>): Promise<RunningDispatcher>;
  close(): Promise<void>;
}

/** A private nats-server with the topology in place, a config store and dead-letter access. */
export async function pipeline(): Promise<Pipeline> {
  const server = await NatsServer.start();
  const nc = await connect({ servers: server.url });
  const jsm = await nc.jetstreamManager();
  await ensureTopology(jsm, DEFAULT_TOPOLOGY);
  const store = await ConfigStore.open(nc);
  const deadLetters = await DeadLetters.open(nc);
  const running: RunningDispatcher[] = [];
  return {
    server,
    nc,
    js: nc.jetstream(),
    jsm,
    store,
    deadLetters,
    async putDestination(record) {
      const revision = await store.putDestination(record);
      await waitForRevision(revision, running);
      return revision;
    },
    applied: (revision) => waitForRevision(revision, running),
    async dispatcher(overrides = {}) {
      const d = await startDispatcher(testConfig(server.url, overrides), { logger: quietLogger });
      running.push(d);
      const close = d.close;
      d.close = () => {
        if (running.includes(d)) running.splice(running.indexOf(d), 1);
        return close();
      };
      return d;
    },
    async close() {
      await Promise.all([...running].map((d) => d.close()));
      store.close();
      await nc.close();
      await server.stop();
    },
  };
}

/**
 * For a test file: a pipeline with one dispatcher and an HTTP receiver, started before its tests
 * and closed after them (read `p` and `rx` inside the tests).
 */
export function pipelineWithReceiver(): { readonly p: Pipeline; readonly rx: Receiver } {
  const t = {} as { p: Pipeline; rx: Receiver };
  beforeAll(async () => {
    t.p = await pipeline();
    await t.p.dispatcher();
    t.rx = await Receiver.http();
  });
  afterAll(async () => {
    await t.p?.close();
    await t.rx?.close();
  });
  return t;
}

/**
 * For a test file whose tests each start the dispatcher they need: a pipeline started before its
 * tests and closed after them (read `p` inside the tests); `d`, the dispatcher a test sets, is
 * closed after that test whatever its outcome; `receiver()` opens an HTTP receiver, closed after
 * the file's tests (useReceivers).
 */
export function pipelineWithDispatcherPerTest(): {
  readonly p: Pipeline;
  d: RunningDispatcher | undefined;
  receiver(): Promise<Receiver>;
} {
  const t = {} as { p: Pipeline; d: RunningDispatcher | undefined; receiver(): Promise<Receiver> };
  beforeAll(async () => {
    t.p = await pipeline();
  });
  afterEach(async () => {
    await t.d?.close();
    t.d = undefined;
  });
  afterAll(async () => {
    await t.p?.close();
  });
  // Registered after the pipeline's hooks: the receivers close before it.
  t.receiver = useReceivers().receiver;
  return t;
}

/** A test file's HTTP receivers, closed after its tests: `receiver()` opens one, `keep()` takes one opened otherwise. */
export function useReceivers(): { receiver(): Promise<Receiver>; keep(r: Receiver): void } {
  const all: Receiver[] = [];
  afterAll(async () => {
    await Promise.all(all.map((r) => r.close()));
  });
  return {
    receiver: async () => {
      const r = await Receiver.http();
      all.push(r);
      return r;
    },
    keep: (r) => void all.push(r),
  };
}
