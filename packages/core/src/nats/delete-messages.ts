import type { JetStreamManager } from "nats";
import { isAlreadyDeleted } from "./jetstream-errors.js";
import { nextMessage } from "./next-message.js";

/**
 * Deletes every message stored on `filter` (wildcards allowed), one by one; resolves with how
 * many it deleted. Use it instead of a filtered purge on a replicated stream: nats-server before
 * 2.9.18 replays a purge on a replica that recovers after a restart as a purge of the WHOLE
 * stream up to the purge's last sequence (nats-server issue #4196, here 2.9.10), so removing one
 * destination's or one user's messages could take every other one with it on that replica. A
 * delete by sequence replays as itself. Deletes of messages already gone count as done.
 */
export async function deleteMessages(
  jsm: JetStreamManager,
  stream: string,
  filter: string,
  options: { erase?: boolean; limit?: number } = {},
): Promise<number> {
  let deleted = 0;
  let seq = 1;
  // With a limit: the oldest `limit` messages on the filter.
  while (deleted < (options.limit ?? Number.POSITIVE_INFINITY)) {
    const m = await nextMessage(jsm, stream, filter, seq);
    if (!m) return deleted;
    try {
      // Erase (overwrite the bytes) only where asked: personal data; otherwise it is a write for nothing.
      if (await jsm.streams.deleteMessage(stream, m.seq, options.erase ?? false)) deleted++;
    } catch (err) {
      if (!isAlreadyDeleted(err)) throw err;
    }
    seq = m.seq + 1;
  }
  return deleted;
}
