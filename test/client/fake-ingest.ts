/**
 * A real gRPC server on a loopback port implementing IngestService.Batch the way the ingest
 * service answers it (Basic write-key auth, the contract's all-or-nothing validation with
 * `calls[i].field` violations and limits, dedup by message id), recording what it stores. It stands in for
 * the ingest service until end-to-end tests run the real one: tests that only use the
 * `IngestHarness` part run unchanged against any implementation of it.
 */
import { toBinary } from "@bufbuild/protobuf";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import {
  Code,
  DEFAULT_MAX_BATCH_CALLS,
  type FieldViolation,
  HookpostError,
  protoBatchViolations,
} from "@hookpost/contract";
import {
  type BatchCall,
  type BatchRequest,
  BatchRequestSchema,
  IngestService,
} from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { addService } from "@hookpost/core";
import { afterEach, beforeEach } from "vitest";
import { lateBound } from "../helpers/late-bound.js";

type CallValue = NonNullable<BatchCall["call"]["value"]>;

export interface StoredCall {
  type: NonNullable<BatchCall["call"]["case"]>;
  messageId: string;
  value: CallValue;
}

/** What a client test needs from an ingest service, fake or real. */
export interface IngestHarness {
  /** gRPC target, e.g. `127.0.0.1:40123`. */
  readonly target: string;
  /** A write key the service accepts. */
  readonly writeKey: string;
  /** Calls stored, once per message id, in arrival order. */
  stored(): Promise<StoredCall[]>;
  close(): Promise<void>;
}

export interface ReceivedBatch {
  /** Encoded BatchRequest size. */
  bytes: number;
  messageIds: string[];
}

const WRITE_KEY = "test-write-key";

export class FakeIngest implements IngestHarness {
  readonly writeKey = WRITE_KEY;
  /** Every Batch RPC that reached the handler, accepted or not. */
  attempts = 0;
  /** Accepted batches, duplicates included. */
  readonly batches: ReceivedBatch[] = [];
  /** Highest number of Batch RPCs handled at the same time. */
  maxConcurrent = 0;
  /** Milliseconds each Batch waits before answering. */
  delayMs = 0;
  /** Server-side rule the client does not know: a description refuses the call. */
  refuse: ((call: StoredCall) => string | undefined) | undefined;
  /** The server's MAX_BATCH_CALLS setting. */
  maxBatchCalls = DEFAULT_MAX_BATCH_CALLS;

  private readonly byId = new Map<string, StoredCall>();
  private readonly failures: Array<{ code: Code; afterStore: boolean }> = [];
  private concurrent = 0;
  private server: Server | undefined;
  private _port = 0;

  private constructor() {}

  /** Starts on a random loopback port (or `port`, to come back where a client expects it). */
  static async start(port = 0): Promise<FakeIngest> {
    const fake = new FakeIngest();
    fake._port = await fake.listen(port);
    return fake;
  }

  get port(): number {
    return this._port;
  }

  get target(): string {
    return `127.0.0.1:${this.port}`;
  }

  async stored(): Promise<StoredCall[]> {
    return [...this.byId.values()];
  }

  /** Stored calls without waiting (the fake holds them in memory). */
  get storedNow(): StoredCall[] {
    return [...this.byId.values()];
  }

  /** The next `times` Batch RPCs answer `code`; with `afterStore`, after storing (a lost answer). */
  failNext(times: number, code: Code = Code.UNAVAILABLE, afterStore = false): void {
    for (let i = 0; i < times; i++) this.failures.push({ code, afterStore });
  }

  /** Stops listening and drops connections, like a crashed server. */
  async stop(): Promise<void> {
    this.server?.forceShutdown();
    this.server = undefined;
  }

  /** Listens again on the same port, keeping what was stored. */
  async restart(): Promise<void> {
    await this.listen(this.port);
  }

  async close(): Promise<void> {
    await this.stop();
  }

  private async listen(port: number): Promise<number> {
    const server = new Server({ "grpc.max_receive_message_length": 8 * 1024 * 1024 });
    addService(server, IngestService, {
      batch: async (req, ctx) => {
        this.attempts++;
        this.concurrent++;
        this.maxConcurrent = Math.max(this.maxConcurrent, this.concurrent);
        try {
          // not a wait: a slow server answers late (the behaviour under test)
          if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
          const auth = ctx.metadata.get("authorization")[0];
          if (auth !== `Basic ${Buffer.from(`${WRITE_KEY}:`).toString("base64")}`) {
            throw new HookpostError(Code.UNAUTHENTICATED, "missing or unknown write key");
          }
          const failure = this.failures.shift();
          if (failure && !failure.afterStore) throw new HookpostError(failure.code, "injected failure");
          const ids = this.store(req);
          if (failure) throw new HookpostError(failure.code, "injected failure after storing");
          return { messageIds: ids };
        } finally {
          this.concurrent--;
        }
      },
    });
    const bound = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    this.server = server;
    return bound;
  }

  /** Validates all calls first (all-or-nothing, the contract's rules), then stores the ones not seen before. */
  private store(req: BatchRequest): string[] {
    const encoded = toBinary(BatchRequestSchema, req);
    const bytes = encoded.length;
    const violations: FieldViolation[] = protoBatchViolations(req, encoded, this.maxBatchCalls);
    const calls: StoredCall[] = [];
    req.calls.forEach((c, i) => {
      if (!c.call.case) return;
      const call = { type: c.call.case, messageId: c.call.value.messageId, value: c.call.value };
      // The client always assigns ids; the real server would generate one.
      if (!call.messageId) violations.push({ field: `calls[${i}].message_id`, description: "missing" });
      const refused = this.refuse?.(call);
      if (refused) violations.push({ field: `calls[${i}].event`, description: refused });
      calls.push(call);
    });
    if (violations.length > 0) throw HookpostError.invalid(violations);
    for (const call of calls) if (!this.byId.has(call.messageId)) this.byId.set(call.messageId, call);
    this.batches.push({ bytes, messageIds: calls.map((c) => c.messageId) });
    return calls.map((c) => c.messageId);
  }
}

/**
 * A FakeIngest for each test of the file: started before it, closed after it, together with
 * the clients the test opened on it (`clients`, emptied each time); then `afterClose`.
 */
export function useFakeIngest(
  options: {
    clients?: { close(o: { timeoutMs: number }): Promise<unknown> }[];
    afterClose?: () => void;
  } = {},
): FakeIngest {
  let ingest: FakeIngest | undefined;
  beforeEach(async () => {
    ingest = await FakeIngest.start();
  });
  afterEach(async () => {
    await Promise.all((options.clients ?? []).splice(0).map((c) => c.close({ timeoutMs: 2000 })));
    await ingest?.close();
    options.afterClose?.();
  });
  return lateBound(() => ingest, "useFakeIngest");
}
