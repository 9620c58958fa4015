import type { ContractCall, StoredCall } from "@hookpost/contract";
import { toStoredCall } from "@hookpost/contract";
import type { TraceContext, UserSourceIndex } from "@hookpost/core";
import { PUBLISH_CONCURRENCY } from "./limits.js";
import type { EventPublisher } from "./publish.js";
import type { SourceQuota } from "./quota.js";

/**
 * The one way validated calls are stored, whichever transport carried them (gRPC or HTTP): the
 * same stored call, the same dedup key, the same publish path. Resolves with the message ids in
 * order once JetStream confirmed every call.
 */
export class CallIntake {
  readonly #publisher: EventPublisher;
  readonly #index: UserSourceIndex;
  readonly #now: () => Date;
  readonly #quota: SourceQuota | undefined;

  constructor(
    publisher: EventPublisher,
    index: UserSourceIndex,
    options: { now?: () => Date; quota?: SourceQuota } = {},
  ) {
    this.#publisher = publisher;
    this.#index = index;
    this.#now = options.now ?? (() => new Date());
    this.#quota = options.quota;
  }

  /** `trace`: the caller's trace context (gRPC metadata / HTTP headers), carried on to EVENTS. */
  /** Over a per-source quota, refused (RESOURCE_EXHAUSTED) before anything is stored. */
  async store(sourceId: string, calls: readonly ContractCall[], trace?: TraceContext): Promise<string[]> {
    this.#quota?.admit(sourceId, calls.length);
    const stamp = { sourceId, receivedAt: this.#now() };
    const stored = calls.map((c) => toStoredCall(c, stamp));
    // The user ids first: a call whose user cannot be recorded (the index full or unreachable)
    // is refused before it is stored, or it would be delivered although answered "not stored",
    // and a deletion of its user could not reach this source. Known pairs cost no I/O.
    await this.#remember(stored);
    const published =
      stored.length === 1
        ? await this.#publisher.publish(stored[0]!, trace)
        : await this.#publisher.publishAll(stored, PUBLISH_CONCURRENCY, trace);
    this.#quota?.stored(sourceId, published, stored.length);
    return stored.map((s) => s.messageId);
  }

  /** Records the user ids of stored calls; free for pairs already known (in-memory cache). */
  #remember(calls: StoredCall[]): Promise<unknown> {
    const pending: Promise<void>[] = [];
    for (const c of calls) {
      if (c.userId) pending.push(this.#index.remember(c.userId, c.sourceId));
      // An alias ties the previous id to the source as well: a deletion of it must reach it.
      if (c.previousId) pending.push(this.#index.remember(c.previousId, c.sourceId));
    }
    return Promise.all(pending);
  }
}
