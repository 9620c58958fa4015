import type { Settings } from "../config/schema.js";
import type { TopologySettings } from "../nats/topology.js";

/** Stream settings. Set them alike on every service. */
export function topologyFrom(s: Settings): TopologySettings {
  return {
    retryWindowMs: s.RETRY_WINDOW,
    retryMaxDelayMs: s.RETRY_MAX_DELAY,
    eventsMaxBytes: s.EVENTS_MAX_BYTES,
    deliveriesMaxBytes: s.DELIVERIES_MAX_BYTES,
    deadLetterMaxAgeMs: s.DEAD_LETTER_MAX_AGE,
    dedupWindowMs: s.DEDUP_WINDOW,
    replicas: s.STREAM_REPLICAS,
    attemptLogMaxAgeMs: s.ATTEMPT_LOG_MAX_AGE,
    attemptLogMaxBytes: s.ATTEMPT_LOG_MAX_BYTES,
    deadLetterMaxBytes: s.DEAD_LETTER_MAX_BYTES,
    configMaxBytes: s.CONFIG_MAX_BYTES,
    userIndexMaxBytes: s.USER_INDEX_MAX_BYTES,
    membershipsMaxBytes: s.MEMBERSHIPS_MAX_BYTES,
    orderedMaxBytes: s.ORDERED_MAX_BYTES,
    auditLogMaxAgeMs: s.AUDIT_LOG_MAX_AGE,
    auditLogMaxBytes: s.AUDIT_LOG_MAX_BYTES,
  };
}
