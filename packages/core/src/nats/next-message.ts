import type { JetStreamManager, StoredMsg } from "nats";
import { isNotFound } from "./jetstream-errors.js";

/**
 * The first message stored on `subject` at or after `seq`, or undefined: a direct lookup in the
 * server's per-subject index (`next_by_subj`), never a scan. nats.js types the query loosely.
 */
export async function nextMessage(
  jsm: JetStreamManager,
  stream: string,
  subject: string,
  seq: number,
): Promise<StoredMsg | undefined> {
  try {
    const query = { seq, next_by_subj: subject } as unknown as { seq: number };
    return await jsm.streams.getMessage(stream, query);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}
