import type { MessageInitShape } from "@bufbuild/protobuf";
import type { IngestConfig, IngestHandle } from "@hookpost/api";
import { adminMetadata, createClient, writeKeyMetadata } from "@hookpost/client";
import {
  AdminService,
  type Destination,
  type DestinationSchema,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { CONFIG_BUCKET, kvStream } from "@hookpost/core";
import {
  type DispatcherConfig,
  defaultDispatcherConfig,
  type RunningDispatcher,
  startDispatcher,
} from "@hookpost/dispatcher";
import { connect, type NatsConnection } from "nats";
import { startTestIngest } from "./ingest.js";
import { NatsServer } from "./nats-server.js";
import { quietLogger } from "./quiet-logger.js";
import { Receiver } from "./receiver.js";
import { waitForRevision } from "./revisions.js";

export const STACK_ADMIN_TOKEN = "stack-admin-token-0123456789abcdef";

export type AdminClient = ReturnType<typeof adminClient>;
export type IngestClient = ReturnType<typeof ingestClient>;

export const adminClient = (address: string) =>
  createClient(AdminService, address, { metadata: adminMetadata(STACK_ADMIN_TOKEN) });
export const ingestClient = (address: string, writeKey: string) =>
  createClient(IngestService, address, { metadata: writeKeyMetadata(writeKey) });

export interface StackOptions {
  dispatchers?: number;
  ingest?: Partial<IngestConfig>;
  dispatcher?: Partial<DispatcherConfig>;
}

/**
 * The whole pipeline in one test file: a private nats-server, an in-process ingest (gRPC on a
 * free loopback port), dispatcher replicas allowed to deliver to loopback, and a recording
 * webhook receiver.
 */
export class Stack {
  readonly nats: NatsServer;
  readonly ingest: IngestHandle;
  readonly dispatchers: RunningDispatcher[] = [];
  readonly receiver: Receiver;
  readonly admin: AdminClient;
  readonly nc: NatsConnection;
  readonly #clients: Array<{ close(): void }> = [];
  readonly #options: StackOptions;

  private constructor(
    nats: NatsServer,
    ingest: IngestHandle,
    receiver: Receiver,
    nc: NatsConnection,
    options: StackOptions,
  ) {
    this.nats = nats;
    this.ingest = ingest;
    this.receiver = receiver;
    this.nc = nc;
    this.admin = adminClient(ingest.address);
    this.#clients.push(this.admin);
    this.#options = options;
  }

  static async start(options: StackOptions = {}): Promise<Stack> {
    const nats = await NatsServer.start();
    const ingest = await startTestIngest(nats.url, STACK_ADMIN_TOKEN, options.ingest);
    const receiver = await Receiver.http();
    const nc = await connect({ servers: nats.url });
    const stack = new Stack(nats, ingest, receiver, nc, options);
    for (let i = 0; i < (options.dispatchers ?? 1); i++) await stack.addDispatcher();
    return stack;
  }

  dispatcherConfig(overrides: Partial<DispatcherConfig> = {}): DispatcherConfig {
    return defaultDispatcherConfig(this.nats.url, {
      allowedCidrs: ["127.0.0.0/8", "::1/128"],
      retryBaseDelayMs: 100,
      pullExpiresMs: 1000,
      shutdownGraceMs: 2000,
      ackWaitMs: 5000,
      ...this.#options.dispatcher,
      ...overrides,
    });
  }

  async addDispatcher(overrides: Partial<DispatcherConfig> = {}): Promise<RunningDispatcher> {
    const d = await startDispatcher(this.dispatcherConfig(overrides), { logger: quietLogger });
    this.dispatchers.push(d);
    return d;
  }

  /** Creates a source through the admin API; returns its id, write key and a client using it. */
  async source(name = "test source"): Promise<{ id: string; writeKey: string; client: IngestClient }> {
    const r = await this.admin.createSource({ name });
    const client = ingestClient(this.ingest.address, r.writeKey);
    this.#clients.push(client);
    return { id: r.source!.id, writeKey: r.writeKey, client };
  }

  /**
   * Creates an enabled destination (default: the stack's receiver) and waits until the
   * dispatchers have its consumer, so that calls sent next are routed to it.
   */
  async destination(init: MessageInitShape<typeof DestinationSchema>): Promise<Destination> {
    const r = await this.admin.createDestination({
      destination: { name: "hook", urls: [this.receiver.url()], enabled: true, ...init },
    });
    // Every replica applied it: its consumer exists and every router routes to it.
    await waitForRevision(r.revision, this.dispatchers);
    return r.destination!;
  }

  /**
   * Every replica applied the configuration as it is now, so a destination created before this
   * call is known to every router (`_destinationId` names what the caller waits for).
   */
  async waitForDestination(_destinationId: string): Promise<void> {
    const jsm = await this.nc.jetstreamManager();
    const latest = (await jsm.streams.info(kvStream(CONFIG_BUCKET))).state.last_seq;
    await waitForRevision(latest, this.dispatchers);
  }

  async close(): Promise<void> {
    for (const c of this.#clients) c.close();
    await Promise.all(this.dispatchers.map((d) => d.close()));
    await this.ingest.close();
    await this.receiver.close();
    await this.nc.close();
    await this.nats.stop();
  }
}
