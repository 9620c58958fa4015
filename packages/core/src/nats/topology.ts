import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  type JetStreamManager,
  nanos,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "nats";
import { isAlreadyExists, isNotFound } from "./jetstream-errors.js";

/**
 * Every JetStream name Hookpost uses, in one place. Data flows one way:
 *   ingest --publish--> EVENTS --router--> DELIVERIES (one subject per destination) --> webhook
 *                                                                      \--> DEAD (dead letters)
 * and, beside the flow, ATTEMPTS: the attempt log (core/attempts), written without waiting.
 * No other module spells a stream, bucket, consumer or subject: they import these.
 */
export const EVENTS_STREAM = "HOOKPOST_EVENTS";
export const DELIVERIES_STREAM = "HOOKPOST_DELIVERIES";
export const DEAD_STREAM = "HOOKPOST_DEAD";
export const CONFIG_BUCKET = "hookpost_config";
/** KV bucket: one key per (user id, source id) pair that has received calls. */
export const USER_SOURCES_BUCKET = "hookpost_user_sources";
/** Object Store bucket: the last synced membership of every audience and trait. */
export const MEMBERSHIPS_BUCKET = "hookpost_memberships";
/** KV bucket where dispatcher replicas announce themselves (one key per replica). */
export const DISPATCHERS_BUCKET = "hookpost_dispatchers";
/**
 * KV bucket of deletion requests (one key per request id): erasure's durable to-do list and the
 * status GetDeletion reads. Holds user hashes, never user ids.
 */
export const DELETIONS_BUCKET = "hookpost_deletions";
/**
 * KV bucket of portal links, one key per link (`portalLinkKey`): its source, expiry, revocation
 * and the SHA-256 hash of its token, never the token. An entry leaves PORTAL_LINKS_MAX_AGE_MS
 * after its last write, so expired and revoked links age out by themselves.
 */
export const PORTAL_LINKS_BUCKET = "hookpost_portal_links";
/** A link's key: listing a source's links is a key filter (`<source id>.*`), not a scan. */
export const portalLinkKey = (sourceId: string, linkId: string) => `${sourceId}.${linkId}`;
/**
 * KV bucket of operational-webhook state (services/dispatcher/operator-webhooks/): which
 * conditions were announced to which operator webhook, written compare-and-set by the replica
 * that watches destinations, so that a takeover neither repeats nor forgets an announcement.
 */
export const ALERTS_BUCKET = "hookpost_alerts";
/**
 * Operator webhooks are delivered as destinations named `_ops_<webhook id>` (core's
 * model/operator-webhook.ts); no customer destination may take an id with this prefix.
 */
export const OPERATOR_TARGET_PREFIX = "_ops_";
/** The streams behind buckets: KV buckets are streams named `KV_<bucket>`, object stores `OBJ_<bucket>`. */
export const kvStream = (bucket: string) => `KV_${bucket}`;
export const objectStream = (bucket: string) => `OBJ_${bucket}`;
/** Subject of a key of a KV bucket, on the bucket's stream. */
export const kvKeySubject = (bucket: string, key: string) => `$KV.${bucket}.${key}`;
/** Subjects of an object store's metadata (name in URL-safe base64) and of an object's chunks. */
export const objectMetaSubject = (bucket: string, b64Name: string) => `$O.${bucket}.M.${b64Name}`;
export const objectChunkSubject = (bucket: string, nuid: string) => `$O.${bucket}.C.${nuid}`;
/** The stream behind the user index bucket. */
export const USER_SOURCES_STREAM = kvStream(USER_SOURCES_BUCKET);
/** The stream behind the memberships object store. */
export const MEMBERSHIPS_STREAM = objectStream(MEMBERSHIPS_BUCKET);
/**
 * Core NATS subject on which an index that forgot a user tells the other replicas to drop
 * the pairs from their memory, so that the next call for that user is recorded again.
 */
export const USER_FORGOTTEN_SUBJECT = "hookpost.users.forgotten";
/**
 * Core NATS subject on which a dispatcher replica about to pause a destination for failing asks
 * the others when they last delivered to it (`{"destinationId"}`, each answers `{"lastSuccessMs"}`).
 */
export const LAST_DELIVERED_SUBJECT = "hookpost.dispatchers.last-delivered";
/** The durable consumer on EVENTS that fans each call out to its destinations. */
export const ROUTER_CONSUMER = "router";

/**
 * The attempt log's stream. Subjects name only a destination or a source, so the stream has as
 * many subjects as there are destinations and sources whatever the traffic (nats-server keeps
 * memory per subject: one per call would not hold a day, docs/design/attempt-search.md):
 *   hookpost.log.attempt.<destination>   attempt records
 *   hookpost.log.dead.<destination>      dead records
 *   hookpost.log.routed.<source>         one routing record per call
 *   hookpost.health.<replica>            a replica's health summary per second
 * Records are found by message, user and facets through the index stream below. Before issue 28
 * subjects carried a hash of the message id (`hookpost.attempts.<destination>.<hash>`,
 * `hookpost.routed.<hash>`): the stream keeps those subjects so that such records stay until they
 * age out, and the indexer reads them like the others.
 */
export const ATTEMPTS_STREAM = "HOOKPOST_ATTEMPTS";
const LOG_SUBJECT_PREFIX = "hookpost.log.";
export const ATTEMPT_SUBJECTS = [
  "hookpost.attempts.>",
  "hookpost.routed.>",
  "hookpost.health.>",
  `${LOG_SUBJECT_PREFIX}>`,
];
/** An id as a subject token: ids are checked against ID_PATTERN, anything else is filed under `_`. */
const token = (id: string) => (ID_PATTERN.test(id) ? id : "_");
export const attemptRecordSubject = (destinationId: string) =>
  `${LOG_SUBJECT_PREFIX}attempt.${token(destinationId)}`;
export const deadRecordSubject = (destinationId: string) =>
  `${LOG_SUBJECT_PREFIX}dead.${token(destinationId)}`;
export const routedRecordSubject = (sourceId: string) => `${LOG_SUBJECT_PREFIX}routed.${token(sourceId)}`;
/** Every record but health summaries, in the current layout. */
export const LOG_RECORDS_FILTER = `${LOG_SUBJECT_PREFIX}>`;
/**
 * The layout before issue 28 (one subject per message hash). Nothing writes it any more; kept so
 * that tests and benchmarks can store records the way an older dispatcher did, and for the
 * dead-letter body lookup of a process without an index. `*` for "any" in either position.
 */
export const attemptSubject = (destinationId: string, hash: string) =>
  `hookpost.attempts.${destinationId}.${hash}`;
export const routedSubject = (hash: string) => `hookpost.routed.${hash}`;
/** `*` for every replica. */
export const healthSubject = (replica: string) => `hookpost.health.${replica}`;

/**
 * The attempt log's index (docs/design/attempt-search.md): segments of ATTEMPTS sequences, each
 * a JSON header (ranges, facet table, where its data is) and binary data (postings, keys). The
 * API replicas write it; it holds hashes and offsets, never a user id.
 */
export const ATTEMPT_INDEX_STREAM = "HOOKPOST_ATTEMPT_INDEX";
export const ATTEMPT_INDEX_HEAD_SUBJECT = "hookpost.attindex.head";
export const ATTEMPT_INDEX_DATA_SUBJECT = "hookpost.attindex.data";
/** The index keeps its segments a little longer than the log keeps the records they point at. */
const ATTEMPT_INDEX_EXTRA_AGE_MS = 3_600_000;
/** The index measures ~5 % of the log: a quarter of the log's limit never drops what the log keeps. */
export const attemptIndexMaxBytes = (s: TopologySettings) =>
  Math.max(64 * 1024 ** 2, Math.floor(s.attemptLogMaxBytes / 4));

/**
 * The audit log: every admin write, append-only (the stream denies message deletes and purges,
 * and nats-server refuses to lift that later). Two records per admin call, joined by its audit id:
 *   hookpost.audit.requests.<audit id>   who asked for what, stored before the change is made
 *   hookpost.audit.outcomes.<audit id>   what came of it (before → after, revision, error)
 */
export const AUDIT_STREAM = "HOOKPOST_AUDIT";
export const AUDIT_SUBJECTS = ["hookpost.audit.>"];
export const auditRequestSubject = (auditId: string) => `hookpost.audit.requests.${auditId}`;
export const auditOutcomeSubject = (auditId: string) => `hookpost.audit.outcomes.${auditId}`;
/**
 * A mark per record a portal link's write left, charged to its source: `<kib>` is the record's
 * size rounded up to a power of two KiB. The server's per-subject counts then give each source's
 * bytes on AUDIT (a few subjects per source), and the marks age out with the records.
 */
export const AUDIT_USAGE_PREFIX = "hookpost.audit.usage.";
export const auditUsageSubject = (sourceId: string, kib: number) => `${AUDIT_USAGE_PREFIX}${sourceId}.${kib}`;

import { type EventType, PORTAL_LINK_LIFETIME } from "@hookpost/contract";

export type { EventType };

/** What every subject of EVENTS and of DELIVERIES starts with (the source or destination id follows). */
export const EVENT_SUBJECT_PREFIX = "hookpost.events.";
export const DELIVERY_SUBJECT_PREFIX = "hookpost.deliveries.";
export const eventSubject = (sourceId: string, type: EventType) =>
  `${EVENT_SUBJECT_PREFIX}${sourceId}.${type}`;
/**
 * Before issue 24: one subject and one durable consumer per destination. Kept only so a start
 * can find and move what such a consumer still holds (services/dispatcher/legacy.ts).
 */
export const legacyDeliverySubject = (destinationId: string) => `${DELIVERY_SUBJECT_PREFIX}${destinationId}`;
export const legacyDestinationConsumer = (destinationId: string) => `dest_${destinationId}`;
/** @deprecated until the new core lands: the legacy names. */
export const deliverySubject = legacyDeliverySubject;
/** @deprecated until the new core lands: the legacy names. */
export const destinationConsumer = legacyDestinationConsumer;
export const LEGACY_CONSUMER_PREFIX = "dest_";

/**
 * The shared lane (docs/design/delivery-at-scale.md): a fresh delivery goes to partition
 * `deliveryPartition(...)` of its destination; 2P consumers `part_<p>` serve every destination,
 * so the number of consumers never follows the number of destinations.
 */
export const partitionSubject = (partition: number, destinationId: string) =>
  `${DELIVERY_SUBJECT_PREFIX}${partition}.${destinationId}`;
/** Every partition's deliveries of one destination (purges, counts). */
export const deliverySubjects = (destinationId: string) => `${DELIVERY_SUBJECT_PREFIX}*.${destinationId}`;
export const partitionFilter = (partition: number) => `${DELIVERY_SUBJECT_PREFIX}${partition}.>`;
export const partitionConsumer = (partition: number) => `part_${partition}`;
/** A destination's own lane: parked deliveries (retries, paused, breaker open), on DELIVERIES. */
export const LANE_SUBJECT_PREFIX = "hookpost.lanes.";
export const laneSubject = (destinationId: string) => `${LANE_SUBJECT_PREFIX}${destinationId}`;
/** The lane's consumer: exists only while the lane holds messages. */
export const laneConsumer = (destinationId: string) => `lane_${destinationId}`;
export const LANE_CONSUMER_PREFIX = "lane_";
/** The destination id a DELIVERIES subject belongs to (partition, lane or legacy subject). */
export function destinationOfSubject(subject: string): string | undefined {
  if (subject.startsWith(LANE_SUBJECT_PREFIX)) return subject.slice(LANE_SUBJECT_PREFIX.length);
  if (!subject.startsWith(DELIVERY_SUBJECT_PREFIX)) return undefined;
  const rest = subject.slice(DELIVERY_SUBJECT_PREFIX.length).split(".");
  return rest.length === 2 ? rest[1] : rest[0];
}
/** Every DELIVERIES subject of one destination, for a stream-info subjects filter or a purge. */
export const destinationSubjects = (destinationId: string) => [
  deliverySubjects(destinationId),
  laneSubject(destinationId),
  legacyDeliverySubject(destinationId),
];

/**
 * Calls to a PER_USER destination: one subject per (destination, user), no consumers. A call is
 * sent only while it is the first stored on its subject (the head rule, ordered/).
 * `q = partitionOf(destinationId, ORDERED_PARTITIONS)` is the unit one replica owns.
 */
export const ORDERED_STREAM = "HOOKPOST_ORDERED";
export const ORDERED_SUBJECT_PREFIX = "hookpost.ordered.";
export const orderedSubject = (q: number, destinationId: string, userHash: string) =>
  `${ORDERED_SUBJECT_PREFIX}${q}.${destinationId}.${userHash}`;
export const orderedPartitionFilter = (q: number) => `${ORDERED_SUBJECT_PREFIX}${q}.>`;
export const orderedDestinationFilter = (q: number, destinationId: string) =>
  `${ORDERED_SUBJECT_PREFIX}${q}.${destinationId}.*`;
/** Every ordered call of one destination, whatever its partition (counts without knowing Q). */
export const orderedSubjectsOf = (destinationId: string) => `${ORDERED_SUBJECT_PREFIX}*.${destinationId}.*`;
/** The destination id of an ORDERED subject. */
export const orderedDestinationOf = (subject: string) =>
  subject.slice(ORDERED_SUBJECT_PREFIX.length).split(".")[1];

/** FNV-1a: a cheap, stable spread of ids over partitions (the same on every replica and version). */
export function partitionOf(key: string, partitions: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % partitions;
}
/**
 * How many shared partitions DELIVERY_PARTITIONS = P makes: [0, P) carry deliveries to
 * destinations known to answer, [P, 2P) those to every other (new, timing out, breaker open), so a
 * burst to hung endpoints never queues ahead of a healthy destination's calls.
 */
export const partitionCount = (partitions: number) => 2 * partitions;
/** The partition of one delivery: its destination's class, then spread by destination and call. */
export function deliveryPartition(
  destinationId: string,
  messageId: string,
  partitions: number,
  answering: boolean,
): number {
  return partitionOf(`${destinationId}/${messageId}`, partitions) + (answering ? 0 : partitions);
}
export const deadSubject = (destinationId: string) => `hookpost.dead.${destinationId}`;

/** Ids become subject tokens and consumer names: keep them to this alphabet. */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A FAN_OUT destination's URL `i` is a delivery target `<id>~<i>` (docs/design/shaping.md 7.2):
 * its own subjects, lane, breaker and slots. `~` is outside ID_PATTERN, so no destination id is
 * ever taken for a target.
 */
export const targetId = (destinationId: string, urlIndex: number) => `${destinationId}~${urlIndex}`;
/** The destination and URL index of a target id; undefined for a destination id. */
export function splitTarget(id: string): { destinationId: string; urlIndex: number } | undefined {
  const at = id.lastIndexOf("~");
  if (at < 1) return undefined;
  const urlIndex = Number(id.slice(at + 1));
  return Number.isInteger(urlIndex) && urlIndex >= 0
    ? { destinationId: id.slice(0, at), urlIndex }
    : undefined;
}

export interface TopologySettings {
  /** How long a delivery is retried (RETRY_WINDOW). */
  retryWindowMs: number;
  /** Longest delay between two attempts (RETRY_MAX_DELAY). */
  retryMaxDelayMs: number;
  /** EVENTS size limit; when full, new calls are refused (DiscardNew). */
  eventsMaxBytes: number;
  /** DELIVERIES size limit; when full, routing waits and EVENTS fills up behind it. */
  deliveriesMaxBytes: number;
  /** How long dead letters are kept. */
  deadLetterMaxAgeMs: number;
  /** Window in which a repeated message id is stored once. */
  dedupWindowMs: number;
  /** Stream replicas (1 for a single server, 3 for a cluster). */
  replicas: number;
  /** How long the attempt log keeps records (ATTEMPT_LOG_MAX_AGE). */
  attemptLogMaxAgeMs: number;
  /** Attempt log size limit; the oldest records go first (ATTEMPT_LOG_MAX_BYTES). */
  attemptLogMaxBytes: number;
  /** DEAD size limit; the oldest dead letters go first (DEAD_LETTER_MAX_BYTES). */
  deadLetterMaxBytes: number;
  /** Configuration bucket size limit; writes are refused when full (CONFIG_MAX_BYTES). */
  configMaxBytes: number;
  /** User index size limit; new (user, source) pairs are refused when full (USER_INDEX_MAX_BYTES). */
  userIndexMaxBytes: number;
  /** Audience memberships size limit; syncs are refused when full (MEMBERSHIPS_MAX_BYTES). */
  membershipsMaxBytes: number;
  /** ORDERED size limit (PER_USER destinations); when full, routing waits (ORDERED_MAX_BYTES). */
  orderedMaxBytes: number;
  /** How long audit records are kept (AUDIT_LOG_MAX_AGE). */
  auditLogMaxAgeMs: number;
  /** Audit log size limit; when full, admin writes are refused (AUDIT_LOG_MAX_BYTES). */
  auditLogMaxBytes: number;
}

export const DEFAULT_TOPOLOGY: TopologySettings = {
  retryWindowMs: 4 * 3_600_000,
  retryMaxDelayMs: 15 * 60_000,
  eventsMaxBytes: 1024 ** 3,
  deliveriesMaxBytes: 1024 ** 3,
  deadLetterMaxAgeMs: 14 * 86_400_000,
  dedupWindowMs: 10 * 60_000,
  replicas: 1,
  attemptLogMaxAgeMs: 3 * 86_400_000,
  attemptLogMaxBytes: 1024 ** 3,
  deadLetterMaxBytes: 1024 ** 3,
  configMaxBytes: 256 * 1024 ** 2,
  userIndexMaxBytes: 1024 ** 3,
  membershipsMaxBytes: 1024 ** 3,
  orderedMaxBytes: 1024 ** 3,
  auditLogMaxAgeMs: 90 * 86_400_000,
  auditLogMaxBytes: 1024 ** 3,
};

/** The dispatchers bucket holds one small key per live replica: a fixed limit is plenty. */
const DISPATCHERS_MAX_BYTES = 8 * 1024 ** 2;

/** Deletion requests are small (≈ 300 bytes each): a fixed limit holds millions. */
const DELETIONS_MAX_BYTES = 256 * 1024 ** 2;

/**
 * Portal links are about 400 bytes each and a source has at most MAX_PORTAL_LINKS_PER_SOURCE
 * working at once: 64 MiB holds some 150 000. When full, CreatePortalLink is refused.
 */
const PORTAL_LINKS_MAX_BYTES = 64 * 1024 ** 2;
/** The longest a link works, and a week to show it expired in ListPortalLinks. */
export const PORTAL_LINKS_MAX_AGE_MS = PORTAL_LINK_LIFETIME.maxMs + 7 * 86_400_000;
/** Alert state: a small key per (operator webhook, destination) with a condition announced. */
export const ALERTS_MAX_BYTES = 64 * 1024 ** 2;

/** What a stream does when a write would exceed its byte limit. */
export type FullPolicy = "refuse_new" | "drop_oldest";

export interface StreamLimit {
  stream: string;
  maxBytes: number;
  policy: FullPolicy;
}

/** Every stream's byte limit and its policy when full (README "Streams when full"). */
export function streamLimits(s: TopologySettings): StreamLimit[] {
  return [
    { stream: EVENTS_STREAM, maxBytes: s.eventsMaxBytes, policy: "refuse_new" },
    { stream: DELIVERIES_STREAM, maxBytes: s.deliveriesMaxBytes, policy: "refuse_new" },
    { stream: ORDERED_STREAM, maxBytes: s.orderedMaxBytes, policy: "refuse_new" },
    { stream: DEAD_STREAM, maxBytes: s.deadLetterMaxBytes, policy: "drop_oldest" },
    { stream: ATTEMPTS_STREAM, maxBytes: s.attemptLogMaxBytes, policy: "drop_oldest" },
    { stream: ATTEMPT_INDEX_STREAM, maxBytes: attemptIndexMaxBytes(s), policy: "drop_oldest" },
    { stream: AUDIT_STREAM, maxBytes: s.auditLogMaxBytes, policy: "refuse_new" },
    { stream: kvStream(CONFIG_BUCKET), maxBytes: s.configMaxBytes, policy: "refuse_new" },
    { stream: kvStream(USER_SOURCES_BUCKET), maxBytes: s.userIndexMaxBytes, policy: "refuse_new" },
    { stream: objectStream(MEMBERSHIPS_BUCKET), maxBytes: s.membershipsMaxBytes, policy: "refuse_new" },
    { stream: kvStream(DISPATCHERS_BUCKET), maxBytes: DISPATCHERS_MAX_BYTES, policy: "refuse_new" },
    { stream: kvStream(DELETIONS_BUCKET), maxBytes: DELETIONS_MAX_BYTES, policy: "refuse_new" },
    { stream: kvStream(PORTAL_LINKS_BUCKET), maxBytes: PORTAL_LINKS_MAX_BYTES, policy: "refuse_new" },
    { stream: kvStream(ALERTS_BUCKET), maxBytes: ALERTS_MAX_BYTES, policy: "refuse_new" },
  ];
}

/**
 * DELIVERIES keeps a message at most this long. The dispatcher dead-letters at the retry
 * window; max-age is the backstop that only acts when no dispatcher ran for that long.
 */
export function deliveriesMaxAgeMs(s: TopologySettings): number {
  return 2 * s.retryWindowMs + s.retryMaxDelayMs;
}

/** The limits of a stream of deliveries (unordered or ordered): both keep a delivery as long. */
function deliveryLimits(s: TopologySettings, maxBytes: number): Partial<StreamConfig> {
  return {
    discard: DiscardPolicy.New,
    max_bytes: maxBytes,
    max_age: nanos(deliveriesMaxAgeMs(s)),
    duplicate_window: nanos(Math.min(s.dedupWindowMs, deliveriesMaxAgeMs(s))),
    storage: StorageType.File,
    num_replicas: s.replicas,
  };
}

function streamConfigs(s: TopologySettings): Partial<StreamConfig>[] {
  return [
    {
      name: EVENTS_STREAM,
      subjects: ["hookpost.events.>"],
      // Work queue: a call leaves the stream once the router has fanned it out. When full, new
      // calls are refused (429 / RESOURCE_EXHAUSTED), never older ones dropped.
      retention: RetentionPolicy.Workqueue,
      discard: DiscardPolicy.New,
      max_bytes: s.eventsMaxBytes,
      duplicate_window: nanos(s.dedupWindowMs),
      storage: StorageType.File,
      num_replicas: s.replicas,
    },
    {
      name: DELIVERIES_STREAM,
      subjects: ["hookpost.deliveries.>", `${LANE_SUBJECT_PREFIX}>`],
      retention: RetentionPolicy.Workqueue,
      ...deliveryLimits(s, s.deliveriesMaxBytes),
    },
    {
      name: ORDERED_STREAM,
      subjects: [`${ORDERED_SUBJECT_PREFIX}>`],
      // No consumers: a call is deleted by the replica that delivered or dead-lettered it, so
      // what is stored per subject is exactly the user's calls still owed, in order.
      retention: RetentionPolicy.Limits,
      ...deliveryLimits(s, s.orderedMaxBytes),
    },
    {
      name: DEAD_STREAM,
      subjects: ["hookpost.dead.>"],
      retention: RetentionPolicy.Limits,
      // When full, the oldest dead letters make room: a delivery is never held up for it.
      discard: DiscardPolicy.Old,
      max_age: nanos(s.deadLetterMaxAgeMs),
      max_bytes: s.deadLetterMaxBytes,
      storage: StorageType.File,
      num_replicas: s.replicas,
    },
    {
      name: ATTEMPTS_STREAM,
      subjects: ATTEMPT_SUBJECTS,
      retention: RetentionPolicy.Limits,
      // Search reads records by sequence: direct gets cost the server less than API requests.
      allow_direct: true,
      // A log: when full, the oldest records make room; a delivery is never refused for it.
      discard: DiscardPolicy.Old,
      max_age: nanos(s.attemptLogMaxAgeMs),
      max_bytes: s.attemptLogMaxBytes,
      storage: StorageType.File,
      num_replicas: s.replicas,
    },
    {
      name: ATTEMPT_INDEX_STREAM,
      subjects: ["hookpost.attindex.>"],
      retention: RetentionPolicy.Limits,
      allow_direct: true,
      discard: DiscardPolicy.Old,
      max_age: nanos(s.attemptLogMaxAgeMs + ATTEMPT_INDEX_EXTRA_AGE_MS),
      max_bytes: attemptIndexMaxBytes(s),
      // Replicas that finish the same segment at once write it once (message ids per segment).
      duplicate_window: nanos(Math.min(10 * 60_000, s.attemptLogMaxAgeMs)),
      storage: StorageType.File,
      num_replicas: s.replicas,
    },
    {
      name: AUDIT_STREAM,
      subjects: AUDIT_SUBJECTS,
      retention: RetentionPolicy.Limits,
      // Append-only: no API (ours or NATS's) deletes or purges a record; records leave only
      // by age. When full, admin writes are refused rather than old records dropped, so that
      // flooding the log cannot push out the record of an earlier change.
      deny_delete: true,
      deny_purge: true,
      discard: DiscardPolicy.New,
      max_age: nanos(s.auditLogMaxAgeMs),
      max_bytes: s.auditLogMaxBytes,
      storage: StorageType.File,
      num_replicas: s.replicas,
    },
  ];
}

/** Creates or updates the streams and the router consumer; safe to run from every replica at once. */
export async function ensureTopology(jsm: JetStreamManager, s: TopologySettings): Promise<void> {
  for (const cfg of streamConfigs(s)) {
    try {
      const info = await jsm.streams.info(cfg.name!);
      const merged = { ...info.config, ...cfg, max_bytes: safeMaxBytes(cfg, info) };
      if (JSON.stringify(merged) !== JSON.stringify(info.config)) await jsm.streams.update(cfg.name!, merged);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await jsm.streams.add(cfg);
      } catch (addErr) {
        // Another replica created it between our info and add.
        if (!isAlreadyExists(addErr)) throw addErr;
      }
    }
  }
  await ensureRouterConsumer(jsm);
}

/**
 * Creates the router consumer on EVENTS (idempotent): at every start, and by a running router
 * that finds it missing (deleted by hand, or lost with a server's state), since nothing else
 * would route the calls EVENTS keeps meanwhile.
 */
export async function ensureRouterConsumer(jsm: JetStreamManager): Promise<void> {
  await jsm.consumers.add(EVENTS_STREAM, {
    durable_name: ROUTER_CONSUMER,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(30_000),
    max_ack_pending: 10_000,
  });
}

/**
 * The byte limit to set on an existing stream. nats-server drops the oldest messages of a stream
 * whose limit is lowered below what it holds, whatever its discard policy: a refuse-new stream
 * (calls not yet delivered, configuration) keeps at least what it holds, and reaches the wanted
 * limit at a later start, once drained.
 */
export function safeMaxBytes(
  want: { max_bytes?: number; discard?: DiscardPolicy },
  info: { config: { max_bytes: number; discard?: DiscardPolicy }; state: { bytes: number } },
): number {
  const wanted = want.max_bytes ?? info.config.max_bytes;
  const discard = want.discard ?? info.config.discard;
  if (discard === DiscardPolicy.Old || wanted <= 0) return wanted;
  return Math.max(wanted, info.state.bytes);
}

/**
 * Adds back subjects of a stream that are missing (the union, never a removal): an older replica
 * that starts during an upgrade sets the attempt log's subjects back to its own list, and records
 * written on the new ones would not be stored until a newer replica's check. Returns whether it
 * changed the stream.
 */
export async function ensureSubjects(
  jsm: JetStreamManager,
  info: { config: StreamConfig },
  wanted: readonly string[],
): Promise<boolean> {
  const missing = wanted.filter((s) => !info.config.subjects.includes(s));
  if (missing.length === 0) return false;
  await jsm.streams.update(info.config.name, {
    ...info.config,
    subjects: [...info.config.subjects, ...missing],
  });
  return true;
}

/**
 * Sets the byte limit of the bucket streams (KV, object stores), which their stores create
 * without one; a bucket not created yet is left to a later call. Idempotent. Returns the
 * streams changed.
 */
export async function ensureBucketLimits(jsm: JetStreamManager, s: TopologySettings): Promise<string[]> {
  const changed: string[] = [];
  const buckets = streamLimits(s).filter((l) => l.stream.startsWith("KV_") || l.stream.startsWith("OBJ_"));
  for (const limit of buckets) {
    let info: Awaited<ReturnType<JetStreamManager["streams"]["info"]>>;
    try {
      info = await jsm.streams.info(limit.stream);
    } catch (err) {
      if (isNotFound(err)) continue;
      throw err;
    }
    const max = safeMaxBytes({ max_bytes: limit.maxBytes }, info);
    if (info.config.max_bytes === max) continue;
    await jsm.streams.update(limit.stream, { ...info.config, max_bytes: max });
    changed.push(limit.stream);
  }
  return changed;
}
