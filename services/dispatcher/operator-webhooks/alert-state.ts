import type { Logger } from "@hookpost/core";
import { ALERTS_BUCKET, ALERTS_MAX_BYTES, isWrongLastSequence } from "@hookpost/core";
import type { KV, NatsConnection } from "nats";

/** What was announced to one operator webhook about one destination (key `c.<webhook>.<destination>`). */
export interface ConditionState {
  /** Transitions made so far: the next event's id is derived from it. */
  seq: number;
  /** Announced and not recovered yet: when it was announced (ms). */
  failing?: number;
  behind?: number;
  /** When the last event of each condition (its announcement or its recovery) was made (ms). */
  lastFailingEvent?: number;
  lastBehindEvent?: number;
}

/** An auto-disable that was announced (key `d.<destination>`). */
export interface DisabledState {
  disabledAt: string;
}

/** The last dead-letter window announced (key `dead-letters`). */
export interface DeadLetterState {
  windowMs: number;
  index: number;
}

export const conditionKey = (webhookId: string, destinationId: string) => `c.${webhookId}.${destinationId}`;
export const disabledKey = (destinationId: string) => `d.${destinationId}`;
export const DEAD_LETTERS_KEY = "dead-letters";
/** Which replica loaded the state last (key `watcher`): a takeover writes it. */
export const WATCHER_KEY = "watcher";

/**
 * The alert state in the `hookpost_alerts` bucket, mirrored in memory by the replica that watches
 * destinations. Every write is compare-and-set on the revision the mirror holds, so two replicas
 * that both believe they watch (a hand-over) cannot both make a transition: the loser's write is
 * refused, it reads the winner's state and goes on from there. A new watcher loads the bucket,
 * so it neither repeats an announcement nor forgets an announced condition.
 *
 * A watcher may also stop watching without knowing it: cut off from NATS (or stalled) it still
 * sees itself as the first live replica while the others see it gone, and one of them takes over
 * and announces. Back, it is the first live replica again and goes on with its mirror, which
 * lacks what was announced meanwhile (a failing destination it then never resolves). So every
 * load claims the bucket (key `watcher`), and `current()` says whether the claim is still this
 * mirror's: when another replica loaded since, the mirror is loaded again before any decision.
 */
export class AlertState {
  readonly #kv: KV;
  readonly #logger: Logger;
  readonly #entries = new Map<string, { value: unknown; revision: number }>();
  readonly #replica: string;
  /** The revision of this mirror's claim (WATCHER_KEY); 0 before the first load. */
  #claim = 0;

  private constructor(kv: KV, logger: Logger, replica: string) {
    this.#kv = kv;
    this.#logger = logger;
    this.#replica = replica;
  }

  static async open(
    nc: NatsConnection,
    o: { replicas: number; logger: Logger; replica?: string },
  ): Promise<AlertState> {
    const kv = await nc.jetstream().views.kv(ALERTS_BUCKET, {
      history: 1,
      replicas: o.replicas,
      max_bytes: ALERTS_MAX_BYTES,
    });
    return new AlertState(kv, o.logger, o.replica ?? "");
  }

  /**
   * Claims the bucket, then reads it whole into memory (at each takeover, and when another
   * replica took over meanwhile). Claimed first: a write by a replica that still watches after
   * this read is seen when that replica claims again (it finds this claim, loads and claims).
   */
  async load(): Promise<void> {
    this.#claim = 0;
    const claim = await this.#kv.put(
      WATCHER_KEY,
      JSON.stringify({ replica: this.#replica, at: new Date().toISOString() }),
    );
    this.#entries.clear();
    const keys: string[] = [];
    for await (const k of await this.#kv.keys()) if (k !== WATCHER_KEY) keys.push(k);
    for (const k of keys) await this.#refresh(k);
    this.#claim = claim;
  }

  /**
   * No other replica loaded the state since this mirror did: what it holds is what was announced
   * (any write since by another replica is refused by the compare-and-set, which reads it). One
   * read of one key.
   */
  async current(): Promise<boolean> {
    if (this.#claim === 0) return false;
    const e = await this.#kv.get(WATCHER_KEY);
    if (e?.operation === "PUT" && e.revision === this.#claim) return true;
    this.#logger.info("another replica watched destinations meanwhile; reading what it announced");
    return false;
  }

  get<T>(key: string): T | undefined {
    return this.#entries.get(key)?.value as T | undefined;
  }

  keys(prefix: string): string[] {
    return [...this.#entries.keys()].filter((k) => k.startsWith(prefix));
  }

  /**
   * Writes `value` if the key is still at the revision this mirror holds. False when another
   * replica wrote it first (the mirror then holds that write).
   */
  async put(key: string, value: unknown): Promise<boolean> {
    const cur = this.#entries.get(key);
    const data = JSON.stringify(value);
    try {
      const revision = cur
        ? await this.#kv.update(key, data, cur.revision)
        : await this.#kv.create(key, data);
      this.#entries.set(key, { value, revision });
      return true;
    } catch (err) {
      if (!isWrongLastSequence(err)) throw err;
      this.#logger.info({ key }, "alert state changed by another replica; reading it");
      await this.#refresh(key);
      return false;
    }
  }

  /** Removes the key if it is still at the revision this mirror holds. */
  async remove(key: string): Promise<void> {
    const cur = this.#entries.get(key);
    if (!cur) return;
    try {
      await this.#kv.delete(key, { previousSeq: cur.revision });
      this.#entries.delete(key);
    } catch (err) {
      if (!isWrongLastSequence(err)) throw err;
      await this.#refresh(key);
    }
  }

  async #refresh(key: string): Promise<void> {
    const e = await this.#kv.get(key);
    if (e?.operation === "PUT") this.#entries.set(key, { value: e.json(), revision: e.revision });
    else this.#entries.delete(key);
  }
}
