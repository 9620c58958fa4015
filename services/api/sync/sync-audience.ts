import { escapeField } from "@hookpost/core";
import type { SyncDeps, SyncOptions } from "./deps.js";
import { runSync, type StreamReading, userIdProblem } from "./sync-engine.js";

/** One message of a SyncAudience stream (the generated SyncAudienceRequest fits). */
export interface AudienceChunk {
  audienceName: string;
  userIds: readonly string[];
}

/** Fields of SyncAudienceResponse (int64 on the wire: wrap in BigInt). */
export interface SyncAudienceResult {
  /** Distinct members in this sync. */
  members: number;
  /** Identify calls with `<key>: true` sent (every member on the first sync). */
  joined: number;
  /** Identify calls with `<key>: false` sent. */
  left: number;
}

const AUDIENCE_STREAM: StreamReading<AudienceChunk> = {
  nameField: "audience_name",
  what: "audience",
  nameOf: (req) => req.audienceName,
  entriesOf: (req, message, bad) => {
    const ids = req.userIds ?? [];
    for (let i = 0; i < ids.length && !bad.full; i++) {
      const problem = userIdProblem(ids[i]);
      if (problem) bad.add(`user_ids[${i}]`, `message ${message}: ${problem}`);
    }
    return ids.map((id) => [escapeField(id), ""]);
  },
};

/**
 * SyncAudience (SPEC section 7) for an authenticated source. The first message names the
 * audience (`audience_name`) and may carry ids; the following ones carry the rest of the full
 * current member list (`user_ids`, any chunking; repeated ids count once).
 *
 * The whole stream is read and validated first (an invalid message rejects the sync with
 * INVALID_ARGUMENT before anything is published), sorted externally with bounded memory, then
 * merged with the stored membership: joins and leaves become identify calls with trait
 * `<snake_case(name)>: true|false` on the EVENTS stream, and the stored membership is replaced
 * only after all of them were confirmed. UNAVAILABLE / RESOURCE_EXHAUSTED when JetStream fails
 * (retrying publishes no duplicates), ABORTED when a concurrent sync of the same audience won.
 */
export async function syncAudience(
  deps: SyncDeps,
  sourceId: string,
  requests: AsyncIterable<AudienceChunk>,
  options: SyncOptions = {},
): Promise<SyncAudienceResult> {
  const counts = await runSync(deps, "audience", sourceId, requests, AUDIENCE_STREAM, options);
  return { members: counts.current, joined: counts.added, left: counts.left };
}
