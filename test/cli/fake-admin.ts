import { randomBytes, randomUUID } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Timestamp, timestampNow } from "@bufbuild/protobuf/wkt";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import { Code, type FieldViolation, HookpostError } from "@hookpost/contract";
import {
  AdminService,
  type DeadLetterSchema,
  type DestinationSchema,
  Signing,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { addService, type CallContext } from "@hookpost/core";

interface FakeSource {
  id: string;
  name: string;
  writeKey: string;
  createTime: Timestamp;
}

interface FakeDestination {
  id: string;
  name: string;
  sourceIds: string[];
  urls: string[];
  headers: Record<string, string>;
  sharedSecret: string;
  signing: Signing;
  enabled: boolean;
  createTime: Timestamp;
  updateTime: Timestamp;
}

type DeadLetterInit = MessageInitShape<typeof DeadLetterSchema>;

const ID = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A real gRPC server on loopback implementing AdminService and IngestService in memory, with the
 * contract's auth and (a subset of) its validation, so the CLI can be run as a real process
 * against it. Stands in where the real ingest cannot serve a test (seeded dead letters).
 */
export class FakeAdmin {
  readonly token = `adm_${randomBytes(12).toString("hex")}`;
  readonly sources = new Map<string, FakeSource>();
  readonly destinations = new Map<string, FakeDestination>();
  readonly deadLetters = new Map<string, DeadLetterInit[]>();
  /** Every call that changed something, in order: `CreateSource web`, `UpdateDestination d1 urls,enabled`. */
  readonly writes: string[] = [];
  /** Calls stored through IngestService. */
  readonly events: { type: string; sourceId: string; request: Record<string, unknown> }[] = [];
  /** Sequences replayed, per destination. */
  readonly replayed: { destinationId: string; sequences: bigint[] }[] = [];
  address = "";
  readonly #server = new Server();

  /** Listens on a free loopback port; with `tls`, serves TLS with that certificate (PEM). */
  static async start(options: { tls?: { cert: Buffer; key: Buffer } } = {}): Promise<FakeAdmin> {
    const fake = new FakeAdmin();
    fake.#serve();
    const creds = options.tls
      ? ServerCredentials.createSsl(
          null,
          [{ cert_chain: options.tls.cert, private_key: options.tls.key }],
          false,
        )
      : ServerCredentials.createInsecure();
    const port = await new Promise<number>((resolve, reject) =>
      fake.#server.bindAsync("127.0.0.1:0", creds, (err, p) => (err ? reject(err) : resolve(p))),
    );
    fake.address = `127.0.0.1:${port}`;
    return fake;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.tryShutdown(() => resolve()));
  }

  /** Stores a dead letter as the dispatcher would; answers its sequence. */
  addDeadLetter(destinationId: string, dl: Omit<DeadLetterInit, "sequence" | "destinationId">): bigint {
    const list = this.deadLetters.get(destinationId) ?? [];
    const sequence = BigInt(100 + [...this.deadLetters.values()].flat().length + 1);
    list.push({ ...dl, sequence, destinationId } as DeadLetterInit);
    this.deadLetters.set(destinationId, list);
    return sequence;
  }

  #admin(ctx: CallContext): void {
    const auth = String(ctx.metadata.get("authorization")[0] ?? "");
    if (auth !== `Bearer ${this.token}`)
      throw new HookpostError(Code.UNAUTHENTICATED, "admin token missing or wrong");
  }

  #source(ctx: CallContext): FakeSource {
    const auth = String(ctx.metadata.get("authorization")[0] ?? "");
    const m = /^Basic (.+)$/.exec(auth);
    const key = m ? Buffer.from(m[1]!, "base64").toString().replace(/:$/, "") : "";
    const source = [...this.sources.values()].find((s) => s.writeKey === key);
    if (!source) throw new HookpostError(Code.UNAUTHENTICATED, "unknown write key");
    return source;
  }

  #view(d: FakeDestination): MessageInitShape<typeof DestinationSchema> {
    const { sharedSecret, ...rest } = d;
    return { ...rest, sharedSecret: "", sharedSecretSet: sharedSecret !== "" };
  }

  #check(d: Omit<FakeDestination, "createTime" | "updateTime">): void {
    const v: FieldViolation[] = [];
    if (!d.name) v.push({ field: "destination.name", description: "is required" });
    if (d.urls.length < 1 || d.urls.length > 5)
      v.push({ field: "destination.urls", description: "needs 1 to 5 URLs" });
    d.urls.forEach((u, i) => {
      if (!/^https?:\/\/[^/]+/.test(u)) {
        v.push({ field: `destination.urls[${i}]`, description: "must be an absolute http(s) URL" });
      }
    });
    d.sourceIds.forEach((s, i) => {
      if (!this.sources.has(s))
        v.push({ field: `destination.source_ids[${i}]`, description: `unknown source "${s}"` });
    });
    if (Object.keys(d.headers).length > 5)
      v.push({ field: "destination.headers", description: "at most 5 headers" });
    for (const name of Object.keys(d.headers)) {
      if (name.toLowerCase() === "content-type" || name.toLowerCase().startsWith("webhook-")) {
        v.push({ field: `destination.headers["${name}"]`, description: "is reserved" });
      }
    }
    if (v.length > 0) throw HookpostError.invalid(v);
  }

  #serve(): void {
    addService(this.#server, AdminService, {
      createSource: async (req, ctx) => {
        this.#admin(ctx);
        const id = req.id || randomUUID().slice(0, 8);
        if (!ID.test(id))
          throw HookpostError.invalid([{ field: "id", description: "letters, digits, - and _" }]);
        if (!req.name) throw HookpostError.invalid([{ field: "name", description: "is required" }]);
        if (this.sources.has(id)) throw new HookpostError(Code.ALREADY_EXISTS, `source ${id} already exists`);
        const source = {
          id,
          name: req.name,
          writeKey: `hpk_${randomBytes(24).toString("base64url")}`,
          createTime: timestampNow(),
        };
        this.sources.set(id, source);
        this.writes.push(`CreateSource ${id}`);
        return {
          source: { ...source, writeKeyPrefix: source.writeKey.slice(0, 8) },
          writeKey: source.writeKey,
        };
      },
      getSource: async (req, ctx) => {
        this.#admin(ctx);
        const s = this.sources.get(req.id);
        if (!s) throw new HookpostError(Code.NOT_FOUND, `source ${req.id} not found`);
        return { source: { ...s, writeKeyPrefix: s.writeKey.slice(0, 8) } };
      },
      listSources: async (_req, ctx) => {
        this.#admin(ctx);
        return {
          sources: [...this.sources.values()].map((s) => ({ ...s, writeKeyPrefix: s.writeKey.slice(0, 8) })),
        };
      },
      deleteSource: async (req, ctx) => {
        this.#admin(ctx);
        if (!this.sources.delete(req.id))
          throw new HookpostError(Code.NOT_FOUND, `source ${req.id} not found`);
        this.writes.push(`DeleteSource ${req.id}`);
        return {};
      },
      rotateWriteKey: async (req, ctx) => {
        this.#admin(ctx);
        const s = this.sources.get(req.id);
        if (!s) throw new HookpostError(Code.NOT_FOUND, `source ${req.id} not found`);
        s.writeKey = `hpk_${randomBytes(24).toString("base64url")}`;
        this.writes.push(`RotateWriteKey ${req.id}`);
        return { source: { ...s, writeKeyPrefix: s.writeKey.slice(0, 8) }, writeKey: s.writeKey };
      },
      createDestination: async (req, ctx) => {
        this.#admin(ctx);
        const d = req.destination;
        if (!d) throw HookpostError.invalid([{ field: "destination", description: "is required" }]);
        const id = d.id || randomUUID().slice(0, 8);
        if (this.destinations.has(id))
          throw new HookpostError(Code.ALREADY_EXISTS, `destination ${id} already exists`);
        const fields = {
          id,
          name: d.name,
          sourceIds: [...d.sourceIds],
          urls: [...d.urls],
          headers: { ...d.headers },
          sharedSecret: d.sharedSecret,
          signing: d.signing || Signing.SEGMENT,
          enabled: d.enabled ?? true,
        };
        this.#check(fields);
        const now = timestampNow();
        const stored = { ...fields, createTime: now, updateTime: now };
        this.destinations.set(id, stored);
        this.writes.push(`CreateDestination ${id}`);
        return { destination: this.#view(stored) };
      },
      getDestination: async (req, ctx) => {
        this.#admin(ctx);
        const d = this.destinations.get(req.id);
        if (!d) throw new HookpostError(Code.NOT_FOUND, `destination ${req.id} not found`);
        return { destination: this.#view(d) };
      },
      listDestinations: async (req, ctx) => {
        this.#admin(ctx);
        const list = [...this.destinations.values()].filter(
          (d) => !req.sourceId || d.sourceIds.includes(req.sourceId),
        );
        return { destinations: list.map((d) => this.#view(d)) };
      },
      updateDestination: async (req, ctx) => {
        this.#admin(ctx);
        const want = req.destination;
        const current = want && this.destinations.get(want.id);
        if (!want || !current) throw new HookpostError(Code.NOT_FOUND, `destination ${want?.id} not found`);
        const paths = req.updateMask?.paths ?? [];
        const all = paths.length === 0;
        const next = { ...current };
        const set = (p: string) => all || paths.includes(p);
        for (const p of paths) {
          if (!["name", "source_ids", "urls", "headers", "shared_secret", "signing", "enabled"].includes(p)) {
            throw HookpostError.invalid([{ field: "update_mask", description: `unknown field ${p}` }]);
          }
        }
        if (set("name")) next.name = want.name;
        if (set("source_ids")) next.sourceIds = [...want.sourceIds];
        if (set("urls")) next.urls = [...want.urls];
        if (set("headers")) next.headers = { ...want.headers };
        if (set("shared_secret") && (!all || want.sharedSecret)) next.sharedSecret = want.sharedSecret;
        if (set("signing")) next.signing = want.signing || Signing.SEGMENT;
        if (set("enabled")) next.enabled = want.enabled ?? false;
        this.#check(next);
        next.updateTime = timestampNow();
        this.destinations.set(next.id, next);
        this.writes.push(`UpdateDestination ${next.id} ${paths.join(",")}`);
        return { destination: this.#view(next) };
      },
      deleteDestination: async (req, ctx) => {
        this.#admin(ctx);
        if (!this.destinations.delete(req.id))
          throw new HookpostError(Code.NOT_FOUND, `destination ${req.id} not found`);
        this.writes.push(`DeleteDestination ${req.id}`);
        return {};
      },
      listDeadLetters: async (req, ctx) => {
        this.#admin(ctx);
        if (!this.destinations.has(req.destinationId)) {
          throw new HookpostError(Code.NOT_FOUND, `destination ${req.destinationId} not found`);
        }
        const list = (this.deadLetters.get(req.destinationId) ?? []).filter(
          (d) => BigInt(d.sequence ?? 0) > req.afterSequence,
        );
        return { deadLetters: list.slice(0, req.pageSize || 100) };
      },
      replayDeadLetters: async (req, ctx) => {
        this.#admin(ctx);
        const list = this.deadLetters.get(req.destinationId) ?? [];
        const chosen = list.filter(
          (d) => req.sequences.length === 0 || req.sequences.includes(BigInt(d.sequence ?? 0)),
        );
        this.deadLetters.set(
          req.destinationId,
          list.filter((d) => !chosen.includes(d)),
        );
        this.replayed.push({ destinationId: req.destinationId, sequences: [...req.sequences] });
        this.writes.push(`ReplayDeadLetters ${req.destinationId}`);
        return { replayed: chosen.length };
      },
    });

    const store = (
      type: string,
      req: { messageId: string; userId: string; anonymousId: string },
      ctx: CallContext,
      extra: FieldViolation[] = [],
    ) => {
      const source = this.#source(ctx);
      const v: FieldViolation[] = [];
      if (type !== "alias" && !req.userId && !req.anonymousId) {
        v.push({ field: "user_id", description: "user_id or anonymous_id is required" });
      }
      v.push(...extra);
      if (v.length > 0) throw HookpostError.invalid(v);
      const messageId = req.messageId || randomUUID();
      this.events.push({ type, sourceId: source.id, request: { ...req, messageId } });
      return { messageId };
    };
    addService(this.#server, IngestService, {
      identify: async (req, ctx) => store("identify", req, ctx),
      track: async (req, ctx) =>
        store("track", req, ctx, req.event ? [] : [{ field: "event", description: "is required for track" }]),
      page: async (req, ctx) => store("page", req, ctx),
      screen: async (req, ctx) => store("screen", req, ctx),
      group: async (req, ctx) =>
        store(
          "group",
          req,
          ctx,
          req.groupId ? [] : [{ field: "group_id", description: "is required for group" }],
        ),
      alias: async (req, ctx) =>
        store(
          "alias",
          req,
          ctx,
          req.previousId && req.userId
            ? []
            : [{ field: "previous_id", description: "alias needs user_id and previous_id" }],
        ),
      delete: async (req, ctx) => {
        this.#admin(ctx);
        if (!req.userId) throw HookpostError.invalid([{ field: "user_id", description: "is required" }]);
        const sourceIds = [
          ...new Set(this.events.filter((e) => e.request.userId === req.userId).map((e) => e.sourceId)),
        ];
        return { requestId: `del_${randomUUID()}`, sourceIds };
      },
    });
  }
}
