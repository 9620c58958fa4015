import { formatDuration } from "@hookpost/contract";
import type { ConfigStore, DestinationRecord, Logger } from "@hookpost/core";
import { isOperatorTarget, LAST_DELIVERED_SUBJECT } from "@hookpost/core";
import { type NatsConnection, RequestStrategy } from "nats";
import type { DispatcherMetrics } from "./metrics.js";
import type { AttemptOutcome, DeliveryResult } from "./sender.js";

export interface AutoDisableDeps {
  store: ConfigStore;
  /** Every attempt failing for this long pauses the destination; undefined: never. */
  afterMs: number | undefined;
  metrics: DispatcherMetrics;
  logger: Logger;
  now?: () => number;
  /**
   * The other replicas, asked before a pause for failing whether they delivered meanwhile (and
   * answering them). Absent (tests of one replica's arithmetic): this replica's view alone.
   */
  peers?: { nc: NatsConnection; registry: { readonly live: readonly string[] } };
}

/** How long a replica about to pause waits for the others' answers. */
const ASK_TIMEOUT_MS = 1000;

/** An outcome that says something of the endpoint: it was sent a request (not refused by us, not cut short). */
function fromEndpoint(o: AttemptOutcome): boolean {
  return !o.aborted && o.error !== "ssrf" && o.error !== "not_sent" && o.error !== "filtered";
}

/**
 * Pauses a destination that is gone (`410 Gone`, the Standard Webhooks signal to stop) or whose
 * every attempt has failed for AUTO_DISABLE_AFTER, keeping its calls: the pause is the same as an
 * operator's (enabled=false), plus disabled_reason and disabled_time. Deliveries wait on the
 * destination's consumer and go out when it is enabled again (or become dead letters at the retry
 * window, like any paused backlog).
 *
 * The failure clock is per replica: it starts at the first failed attempt this replica sees after
 * a success (or after the destination's last configuration change) and is reset by any success.
 * Only attempts that reached the endpoint count: one our SSRF guard refused, one that could not
 * be prepared (not sent) or one cut short by shutdown says nothing of it. And one replica's view
 * is not enough: before pausing for failing, the replica asks the live replicas when they last
 * delivered to the destination. One that did since the clock started restarts it there (the
 * endpoint works; this replica's network, or settings, do not), and without every answer (NATS
 * away, a replica silent) nothing is paused this time.
 *
 * A FAN_OUT destination's URL (a delivery target, docs/design/shaping.md 7.2) failing does not
 * pause the destination, whose other URLs deliver: its calls wait behind its breaker and become
 * dead letters at the window. A 410 Gone from it does (the destination's configuration names an
 * endpoint that is gone for good). A FAILOVER destination is gone when every URL that answered
 * said 410: one URL gone while another only fails for now is left to the failure clock.
 *
 * Several replicas may decide at once: the write is revision-checked (ConfigStore.changeDestination)
 * and only made while the destination is still enabled, so exactly one replica writes, logs and
 * counts it.
 */
export class AutoDisabler {
  readonly #d: AutoDisableDeps;
  readonly #failingSince = new Map<string, number>();
  readonly #pausing = new Map<string, Promise<boolean>>();
  /** When this replica last delivered to each destination (ms), for the other replicas' questions. */
  readonly #lastSuccess = new Map<string, number>();
  /** Questions to the other replicas in flight, one per destination. */
  readonly #asking = new Map<string, Promise<number | undefined | null>>();

  constructor(deps: AutoDisableDeps) {
    this.#d = deps;
    deps.store.on("change", (c) => {
      if (c.kind === "destination" && !c.record) this.#lastSuccess.delete(c.id);
    });
    const nc = deps.peers?.nc;
    nc?.subscribe(LAST_DELIVERED_SUBJECT, {
      callback: (err, msg) => {
        if (err || !msg.reply) return;
        let id: unknown;
        try {
          id = (msg.json() as { destinationId?: unknown }).destinationId;
        } catch {
          return;
        }
        const last = typeof id === "string" ? this.#lastSuccess.get(id) : undefined;
        msg.respond(JSON.stringify(last === undefined ? {} : { lastSuccessMs: last }));
      },
    });
  }

  /** A delivery succeeded: the destination is not failing. */
  succeeded(id: string): void {
    this.#failingSince.delete(id);
    this.#lastSuccess.set(id, this.#d.now?.() ?? Date.now());
  }

  /**
   * Called after every failed attempt that was not cut short by shutdown. Returns true when the
   * destination is being paused: the caller hands the delivery back instead of retrying or
   * dead-lettering it, so the call waits with the rest of the backlog.
   */
  async failed(dest: DestinationRecord, result: DeliveryResult): Promise<boolean> {
    // An operator webhook is never paused: its events retry and dead-letter like any call.
    if (isOperatorTarget(dest.id)) return false;
    const now = this.#d.now?.() ?? Date.now();
    // Gone when every URL that answered said so: with FAILOVER, a 410 from one URL while another
    // is only failing for now leaves the destination to its other URLs (and the failure clock).
    const heard = result.outcomes.filter(fromEndpoint);
    if (heard.length > 0 && heard.every((o) => o.status === 410)) {
      const urls = heard.map((o) => o.url).join(", ");
      return this.#pause(dest, `the endpoint answered 410 Gone (${urls})`, "gone");
    }
    const afterMs = this.#d.afterMs;
    if (afterMs === undefined || dest.target) return false;
    // Refused by us (SSRF guard), not sent, cut short: the endpoint was not heard from.
    if (!result.outcomes.some(fromEndpoint)) return false;
    // A configuration change (a fixed URL, say) starts the clock again.
    let since = Math.max(this.#failingSince.get(dest.id) ?? now, Date.parse(dest.updatedAt) || 0);
    this.#failingSince.set(dest.id, since);
    if (now - since < afterMs) return false;
    if (this.#d.peers) {
      const elsewhere = await this.#lastDeliveredElsewhere(dest.id);
      // Not every replica could say (NATS away, one silent): not paused on a partial view.
      if (elsewhere === null) return false;
      if (elsewhere !== undefined && elsewhere > since) {
        // Another replica delivered meanwhile: the endpoint works, the clock starts there.
        since = elsewhere;
        this.#failingSince.set(dest.id, Math.max(this.#failingSince.get(dest.id) ?? 0, since));
        if (now - since < afterMs) return false;
      }
    }
    return this.#pause(dest, `every attempt failed for ${formatDuration(now - since)}`, "failing");
  }

  /**
   * The latest delivery any live replica made to the destination (ms), undefined when none
   * remembers one, null when not every live replica answered.
   */
  #lastDeliveredElsewhere(id: string): Promise<number | undefined | null> {
    const running = this.#asking.get(id);
    if (running) return running;
    const p = this.#ask(id).finally(() => this.#asking.delete(id));
    this.#asking.set(id, p);
    return p;
  }

  async #ask(id: string): Promise<number | undefined | null> {
    const { nc, registry } = this.#d.peers!;
    const expected = Math.max(1, registry.live.length);
    let answers = 0;
    let latest: number | undefined;
    try {
      const replies = await nc.requestMany(LAST_DELIVERED_SUBJECT, JSON.stringify({ destinationId: id }), {
        strategy: RequestStrategy.Count,
        maxMessages: expected,
        maxWait: ASK_TIMEOUT_MS,
      });
      for await (const m of replies) {
        const last = (m.json() as { lastSuccessMs?: unknown }).lastSuccessMs;
        answers++;
        if (typeof last === "number" && (latest === undefined || last > latest)) latest = last;
      }
    } catch (err) {
      this.#d.logger.warn(
        { destinationId: id, err: (err as Error).message },
        "could not ask the other replicas before pausing; not paused",
      );
      return null;
    }
    return answers >= expected ? latest : null;
  }

  /** True when the destination is paused now (by this call or already); false when the write failed. */
  #pause(dest: DestinationRecord, reason: string, cause: "gone" | "failing"): Promise<boolean> {
    // One write at a time per destination on this replica; the KV revision check handles the others.
    const id = dest.target?.destinationId ?? dest.id;
    const running = this.#pausing.get(id);
    if (running) return running;
    const p = this.#write(id, reason, cause).finally(() => this.#pausing.delete(id));
    this.#pausing.set(id, p);
    return p;
  }

  async #write(id: string, reason: string, cause: "gone" | "failing"): Promise<boolean> {
    const d = this.#d;
    const at = new Date(d.now?.() ?? Date.now()).toISOString();
    try {
      const revision = await d.store.changeDestination(id, (cur) =>
        cur.enabled
          ? { ...cur, enabled: false, disabledReason: reason, disabledAt: at, updatedAt: at }
          : undefined,
      );
      if (revision === undefined) return true; // already paused (another replica, or an operator)
      this.#failingSince.delete(id);
      d.metrics.autoDisabled.inc({ cause });
      d.logger.warn(
        { destinationId: id, reason, revision },
        "destination paused automatically; its calls are kept",
      );
      return true;
    } catch (err) {
      // Not paused this time: the delivery follows the usual rules and the next failure tries again.
      d.logger.error({ destinationId: id, err: (err as Error).message }, "pausing the destination failed");
      return false;
    }
  }
}
