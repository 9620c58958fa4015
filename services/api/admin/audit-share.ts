import { Code, HookpostError } from "@hookpost/contract";
import type { AuditLog } from "@hookpost/core";

/** The figures are read at most this often: a portal link writes at most once a second. */
const FRESH_FOR_MS = 1_000;
/** Told to a source over its share: room comes back as its oldest records age out. */
const RETRY_AFTER_MS = 3_600_000;

/**
 * Each source's share of the audit log (SOURCE_MAX_AUDIT_BYTES). The log refuses every admin
 * write once full and never drops a record for room: without a share, one portal link writing at
 * its rate would, within days, stop every tenant's and the operator's changes. Over its share, a
 * source's portal links are refused (nothing changed, no record); the operator's writes are not.
 */
export class AuditShare {
  readonly #log: Pick<AuditLog, "usage">;
  readonly #maxBytes: number | undefined;
  #usage: { at: number; bytes: Promise<Map<string, number>> } | undefined;
  /** Records this replica charged, by when they were stored: those after a figure's read are added to it. */
  #local: { sourceId: string; bytes: number; at: number }[] = [];

  constructor(log: Pick<AuditLog, "usage">, maxBytes: number | undefined) {
    this.#log = log;
    this.#maxBytes = maxBytes;
  }

  /** Counts a record this replica stored for the source. */
  charged(sourceId: string, bytes: number): void {
    if (this.#maxBytes !== undefined) this.#local.push({ sourceId, bytes, at: Date.now() });
  }

  /** Throws RESOURCE_EXHAUSTED when the source's portal links have used up its share. */
  async check(sourceId: string): Promise<void> {
    const max = this.#maxBytes;
    if (max === undefined) return;
    const now = Date.now();
    if (!this.#usage || now - this.#usage.at >= FRESH_FOR_MS) {
      const bytes = this.#log.usage();
      // A failed read is not kept: the next write asks again.
      bytes.then(
        () => {
          this.#local = this.#local.filter((c) => c.at >= now);
        },
        () => {
          this.#usage = undefined;
        },
      );
      this.#usage = { at: now, bytes };
    }
    const since = this.#usage.at;
    let usage: Map<string, number>;
    try {
      usage = await this.#usage.bytes;
    } catch (err) {
      throw new HookpostError(
        Code.UNAVAILABLE,
        `the audit log's figures could not be read (${(err as Error).message}): nothing was changed; retry`,
      );
    }
    // What this replica stored since the figure was read: a burst of writes cannot all pass on one figure.
    let used = usage.get(sourceId) ?? 0;
    for (const c of this.#local) if (c.sourceId === sourceId && c.at >= since) used += c.bytes;
    if (used < max) return;
    throw new HookpostError(
      Code.RESOURCE_EXHAUSTED,
      `the audit records of this source's portal links take ${used} bytes, its share of the audit log is ` +
        `${max} (SOURCE_MAX_AUDIT_BYTES): nothing was changed; room comes back as its oldest records ` +
        "age out (AUDIT_LOG_MAX_AGE), or ask the operator",
      [],
      { retryAfterMs: RETRY_AFTER_MS },
    );
  }
}
