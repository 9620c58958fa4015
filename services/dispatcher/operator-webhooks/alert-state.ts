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

/**
 * The alert state in the `hookpost_alerts` bucket, mirrored in memory by the replica that watches
 * destinations. Every write is compare-and-set on the revision the mirror holds, so two replicas
 * that both believe they watch (a hand-over) cannot both make a transition: the loser's write is
 * refused, it reads the winner's state and goes on from there. A new watcher loads the bucket,
 * so it neither repeats an announcement nor forgets an announced condition.
 */
export class AlertState {
  readonly #kv: KV;
  readonly #logger: Logger;
  readonly #entries = new Map<string, { value: unknown; revision: number }>();

  private constructor(kv: KV, logger: Logger) {
    this.#kv = kv;
    this.#logger = logger;
  }

  static async open(nc: NatsConnection, o: { replicas: number; logger: Logger }): Promise<AlertState> {
    const kv = await nc.jetstream().views.kv(ALERTS_BUCKET, {
      history: 1,
      replicas: o.replicas,
      max_bytes: ALERTS_MAX_BYTES,
    });
    return new AlertState(kv, o.logger);
  }

  /** Reads the whole bucket into memory (at each takeover). */
  async load(): Promise<void> {
    this.#entries.clear();
    const keys: string[] = [];
    for await (const k of await this.#kv.keys()) keys.push(k);
    for (const k of keys) await this.#refresh(k);
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
