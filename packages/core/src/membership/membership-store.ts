import { createHash, randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import {
  headers,
  type JetStreamClient,
  type JetStreamManager,
  JsHeaders,
  type NatsConnection,
  type StoredMsg,
} from "nats";
import { DomainError } from "../errors.js";
import { deleteMessages } from "../nats/delete-messages.js";
import { isAlreadyDeleted, isNotFound, isWrongLastSequence, natsFailure } from "../nats/jetstream-errors.js";
import { nextMessage } from "../nats/next-message.js";
import { countIfFull } from "../nats/stream-watch.js";
import {
  MEMBERSHIPS_BUCKET,
  MEMBERSHIPS_STREAM,
  objectChunkSubject,
  objectMetaSubject,
} from "../nats/topology.js";
import { LineSource, type SortedSource } from "./lines.js";
import { PublishWindow } from "./publish-window.js";

export { MEMBERSHIPS_BUCKET, MEMBERSHIPS_STREAM };

export type MembershipKind = "audience" | "trait";

/**
 * Object name of a membership: `<kind>.<sourceId>.<key>`. Keys outside `[a-z0-9_]` (unicode
 * audience names) are written `x-<base64url(utf8 key)>`, which no snake_case key can equal;
 * object names must be ASCII for the Object Store client.
 */
export function membershipObjectName(sourceId: string, kind: MembershipKind, key: string): string {
  const k = /^[a-z0-9_]+$/.test(key) ? key : `x-${Buffer.from(key, "utf8").toString("base64url")}`;
  return `${kind}.${sourceId}.${k}`;
}

/** What the store knows about a stored membership (the Object Store meta record). */
export interface StoredMembership {
  name: string;
  /** Stream sequence of the meta record: changes on every write (used for optimistic locking). */
  revision: number;
  /** Random id of this version's chunks: unique per write, stable until the next one. */
  nuid: string;
  /** `SHA-256=<base64url>` of the content. */
  digest: string;
  size: number;
  chunks: number;
  mtime: string;
}

/** A stored membership and when its current version was stored (stream time, ms). */
export interface MembershipVersion {
  membership: StoredMembership;
  storedMs: number;
}

/** Chunks that no stored membership refers to (see `leftovers`). */
export interface LeftoverChunks {
  nuid: string;
  /** Sequence of its first chunk. */
  firstSeq: number;
}

interface ServerObjectMeta {
  name: string;
  description: string;
  options: { max_chunk_size: number };
  bucket: string;
  nuid: string;
  size: number;
  chunks: number;
  mtime: string;
  digest: string;
  deleted: boolean;
}

const DIGEST_PREFIX = "SHA-256=";
const MAX_CHUNK = 128 * 1024;
/** Chunk writes in flight while uploading a list. */
const UPLOAD_WINDOW = 4;

export interface MembershipStoreOptions {
  replicas?: number;
  /** How long JetStream has to answer one request; default 10 000 ms. */
  timeoutMs?: number;
}

/**
 * An upload stores its chunks back to back and its meta record right after (each write waits at
 * most the timeout): chunks that no meta refers to and that got no new chunk for this many
 * timeouts belong to an upload that failed or died, not to one under way.
 */
const ABANDONED_AFTER_TIMEOUTS = 3;

/**
 * Stores membership lists (sorted, newline-delimited text, see lines.ts) as objects of a
 * JetStream Object Store bucket, in the standard Object Store layout (`nats object get` and the
 * nats.js client read them), but with bounded memory both ways, which the stock client does not
 * offer for large objects (its get buffers everything the server pushes, its put keeps every
 * chunk in flight):
 *
 * - `read` pulls one 128 KiB chunk at a time (stream "next message by subject" requests) and
 *   checks the digest at the end;
 * - `write` uploads a local file with at most 4 chunks in flight, then publishes the meta record
 *   with "expected last subject sequence" = the revision the sync started from. That meta write
 *   is the atomic swap: readers see the old list until it lands, and a concurrent sync that
 *   replaced the list in between makes it fail (ABORTED) instead of silently overwriting.
 */
export class MembershipStore {
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #timeoutMs: number;

  private constructor(nc: NatsConnection, js: JetStreamClient, jsm: JetStreamManager, timeoutMs: number) {
    this.#nc = nc;
    this.#js = js;
    this.#jsm = jsm;
    this.#timeoutMs = timeoutMs;
  }

  /** Opens (creating if needed) the bucket. */
  static async open(nc: NatsConnection, options: MembershipStoreOptions = {}): Promise<MembershipStore> {
    const js = nc.jetstream();
    await js.views.os(MEMBERSHIPS_BUCKET, { replicas: options.replicas ?? 1 });
    return new MembershipStore(nc, js, await nc.jetstreamManager(), options.timeoutMs ?? 10_000);
  }

  #metaSubject(name: string): string {
    const b64 = Buffer.from(name, "latin1").toString("base64").replace(/\+/g, "-").replace(/\//g, "_");
    return objectMetaSubject(MEMBERSHIPS_BUCKET, b64);
  }

  #chunkSubject(nuid: string): string {
    return objectChunkSubject(MEMBERSHIPS_BUCKET, nuid);
  }

  /** The stored membership under `name`, or undefined when there is none (first sync). */
  async info(name: string): Promise<StoredMembership | undefined> {
    let m: StoredMsg;
    try {
      m = await this.#jsm.streams.getMessage(MEMBERSHIPS_STREAM, { last_by_subj: this.#metaSubject(name) });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw natsFailure("could not read the stored membership", err);
    }
    return versionOf(name, m)?.membership;
  }

  /**
   * Bytes of the source's stored memberships but `except`: for its share of the bucket. One
   * listing of every membership's meta subject (each names its object), then one lookup for
   * each of this source's.
   */
  async bytesOf(sourceId: string, except?: string): Promise<number> {
    const prefix = objectMetaSubject(MEMBERSHIPS_BUCKET, "");
    let subjects: Record<string, number>;
    try {
      const si = await this.#jsm.streams.info(MEMBERSHIPS_STREAM, { subjects_filter: `${prefix}>` });
      subjects = si.state.subjects ?? {};
    } catch (err) {
      throw natsFailure("could not list the stored memberships", err);
    }
    let total = 0;
    for (const subject of Object.keys(subjects)) {
      // The inverse of #metaSubject (Node's base64 decoder takes the URL-safe letters too).
      const name = Buffer.from(subject.slice(prefix.length), "base64").toString("latin1");
      if (name === except || name.split(".")[1] !== sourceId) continue;
      total += (await this.info(name))?.size ?? 0;
    }
    return total;
  }

  /**
   * Every stored membership, in the order they were last written. A meta record is rolled up on
   * each write (one per name), so walking the meta subjects visits each name once.
   */
  async *list(): AsyncGenerator<MembershipVersion> {
    const metas = objectMetaSubject(MEMBERSHIPS_BUCKET, ">");
    for (let seq = 1; ; ) {
      const m = await this.#next(metas, seq);
      if (!m) return;
      seq = m.seq + 1;
      const v = versionOf(m.json<ServerObjectMeta>().name, m);
      if (v) yield v;
    }
  }

  /**
   * Chunks that no stored membership (in `referenced`, the nuids of every meta record) refers to
   * and that an upload under way cannot be writing any more: left by a write that failed or a
   * process that died between the swap and the removal of the old chunks. Nobody can read them,
   * but they hold member ids.
   */
  async leftovers(referenced: ReadonlySet<string>): Promise<LeftoverChunks[]> {
    const prefix = this.#chunkSubject("");
    let subjects: Record<string, number>;
    try {
      const si = await this.#jsm.streams.info(MEMBERSHIPS_STREAM, { subjects_filter: `${prefix}>` });
      subjects = si.state.subjects ?? {};
    } catch (err) {
      throw natsFailure("could not list the membership chunks", err);
    }
    const abandoned = Date.now() - ABANDONED_AFTER_TIMEOUTS * this.#timeoutMs;
    const out: LeftoverChunks[] = [];
    for (const subject of Object.keys(subjects)) {
      const nuid = subject.slice(prefix.length);
      if (referenced.has(nuid)) continue;
      let last: StoredMsg;
      try {
        last = await this.#jsm.streams.getMessage(MEMBERSHIPS_STREAM, { last_by_subj: subject });
      } catch (err) {
        if (isNotFound(err)) continue;
        throw natsFailure("could not read the membership chunks", err);
      }
      if (last.time.getTime() >= abandoned) continue;
      const first = await this.#next(subject, 1);
      if (first) out.push({ nuid, firstSeq: first.seq });
    }
    return out;
  }

  /** The content of leftover chunks, in order (no meta record: nothing to check it against). */
  async *leftoverContent(left: LeftoverChunks): AsyncGenerator<Uint8Array> {
    for (let seq = left.firstSeq; ; ) {
      const m = await this.#next(this.#chunkSubject(left.nuid), seq);
      if (!m) return;
      seq = m.seq + 1;
      yield m.data;
    }
  }

  /**
   * Deletes and overwrites (erases) every chunk of `left`; throws when that fails (unlike the
   * clean-up after a write, which is best effort). True when this call erased the first chunk:
   * of replicas sweeping the same leftover at once, one is.
   */
  async eraseLeftover(left: LeftoverChunks): Promise<boolean> {
    let first = false;
    try {
      first = await this.#jsm.streams.deleteMessage(MEMBERSHIPS_STREAM, left.firstSeq, true);
    } catch (err) {
      if (!isAlreadyDeleted(err)) throw err;
    }
    await deleteMessages(this.#jsm, MEMBERSHIPS_STREAM, this.#chunkSubject(left.nuid), { erase: true });
    return first;
  }

  /** The first message on `subject` at or after `seq`. */
  async #next(subject: string, seq: number): Promise<StoredMsg | undefined> {
    try {
      return await nextMessage(this.#jsm, MEMBERSHIPS_STREAM, subject, seq);
    } catch (err) {
      throw natsFailure("could not read the stored membership", err);
    }
  }

  /** The raw content of a stored membership, one chunk at a time; the digest is checked at the end. */
  async *chunks(info: StoredMembership): AsyncGenerator<Uint8Array> {
    if (info.chunks === 0) return;
    const subject = this.#chunkSubject(info.nuid);
    const sha = createHash("sha256");
    let seq = 1;
    let size = 0;
    for (let i = 0; i < info.chunks; i++) {
      const m = await this.#next(subject, seq);
      if (!m) break; // the size check below reports it
      seq = m.seq + 1;
      const data = m.data;
      sha.update(data);
      size += data.length;
      yield data;
    }
    const digest = `${DIGEST_PREFIX}${sha.digest("base64url")}`;
    if (size !== info.size || stripPadding(digest) !== stripPadding(info.digest)) {
      throw new DomainError("CORRUPT", `stored membership ${info.name} is corrupt (size or digest mismatch)`);
    }
  }

  /** The stored membership as sorted entries (an empty source when there is none). */
  source(info: StoredMembership): SortedSource {
    return new LineSource(this.chunks(info), true);
  }

  /**
   * Uploads `content` (a local file's path, or bytes made on the fly) as the new content of
   * `name`, replacing the stored version only if it is still `previous` (undefined: there must be
   * none). Returns the new version.
   * Errors: ABORTED when another writer got there first, UNAVAILABLE when JetStream failed
   * (the old version is then intact).
   */
  async write(
    name: string,
    content: string | AsyncIterable<Uint8Array>,
    previous: StoredMembership | undefined,
  ): Promise<StoredMembership> {
    const nuid = randomBytes(16).toString("hex").toUpperCase();
    const chunkSubject = this.#chunkSubject(nuid);
    const maxChunk = Math.min(MAX_CHUNK, this.#nc.info?.max_payload ?? MAX_CHUNK);
    const sha = createHash("sha256");
    let size = 0;
    let chunks = 0;
    const window = new PublishWindow(UPLOAD_WINDOW);
    try {
      const source =
        typeof content === "string"
          ? (createReadStream(content, { highWaterMark: maxChunk }) as AsyncIterable<Buffer>)
          : rechunk(content, maxChunk);
      for await (const buf of source) {
        sha.update(buf);
        size += buf.length;
        chunks++;
        await window.run(() => this.#js.publish(chunkSubject, buf, { timeout: this.#timeoutMs }));
      }
      await window.drain();
      const meta: ServerObjectMeta = {
        name,
        description: "",
        options: { max_chunk_size: maxChunk },
        bucket: MEMBERSHIPS_BUCKET,
        nuid,
        size,
        chunks,
        mtime: new Date().toISOString(),
        digest: `${DIGEST_PREFIX}${sha.digest("base64url")}=`,
        deleted: false,
      };
      const h = headers();
      h.set(JsHeaders.RollupHdr, JsHeaders.RollupValueSubject);
      h.set("Nats-Expected-Last-Subject-Sequence", String(previous?.revision ?? 0));
      const ack = await this.#js.publish(this.#metaSubject(name), JSON.stringify(meta), {
        headers: h,
        timeout: this.#timeoutMs,
      });
      if (previous) await this.#purge(this.#chunkSubject(previous.nuid));
      return { name, revision: ack.seq, nuid, digest: meta.digest, size, chunks, mtime: meta.mtime };
    } catch (err) {
      await window.settle();
      await this.#purge(chunkSubject);
      if (isWrongLastSequence(err)) {
        throw new DomainError(
          "CONFLICT",
          `membership ${name} was replaced by a concurrent sync; retry the sync`,
          {
            cause: err,
          },
        );
      }
      countIfFull(MEMBERSHIPS_STREAM, err);
      throw natsFailure("could not store the new membership", err);
    }
  }

  /**
   * Best effort: chunks nobody references only waste space. One by one, never a filtered purge
   * (nats/delete-messages.ts: a restarted replica would replay it as a purge of every membership).
   */
  async #purge(subject: string): Promise<void> {
    try {
      await deleteMessages(this.#jsm, MEMBERSHIPS_STREAM, subject, { erase: true });
    } catch {
      // Left for a later cleanup.
    }
  }
}

/** The version a meta record describes; undefined when it says the object was deleted. */
function versionOf(name: string, m: StoredMsg): MembershipVersion | undefined {
  const meta = m.json<ServerObjectMeta>();
  if (meta.deleted) return undefined;
  return {
    membership: {
      name,
      revision: m.seq,
      nuid: meta.nuid,
      digest: meta.digest,
      size: meta.size,
      chunks: meta.chunks,
      mtime: meta.mtime,
    },
    storedMs: m.time.getTime(),
  };
}

/** Bytes regrouped into chunks of `size` (the last one shorter): chunks are stored as they come. */
async function* rechunk(source: AsyncIterable<Uint8Array>, size: number): AsyncGenerator<Buffer> {
  let parts: Uint8Array[] = [];
  let length = 0;
  for await (const part of source) {
    parts.push(part);
    length += part.length;
    while (length >= size) {
      const all = Buffer.concat(parts, length);
      yield all.subarray(0, size);
      parts = [all.subarray(size)];
      length -= size;
    }
  }
  if (length > 0) yield Buffer.concat(parts, length);
}

function stripPadding(s: string): string {
  return s.replace(/=+$/, "");
}
