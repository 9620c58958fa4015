import { ConfigStore, DEFAULT_TOPOLOGY, ensureTopology } from "@hookpost/core";
import type { NatsConnection } from "nats";

/**
 * A bench's fresh server made ready as the services make it (the default topology), and the
 * configuration store the bench writes its sources and destinations to.
 */
export async function defaultTopologyStore(nc: NatsConnection): Promise<ConfigStore> {
  await ensureTopology(await nc.jetstreamManager(), DEFAULT_TOPOLOGY);
  return ConfigStore.open(nc);
}
