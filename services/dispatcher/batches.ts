import { batchingLimits } from "@hookpost/contract";
import type { ConfigStore, Logger } from "@hookpost/core";
import {
  batchKey,
  elementBytes,
  MESSAGE_ID_HEADER,
  RenderError,
  renderElement,
  SOURCE_ID_HEADER,
} from "@hookpost/core";
import type { JsMsg } from "nats";
import type { BatchMember, DeliveryHandler } from "./delivery.js";
import { BATCH_HEADER, type DeliveryState } from "./parking.js";

export interface BatchesDeps {
  store: ConfigStore;
  handler: DeliveryHandler;
  logger: Logger;
  /** JetStream's ack wait of the lane: members held while a batch forms are kept alive. */
  ackWaitMs: number;
  /**
   * Sends one formed batch (slot, breaker, rate, then the handler); resolves once every member
   * is acked, parked, dead-lettered or handed back.
   */
  send: (destinationId: string, members: BatchMember[], key: string) => Promise<void>;
}

/** A retried batch waits at least this long for its members, whatever max_wait (they come back a few ms apart). */
const GROUP_WAIT_MIN_MS = 1_000;

interface Forming {
  members: Pending[];
  bytes: number;
  timer: NodeJS.Timeout;
  /** A retried batch's key: it goes once all its `size` members came back. */
  group?: { key: string; size: number };
}

interface Pending extends BatchMember {
  /** The member's place in a retried batch. */
  index: number;
  done: () => void;
}

/**
 * Batches forming on this replica (docs/design/shaping.md section 7.1), per destination: members
 * come from the destination's lane, are rendered, and wait until the batch is full (max_calls,
 * max_bytes) or its first member has waited max_wait. Members of a batch that failed carry its
 * key (`Hookpost-Batch`) and wait for one another, so the retry is the same batch.
 */
export class Batches {
  readonly #d: BatchesDeps;
  /** Open batch per destination (members without a batch key). */
  readonly #open = new Map<string, Forming>();
  /** Retried batches coming back, by destination then key. */
  readonly #groups = new Map<string, Map<string, Forming>>();
  readonly #keepAlive: NodeJS.Timeout;
  #closed = false;

  constructor(deps: BatchesDeps) {
    this.#d = deps;
    // One timer for every held member: JetStream must not hand them out again while they wait.
    this.#keepAlive = setInterval(
      () => {
        for (const f of this.#forming()) for (const m of f.members) m.msg.working();
      },
      Math.max(250, Math.floor(deps.ackWaitMs / 3)),
    ).unref();
  }

  /** Members waiting in forming batches here. */
  get size(): number {
    let n = 0;
    for (const f of this.#forming()) n += f.members.length;
    return n;
  }

  /** A lane delivery of a batching destination: resolves once the batch that carried it is done. */
  async add(destinationId: string, msg: JsMsg, state: DeliveryState): Promise<void> {
    const d = this.#d;
    const dest = d.store.destination(destinationId);
    if (!dest?.batching || this.#closed) {
      msg.nak();
      return;
    }
    const headers = msg.headers;
    const messageId = headers?.get(MESSAGE_ID_HEADER) || `seq-${msg.seq}`;
    const sourceId = headers?.get(SOURCE_ID_HEADER) ?? "";
    const member = { msg, state, messageId, sourceId };
    let element: Uint8Array;
    try {
      const rendered = await renderElement(dest, msg.data, { messageId, sourceId, destinationId });
      if ("filtered" in rendered) {
        d.handler.filtered(destinationId, member, rendered.filtered);
        return;
      }
      element = rendered.body;
    } catch (err) {
      // Its own failure, never the batch's: an attempt that sent nothing, retried or dead-lettered.
      const why =
        err instanceof RenderError ? err.message : `${(err as Error).name}: ${(err as Error).message}`;
      await d.handler.failAlone(destinationId, member, why);
      return;
    }
    const limits = batchingLimits(dest.batching);
    return new Promise<void>((done) => {
      const group = parseGroup(headers?.get(BATCH_HEADER));
      const pending: Pending = { ...member, element, index: group?.index ?? 0, done };
      if (group) this.#join(destinationId, pending, group, Math.max(GROUP_WAIT_MIN_MS, limits.maxWaitMs));
      else this.#add(destinationId, pending, limits);
    });
  }

  /** Shutdown: no new batch goes; members still forming are handed back at once. */
  close(): void {
    this.#closed = true;
    clearInterval(this.#keepAlive);
    for (const f of this.#forming()) {
      clearTimeout(f.timer);
      for (const m of f.members) {
        m.msg.nak();
        m.done();
      }
    }
    this.#open.clear();
    this.#groups.clear();
  }

  #add(id: string, m: Pending, limits: ReturnType<typeof batchingLimits>): void {
    let open = this.#open.get(id);
    const bytes = (first: boolean) => elementBytes(m.element, first);
    // The next element would pass max_bytes: the batch goes first (a member larger alone goes alone).
    if (open && open.bytes + bytes(false) > limits.maxBytes) {
      this.#flush(id, open);
      open = undefined;
    }
    if (!open) {
      open = {
        members: [],
        bytes: 0,
        timer: setTimeout(() => this.#flush(id, this.#open.get(id)), limits.maxWaitMs),
      };
      open.timer.unref();
      this.#open.set(id, open);
    }
    open.bytes += bytes(open.members.length === 0);
    open.members.push(m);
    if (open.members.length >= limits.maxCalls || open.bytes >= limits.maxBytes) this.#flush(id, open);
  }

  #join(id: string, m: Pending, group: { key: string; index: number; size: number }, waitMs: number): void {
    let groups = this.#groups.get(id);
    if (!groups) {
      groups = new Map();
      this.#groups.set(id, groups);
    }
    let f = groups.get(group.key);
    if (!f) {
      const created: Forming = {
        members: [],
        bytes: 0,
        group: { key: group.key, size: group.size },
        timer: setTimeout(() => this.#flush(id, created), waitMs),
      };
      created.timer.unref();
      f = created;
      groups.set(group.key, f);
    }
    // The same member twice (redelivered while held): keep the newer message, settle the older.
    const twin = f.members.findIndex((x) => x.index === m.index);
    if (twin >= 0) {
      const old = f.members[twin]!;
      f.members[twin] = m;
      old.done();
    } else f.members.push(m);
    if (f.members.length >= group.size) this.#flush(id, f);
  }

  /** Sends a forming batch: its members leave the maps at once; new ones start the next batch. */
  #flush(id: string, f: Forming | undefined): void {
    if (!f) return;
    clearTimeout(f.timer);
    if (this.#open.get(id) === f) this.#open.delete(id);
    const groups = this.#groups.get(id);
    if (f.group && groups?.get(f.group.key) === f) {
      groups.delete(f.group.key);
      if (groups.size === 0) this.#groups.delete(id);
    }
    if (f.members.length === 0) return;
    // A retried batch goes in its first order: same members, same key, same bytes.
    const members = f.group ? [...f.members].sort((a, b) => a.index - b.index) : f.members;
    const key = batchKey(members.map((m) => m.messageId));
    this.#d
      .send(id, members, key)
      .catch((err) => {
        // Never dropped: unsettled members are handed back and come again.
        this.#d.logger.error({ destinationId: id, err: (err as Error).message }, "sending a batch failed");
        for (const m of members) m.msg.nak();
      })
      .finally(() => {
        for (const m of members) m.done();
      });
  }

  *#forming(): Iterable<Forming> {
    yield* this.#open.values();
    for (const g of this.#groups.values()) yield* g.values();
  }
}

/** `key;index;size` from a retried member's header; undefined when absent or malformed. */
function parseGroup(v: string | undefined): { key: string; index: number; size: number } | undefined {
  if (!v) return undefined;
  const [key, index, size] = v.split(";");
  const i = Number(index);
  const n = Number(size);
  if (!key || !Number.isInteger(i) || !Number.isInteger(n) || i < 0 || n < 1 || i >= n) return undefined;
  return { key, index: i, size: n };
}
