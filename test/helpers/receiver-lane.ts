import type { MessageInitShape } from "@bufbuild/protobuf";
import type { DestinationSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { Receiver } from "./receiver.js";
import type { IngestClient, Stack } from "./stack.js";

export interface ReceiverLane {
  id: string;
  writeKey: string;
  client: IngestClient;
  /** The destination's own receiver (the caller closes it). */
  rx: Receiver;
}

/**
 * A source named `name` whose one destination (with `init`) delivers to a receiver of its own,
 * so what one lane's calls became is apart from every other lane's.
 */
export async function receiverLane(
  stack: Stack,
  name: string,
  init: MessageInitShape<typeof DestinationSchema> = {},
): Promise<ReceiverLane> {
  const src = await stack.source(name);
  const rx = await Receiver.http();
  await stack.destination({ name, sourceIds: [src.id], urls: [rx.url()], ...init });
  return { ...src, rx };
}
