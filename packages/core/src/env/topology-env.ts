import { DEFAULT_TOPOLOGY, type TopologySettings } from "../nats/topology.js";
import { envDuration, envInt } from "./read-env.js";

type Env = Record<string, string | undefined>;

/** Stream settings from the environment. Set them alike on every service. */
export function topologyFromEnv(env: Env): TopologySettings {
  const d = DEFAULT_TOPOLOGY;
  return {
    retryWindowMs: envDuration(env, "RETRY_WINDOW", d.retryWindowMs),
    retryMaxDelayMs: envDuration(env, "RETRY_MAX_DELAY", d.retryMaxDelayMs),
    eventsMaxBytes: envInt(env, "EVENTS_MAX_BYTES", d.eventsMaxBytes, 1),
    deliveriesMaxBytes: envInt(env, "DELIVERIES_MAX_BYTES", d.deliveriesMaxBytes, 1),
    deadLetterMaxAgeMs: envDuration(env, "DEAD_LETTER_MAX_AGE", d.deadLetterMaxAgeMs),
    dedupWindowMs: envDuration(env, "DEDUP_WINDOW", d.dedupWindowMs),
    replicas: envInt(env, "STREAM_REPLICAS", d.replicas, 1),
    attemptLogMaxAgeMs: envDuration(env, "ATTEMPT_LOG_MAX_AGE", d.attemptLogMaxAgeMs),
    attemptLogMaxBytes: envInt(env, "ATTEMPT_LOG_MAX_BYTES", d.attemptLogMaxBytes, 1),
    deadLetterMaxBytes: envInt(env, "DEAD_LETTER_MAX_BYTES", d.deadLetterMaxBytes, 1),
    configMaxBytes: envInt(env, "CONFIG_MAX_BYTES", d.configMaxBytes, 1),
    userIndexMaxBytes: envInt(env, "USER_INDEX_MAX_BYTES", d.userIndexMaxBytes, 1),
    membershipsMaxBytes: envInt(env, "MEMBERSHIPS_MAX_BYTES", d.membershipsMaxBytes, 1),
  };
}
