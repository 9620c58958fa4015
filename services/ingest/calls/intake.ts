import type { ContractCall } from "../../../contract/mod.js";
import { toStoredCall } from "../../../contract/mod.js";
import type { StoredCall } from "../../../lib/model/stored-call.js";
import type { TraceContext } from "../../../lib/tracing/mod.js";
import type { UserSourceIndex } from "../../../lib/users/user-source-index.js";
import { PUBLISH_CONCURRENCY } from "./limits.js";
import type { EventPublisher } from "./publish.js";

/**
 * The one way validated calls are stored, whichever transport carried them (gRPC or HTTP): the
 * same stored call, the same dedup key, the same publish path. Resolves with the message ids in
 * order once JetStream confirmed every call.
 */
export class CallIntake {
  readonly #publisher: EventPublisher;
  readonly #index: UserSourceIndex;
  readonly #now: () => Date;

  constructor(publisher: EventPublisher, index: UserSourceIndex, now: () => Date = () => new Date()) {
    this.#publisher = publisher;
    this.#index = index;
    this.#now = now;
  }

  /** `trace`: the caller's trace context (gRPC metadata / HTTP headers), carried on to EVENTS. */
  async store(sourceId: string, calls: readonly ContractCall[], trace?: TraceContext): Promise<string[]> {
    const stamp = { sourceId, receivedAt: this.#now() };
    const stored = calls.map((c) => toStoredCall(c, stamp));
    await Promise.all([
      stored.length === 1
        ? this.#publisher.publish(stored[0]!, trace)
        : this.#publisher.publishAll(stored, PUBLISH_CONCURRENCY, trace),
      this.#remember(stored),
    ]);
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
