import { create } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { SyncDeps } from "@hookpost/api";
import type { StoredCall } from "@hookpost/contract";
import {
  ConfigStore,
  createLogger,
  DEFAULT_TOPOLOGY,
  EVENTS_STREAM,
  ensureTopology,
  MembershipStore,
  UserSourceIndex,
} from "@hookpost/core";
import { connect, type JetStreamManager, type NatsConnection } from "nats";
import { NatsServer } from "../helpers/nats-server.js";

export const log = createLogger("test-sync", "silent");

export interface Env {
  server: NatsServer;
  nc: NatsConnection;
  jsm: JetStreamManager;
  memberships: MembershipStore;
  index: UserSourceIndex;
  deps: SyncDeps;
  close(): Promise<void>;
}

/** A private nats-server with the Hookpost topology, a membership store and a user index. */
export async function startEnv(overrides: Partial<SyncDeps> = {}): Promise<Env> {
  const server = await NatsServer.start();
  const nc = await connect({
    servers: server.url,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 100,
  });
  const jsm = await nc.jetstreamManager();
  await ensureTopology(jsm, { ...DEFAULT_TOPOLOGY, eventsMaxBytes: 256 * 1024 * 1024 });
  const memberships = await MembershipStore.open(nc);
  const index = await UserSourceIndex.open(nc, { timeoutMs: 1_500 });
  const deps: SyncDeps = { nc, log, memberships, index, publishTimeoutMs: 2_000, ...overrides };
  return {
    server,
    nc,
    jsm,
    memberships,
    index,
    deps,
    async close() {
      index.close();
      await nc.close().catch(() => {});
      await server.stop();
    },
  };
}

export async function openConfig(nc: NatsConnection): Promise<ConfigStore> {
  return ConfigStore.open(nc);
}

export interface EventRecord {
  seq: number;
  subject: string;
  msgId: string | undefined;
  call: StoredCall;
}

/** Every message now on the EVENTS stream (read by sequence: the stream is a work queue). */
export async function readEvents(jsm: JetStreamManager): Promise<EventRecord[]> {
  const info = await jsm.streams.info(EVENTS_STREAM);
  const { first_seq, last_seq, messages } = info.state;
  if (messages === 0) return [];
  const out: EventRecord[] = [];
  const seqs: number[] = [];
  for (let s = first_seq; s <= last_seq; s++) seqs.push(s);
  for (let i = 0; i < seqs.length; i += 500) {
    const batch = await Promise.all(
      seqs
        .slice(i, i + 500)
        .map((seq) => jsm.streams.getMessage(EVENTS_STREAM, { seq }).catch(() => undefined)),
    );
    for (const m of batch) {
      if (!m) continue;
      out.push({
        seq: m.seq,
        subject: m.subject,
        msgId: m.header?.get("Nats-Msg-Id") || undefined,
        call: m.json<StoredCall>(),
      });
    }
  }
  return out;
}

export async function purgeEvents(jsm: JetStreamManager): Promise<void> {
  await jsm.streams.purge(EVENTS_STREAM);
}

/** The traits of the identify calls on EVENTS as `userId -> value` of one trait key. */
export function traitValues(events: EventRecord[], key: string): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const e of events) {
    if (e.call.type !== "identify" || !e.call.traits || !(key in e.call.traits)) continue;
    if (out.has(e.call.userId!)) throw new Error(`two identify calls for ${e.call.userId}`);
    out.set(e.call.userId!, e.call.traits[key]);
  }
  return out;
}

export async function* chunks<T>(items: T[]): AsyncGenerator<T> {
  for (const item of items) yield item;
}

/** SyncAudience messages: the name first (with the first chunk), then chunks of `size` ids. */
export function audienceMessages(name: string, ids: string[], size = 1000) {
  const out: Array<{ audienceName: string; userIds: string[] }> = [];
  for (let i = 0; i < ids.length || i === 0; i += size) {
    out.push({ audienceName: i === 0 ? name : "", userIds: ids.slice(i, i + size) });
  }
  return out;
}

export function v(json: null | boolean | number | string | object): Value {
  if (json === null) return create(ValueSchema, { kind: { case: "nullValue", value: 0 } });
  if (typeof json === "boolean") return create(ValueSchema, { kind: { case: "boolValue", value: json } });
  if (typeof json === "number") return create(ValueSchema, { kind: { case: "numberValue", value: json } });
  if (typeof json === "string") return create(ValueSchema, { kind: { case: "stringValue", value: json } });
  if (Array.isArray(json)) {
    return create(ValueSchema, { kind: { case: "listValue", value: { values: json.map(v) } } });
  }
  const fields: Record<string, Value> = {};
  for (const [k, x] of Object.entries(json)) fields[k] = v(x);
  return create(ValueSchema, { kind: { case: "structValue", value: { fields } } });
}

export const range = (n: number, prefix = "user-") => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
