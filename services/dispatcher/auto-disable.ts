import { formatDuration } from "@hookpost/contract";
import type { ConfigStore, DestinationRecord, Logger } from "@hookpost/core";
import { isOperatorTarget } from "@hookpost/core";
import type { DispatcherMetrics } from "./metrics.js";
import type { DeliveryResult } from "./sender.js";

export interface AutoDisableDeps {
  store: ConfigStore;
  /** Every attempt failing for this long pauses the destination; undefined: never. */
  afterMs: number | undefined;
  metrics: DispatcherMetrics;
  logger: Logger;
  now?: () => number;
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
 *
 * A FAN_OUT destination's URL (a delivery target, docs/design/shaping.md 7.2) failing does not
 * pause the destination, whose other URLs deliver: its calls wait behind its breaker and become
 * dead letters at the window. A 410 Gone from it does (the destination's configuration names an
 * endpoint that is gone for good).
 *
 * Several replicas may decide at once: the write is revision-checked (ConfigStore.changeDestination)
 * and only made while the destination is still enabled, so exactly one replica writes, logs and
 * counts it.
 */
export class AutoDisabler {
  readonly #d: AutoDisableDeps;
  readonly #failingSince = new Map<string, number>();
  readonly #pausing = new Map<string, Promise<boolean>>();

  constructor(deps: AutoDisableDeps) {
    this.#d = deps;
  }

  /** A delivery succeeded: the destination is not failing. */
  succeeded(id: string): void {
    this.#failingSince.delete(id);
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
    const gone = result.outcomes.find((o) => o.status === 410);
    if (gone) return this.#pause(dest, `the endpoint answered 410 Gone (${gone.url})`, "gone");
    const afterMs = this.#d.afterMs;
    if (afterMs === undefined || dest.target) return false;
    // A configuration change (a fixed URL, say) starts the clock again.
    const since = Math.max(this.#failingSince.get(dest.id) ?? now, Date.parse(dest.updatedAt) || 0);
    this.#failingSince.set(dest.id, since);
    if (now - since < afterMs) return false;
    return this.#pause(dest, `every attempt failed for ${formatDuration(now - since)}`, "failing");
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
