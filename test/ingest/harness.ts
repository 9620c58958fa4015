import { Client, credentials, Metadata } from "@grpc/grpc-js";
import type { IngestConfig, SourceQuotaSettings } from "@hookpost/api";
import { type IngestHandle, startIngest } from "@hookpost/api";
import { adminMetadata, createClient, writeKeyMetadata } from "@hookpost/client";
import type { StoredCall } from "@hookpost/contract";
import { HookpostError } from "@hookpost/contract";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { DEFAULT_TOPOLOGY, EVENTS_STREAM, type TopologySettings } from "@hookpost/core";
import { connect, type JetStreamManager, type NatsConnection } from "nats";
import { type Logger, pino } from "pino";
import { testIngestConfig } from "../helpers/ingest.js";
import { NatsServer } from "../helpers/nats-server.js";
import { until } from "../helpers/until.js";
import { useFixture } from "../helpers/use-fixture.js";

export const ADMIN_TOKEN = "test-admin-token-0123456789";

export type IngestClient = ReturnType<typeof ingestClient>;
export type AdminClient = ReturnType<typeof adminClient>;

export function ingestClient(address: string, metadata: Record<string, string> = {}) {
  return createClient(IngestService, address, { metadata });
}

export function adminClient(address: string, token = ADMIN_TOKEN) {
  return createClient(AdminService, address, { metadata: adminMetadata(token) });
}

export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

export function testConfig(natsUrl: string, overrides: Partial<IngestConfig> = {}): IngestConfig {
  return testIngestConfig(natsUrl, ADMIN_TOKEN, overrides);
}

/** Per-source quotas that never act: for tests of what happens when a stream itself fills up. */
export const NO_SOURCE_QUOTA: SourceQuotaSettings = {
  maxPendingBytes: Number.MAX_SAFE_INTEGER,
  maxRate: 1e9,
  burst: 1e9,
  refreshMs: 1_000,
};

/** A gRPC call with raw request and response bytes (for garbage input and byte-level checks). */
export function rawCall(
  client: Client,
  path: string,
  request: Uint8Array,
  metadata: Record<string, string> = {},
  timeoutMs = 10_000,
): Promise<{ code: number; details: string; bytes: Buffer | undefined }> {
  const md = new Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.from(request),
      md,
      { deadline: Date.now() + timeoutMs },
      (err, value) =>
        resolve(
          err
            ? { code: err.code, details: err.details, bytes: undefined }
            : { code: 0, details: "", bytes: value },
        ),
    );
  });
}

export function rawClient(address: string): Client {
  return new Client(address, credentials.createInsecure(), {});
}

/** Catches the HookpostError a call rejects with (fails the test when it succeeds). */
export async function failure(p: Promise<unknown>): Promise<HookpostError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof HookpostError) return err;
    throw err;
  }
  throw new Error("expected the call to fail, but it succeeded");
}

/** The field names of an error's BadRequest violations. */
export const fields = (err: HookpostError) => err.fieldViolations.map((v) => v.field);

/**
 * One test file's world: a private nats-server, an in-process ingest on a free port, an
 * admin client, and a NATS connection to look into the streams.
 */
export class Harness {
  readonly clients: { close(): void }[] = [];

  private constructor(
    readonly nats: NatsServer,
    readonly ingest: IngestHandle,
    readonly nc: NatsConnection,
    readonly jsm: JetStreamManager,
    readonly admin: AdminClient,
  ) {}

  /** `http://host:port` of the HTTP listener (started with `httpAddress` in the config). */
  get httpBase(): string {
    return `http://${this.ingest.httpAddress}`;
  }

  static async start(
    options: { topology?: Partial<TopologySettings>; config?: Partial<IngestConfig>; logger?: Logger } = {},
  ): Promise<Harness> {
    const nats = await NatsServer.start();
    const ingest = await startIngest(
      testConfig(nats.url, {
        topology: { ...DEFAULT_TOPOLOGY, ...options.topology },
        ...options.config,
      }),
      { logger: options.logger ?? silentLogger() },
    );
    const nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    const admin = adminClient(ingest.address);
    const h = new Harness(nats, ingest, nc, await nc.jetstreamManager(), admin);
    h.clients.push(admin);
    return h;
  }

  get address(): string {
    return this.ingest.address;
  }

  /**
   * Restarts nats-server and waits until the harness's own connection is back. nats.js drops
   * what it buffered at each reconnect attempt, so a request sent before that is lost and times
   * out; a PING answered is the fact that requests go through again.
   */
  async restartNats(): Promise<void> {
    await this.nats.restart();
    await until(() => this.nc.flush().then(() => true), {
      timeout: 30_000,
      message: "the harness's NATS connection to come back",
    });
  }

  client(metadata: Record<string, string> = {}): IngestClient {
    const c = ingestClient(this.address, metadata);
    this.clients.push(c);
    return c;
  }

  /** Creates a source; returns its id, write key and a client that authenticates with it. */
  async source(name = "web"): Promise<{ id: string; writeKey: string; client: IngestClient }> {
    const res = await this.admin.createSource({ name });
    return {
      id: res.source!.id,
      writeKey: res.writeKey,
      client: this.client(writeKeyMetadata(res.writeKey)),
    };
  }

  async messageCount(): Promise<number> {
    return (await this.jsm.streams.info(EVENTS_STREAM)).state.messages;
  }

  /** Every call stored on EVENTS, oldest first, with its subject. */
  async stored(): Promise<{ subject: string; call: StoredCall; raw: string; msgId: string | undefined }[]> {
    const { state } = await this.jsm.streams.info(EVENTS_STREAM);
    const out = [];
    for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
      const m = await this.jsm.streams.getMessage(EVENTS_STREAM, { seq });
      out.push({
        subject: m.subject,
        call: m.json<StoredCall>(),
        raw: m.string(),
        msgId: m.header.get("Nats-Msg-Id"),
      });
    }
    return out;
  }

  /** The stored call with this message id (undefined when not stored). */
  async find(messageId: string) {
    return (await this.stored()).find((s) => s.call.messageId === messageId);
  }

  async close(): Promise<void> {
    for (const c of this.clients) c.close();
    await this.ingest?.close();
    await this.nc?.close();
    await this.nats?.stop();
  }
}

/**
 * useHarness with the HTTP API, whose sources are rate limited at once: a burst of 2 calls, then
 * `maxRate` calls a second (pending bytes, 64 MiB, are never the limit).
 */
export function useRateLimitedHarness(maxRate: number): Harness {
  return useHarness({
    config: {
      httpAddress: "127.0.0.1:0",
      quota: { maxPendingBytes: 64 * 1024 ** 2, maxRate, burst: 2, refreshMs: 1000 },
    },
  });
}

/**
 * A Harness for the enclosing file or describe block: started in its beforeAll (before hooks
 * registered after this call), closed in its afterAll. Use it inside tests and hooks.
 */
export function useHarness(options?: Parameters<typeof Harness.start>[0]): Harness {
  return useFixture(() => Harness.start(options), "useHarness");
}
