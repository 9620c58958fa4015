import { hash } from "node:crypto";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code, type FieldViolation, HookpostError, serverCall } from "@hookpost/contract";
import {
  EMPTY_SOURCE,
  type Entry,
  formatEntry,
  LineFileWriter,
  type MembershipKind,
  membershipObjectName,
  PublishWindow,
  RunBuilder,
  type SortedSource,
  type StoredMembership,
  unescapeField,
} from "@hookpost/core";
import type { SyncDeps, SyncOptions } from "./deps.js";
import { jetStreamPublisher } from "./publish.js";
import { snakeCase } from "./snake-case.js";

/** Longest audience or trait name. */
export const MAX_SYNC_NAME_LENGTH = 256;
/** Longest member id of a sync (an identify call must stay under the 32 KiB call limit). */
export const MAX_SYNC_USER_ID_LENGTH = 8 * 1024;
/** Temporary folders of syncs are named `<prefix><pid>-<random>`. */
export const SYNC_TEMP_PREFIX = "hookpost-sync-";
/** At most this many field violations are reported for one request. */
const MAX_VIOLATIONS = 20;

/** What one sync is about. */
export interface SyncSubject {
  kind: MembershipKind;
  sourceId: string;
  /** The name as the first message gave it. */
  name: string;
  /** snakeCase(name): the trait key and, with the source and kind, the membership's identity. */
  key: string;
}

export interface SyncCounts {
  /** Distinct members (users with a value) in this sync. */
  current: number;
  /** Members who were not in the stored membership. */
  added: number;
  /** Members who were, with a different value (computed traits only). */
  changed: number;
  /** Stored members missing from this sync. */
  left: number;
}

/** Validates a name field of the first message and derives its key. */
export function nameAndKey(field: string, raw: string): { name: string; key: string } {
  const name = raw.trim();
  let problem: string | undefined;
  if (name === "") problem = "required on the first message";
  else if (name.length > MAX_SYNC_NAME_LENGTH) problem = `at most ${MAX_SYNC_NAME_LENGTH} characters`;
  const key = problem ? "" : snakeCase(name);
  if (!problem && key === "") problem = "must contain at least one letter or digit";
  if (problem) throw HookpostError.invalid([{ field, description: problem }]);
  return { name, key };
}

/** Why a member id is not acceptable, or undefined. */
export function userIdProblem(id: unknown): string | undefined {
  if (typeof id !== "string" || id === "") return "a user id must not be empty";
  if (id.length > MAX_SYNC_USER_ID_LENGTH)
    return `a user id is at most ${MAX_SYNC_USER_ID_LENGTH} characters`;
  return undefined;
}

/** Collects violations of one request message; throws INVALID_ARGUMENT once the message is checked. */
export class Violations {
  readonly list: FieldViolation[] = [];

  add(field: string, description: string): void {
    if (this.list.length < MAX_VIOLATIONS) this.list.push({ field, description });
  }

  get full(): boolean {
    return this.list.length >= MAX_VIOLATIONS;
  }

  throwIfAny(): void {
    if (this.list.length > 0) throw HookpostError.invalid(this.list);
  }
}

/**
 * Runs `fn` with a private temporary folder, removed afterwards whatever happens. The name
 * carries the process id, so that a later start can tell the folders of a dead process
 * (sync-temp.ts).
 */
export async function withTempDir<T>(deps: SyncDeps, fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(deps.tmpDir ?? tmpdir(), `${SYNC_TEMP_PREFIX}${process.pid}-`));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true }).catch(() => {});
  }
}

export function newRunBuilder(deps: SyncDeps, dir: string): RunBuilder {
  return new RunBuilder({
    dir,
    maxEntries: deps.runEntries ?? 50_000,
    maxBytes: deps.runBytes ?? 16 * 1024 * 1024,
  });
}

/** How one kind of sync reads its request stream. */
export interface StreamReading<R> {
  /** `audience_name` or `trait_name`. */
  nameField: string;
  /** `audience` or `trait`, for messages. */
  what: string;
  nameOf(req: R): string | undefined;
  /** The (escaped id, value) entries of one message; problems go to `bad`. */
  entriesOf(req: R, message: number, bad: Violations): Array<[string, string]>;
}

/**
 * Reads and validates the whole stream (each message before any of it is kept), sorting its
 * entries into runs on disk. The first message names the sync.
 */
export async function readSyncStream<R>(
  deps: SyncDeps,
  dir: string,
  requests: AsyncIterable<R>,
  reading: StreamReading<R>,
  options: SyncOptions,
): Promise<{ name: string; key: string; sorted: SortedSource }> {
  const runs = newRunBuilder(deps, dir);
  let first: { name: string; key: string } | undefined;
  let message = 0;
  for await (const req of requests) {
    if (options.signal?.aborted) throw cancelled();
    message++;
    const bad = new Violations();
    const named = reading.nameOf(req);
    if (!first) {
      first = nameAndKey(reading.nameField, named ?? "");
    } else if (named && named.trim() !== first.name) {
      bad.add(
        reading.nameField,
        `message ${message}: the ${reading.what} is named on the first message only`,
      );
    }
    const entries = reading.entriesOf(req, message, bad);
    bad.throwIfAny();
    for (const [id, value] of entries) {
      const spilled = runs.add(id, value);
      if (spilled) await spilled;
    }
  }
  if (!first) {
    throw HookpostError.invalid([{ field: reading.nameField, description: "required on the first message" }]);
  }
  return { ...first, sorted: await runs.finish() };
}

export function cancelled(): HookpostError {
  return new HookpostError(Code.CANCELLED, "the sync was cancelled; the stored membership is unchanged");
}

/** In-process serialization of syncs of one membership (across replicas: optimistic locking). */
const locks = new Map<string, Promise<void>>();

async function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const before = locks.get(name) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => {
    release = resolve;
  });
  const chain = before.then(() => mine);
  locks.set(name, chain);
  await before;
  try {
    return await fn();
  } finally {
    release();
    if (locks.get(name) === chain) locks.delete(name);
  }
}

/**
 * The deterministic message id of one identify call of a sync: a digest of what the call says
 * (source, kind, key, user, new value) and of the stored membership it was computed against
 * (its nuid, unique per stored version). A retry of an interrupted sync starts from the same
 * stored membership and so produces the same ids, which JetStream deduplicates; a later sync,
 * even one that repeats an earlier change (a user leaving twice), starts from another version
 * and gets new ids.
 */
export function syncMessageId(
  subject: SyncSubject,
  generation: string,
  escapedUserId: string,
  valueJson: string,
): string {
  return syncMessageIds(subject, generation)(escapedUserId, valueJson);
}

/**
 * `syncMessageId` for one sync: the parts that do not change between its calls are rendered
 * once (the digest input is byte for byte the same JSON array).
 */
export function syncMessageIds(
  subject: SyncSubject,
  generation: string,
): (escapedUserId: string, valueJson: string) => string {
  const head = JSON.stringify(["hookpost-sync/1", subject.sourceId, subject.kind, subject.key]).slice(0, -1);
  const tail = `,${JSON.stringify(generation)}]`;
  const prefix = subject.kind === "audience" ? "aud_" : "trt_";
  // Audience values are "true"/"false": their JSON string, rendered once.
  const quoted = new Map(["true", "false", "null"].map((v) => [v, JSON.stringify(v)]));
  return (escapedUserId, valueJson) =>
    prefix +
    hash(
      "sha256",
      `${head},${JSON.stringify(escapedUserId)},${quoted.get(valueJson) ?? JSON.stringify(valueJson)}${tail}`,
      "base64url",
    );
}

/**
 * `JSON.stringify` of a sync's identify call (the StoredCall `emit` in applySync builds), from
 * templates rendered once per sync: per call only the message id, the user id and the value
 * are spliced in. `valueJson` is canonical JSON (JSON.stringify output), which JSON.stringify
 * of its parsed value renders unchanged; message ids (prefix and base64url) need no escaping.
 * Byte for byte what JSON.stringify gives (test/sync/identify-json.test.ts).
 */
export function identifyJsonRenderer(
  subject: SyncSubject,
  at: string,
  context: JsonObject,
): (messageId: string, userId: string, valueJson: string) => string {
  const head = '{"type":"identify","messageId":"';
  const mid = `","sourceId":${JSON.stringify(subject.sourceId)},"receivedAt":${JSON.stringify(at)},"timestamp":${JSON.stringify(at)},"userId":`;
  const traits = `,"context":${JSON.stringify(context)},"traits":{${JSON.stringify(subject.key)}:`;
  return (messageId, userId, valueJson) =>
    `${head}${messageId}${mid}${JSON.stringify(userId)}${traits}${valueJson}}}`;
}

/**
 * A whole sync: its stream read, checked and sorted in a temporary folder, then merged with the
 * stored membership; `current` may refine what was read before the merge.
 */
export function runSync<R>(
  deps: SyncDeps,
  kind: MembershipKind,
  sourceId: string,
  requests: AsyncIterable<R>,
  reading: StreamReading<R>,
  options: SyncOptions,
  current: (sorted: SortedSource) => SortedSource = (sorted) => sorted,
): Promise<SyncCounts> {
  return withTempDir(deps, async (dir) => {
    const { sorted, ...named } = await readSyncStream(deps, dir, requests, reading, options);
    return applySync(deps, { kind, sourceId, ...named }, current(sorted), dir, options);
  });
}

/** Told to a source over its memberships share: only smaller or fewer memberships free room. */
const SHARE_RETRY_AFTER_MS = 60_000;

/**
 * SOURCE_MAX_MEMBERSHIP_BYTES: refuses (RESOURCE_EXHAUSTED) when the source's other memberships
 * (`others`, else read now) and this one of `size` bytes (undefined: not known yet) do not fit.
 * A sync of a stored membership (`previousSize`) that does not make it larger always goes on:
 * it only frees room, and it is the one way back under the share for a source over it (data
 * stored before the share, a lowered share, concurrent syncs). Resolves with the other
 * memberships' bytes; undefined when there is no limit.
 */
async function checkShare(
  deps: SyncDeps,
  sourceId: string,
  objectName: string,
  size: number | undefined,
  previousSize: number | undefined,
  others?: number,
): Promise<number | undefined> {
  const max = deps.maxMembershipBytes;
  if (max === undefined) return undefined;
  const used = others ?? (await deps.memberships.bytesOf(sourceId, objectName));
  if (size === undefined) {
    // At the start: a stored membership may shrink, decided once its new size is known.
    if (used < max || previousSize !== undefined) return used;
  } else if (used + size <= max || (previousSize !== undefined && size <= previousSize)) {
    return used;
  }
  throw new HookpostError(
    Code.RESOURCE_EXHAUSTED,
    `source ${sourceId}'s other stored memberships take ${used} bytes${size !== undefined ? ` and this one would take ${size}` : ""}, ` +
      `its share is ${max} (SOURCE_MAX_MEMBERSHIP_BYTES): the stored membership is unchanged; ` +
      "retry once the source's memberships are smaller, or the share raised",
    [],
    { retryAfterMs: SHARE_RETRY_AFTER_MS },
  );
}

/**
 * Compares the complete current membership (sorted, deduplicated) with the stored one in one
 * streaming pass, publishes an identify call for every difference (at most `maxInFlight`
 * awaiting their PubAck), writes the new membership to a local file meanwhile, and once every
 * call is confirmed swaps the new list in. Any failure leaves the stored membership as it was.
 */
export async function applySync(
  deps: SyncDeps,
  subject: SyncSubject,
  current: SortedSource,
  dir: string,
  options: SyncOptions,
): Promise<SyncCounts> {
  const objectName = membershipObjectName(subject.sourceId, subject.kind, subject.key);
  return withLock(objectName, async () => {
    const started = performance.now();
    const previous = await deps.memberships.info(objectName);
    // The source's other memberships: a sync that cannot fit is refused before it sends anything.
    const others = await checkShare(deps, subject.sourceId, objectName, undefined, previous?.size);
    const prev = previous ? deps.memberships.source(previous) : EMPTY_SOURCE;
    const generation = previous?.nuid ?? "none";
    const publish = deps.publish ?? jetStreamPublisher(deps.nc, deps.publishTimeoutMs);
    const window = new PublishWindow(deps.maxInFlight ?? 256);
    const outPath = join(dir, "membership.new");
    const out = await LineFileWriter.create(outPath);
    const at = (deps.now?.() ?? new Date()).toISOString();
    const context: JsonObject =
      subject.kind === "audience"
        ? { audience: { name: subject.name, key: subject.key } }
        : { computedTrait: { name: subject.name, key: subject.key } };
    const leftValue = subject.kind === "audience" ? "false" : "null";
    const counts: SyncCounts = { current: 0, added: 0, changed: 0, left: 0 };
    const signal = options.signal;
    const messageId = syncMessageIds(subject, generation);
    // Audience values are "true"/"false": parsed once, not per call.
    const parsed = new Map<string, JsonValue>([
      ["true", true],
      ["false", false],
      ["null", null],
    ]);

    const render = identifyJsonRenderer(subject, at, context);

    const emit = (escapedId: string, valueJson: string, isNew: boolean): Promise<void> | undefined => {
      const userId = unescapeField(escapedId);
      const value = parsed.has(valueJson) ? parsed.get(valueJson)! : (JSON.parse(valueJson) as JsonValue);
      const ids = { messageId: messageId(escapedId, valueJson), sourceId: subject.sourceId, userId };
      const call = serverCall("identify", ids, at, { context, traits: { [subject.key]: value } });
      const json = render(call.messageId, userId, valueJson);
      const index = isNew ? deps.index : undefined;
      // A new member is recorded before its call is stored: a member the index cannot take
      // (full, unreachable) fails the sync without a call delivered that its deletion could miss.
      return window.run(() =>
        index ? index.record(userId, subject.sourceId).then(() => publish(call, json)) : publish(call, json),
      );
    };

    let stored: StoredMembership | undefined;
    try {
      let c: Entry | undefined = await current.next();
      let p: Entry | undefined = await prev.next();
      while (c !== undefined || p !== undefined) {
        if (signal?.aborted) throw cancelled();
        let pending: Promise<void> | undefined;
        let written: Promise<void> | undefined;
        if (c !== undefined && (p === undefined || c.id < p.id)) {
          counts.current++;
          counts.added++;
          pending = emit(c.id, subject.kind === "audience" ? "true" : c.value, true);
          written = out.write(formatEntry(c));
          c = await current.next();
        } else if (c === undefined || p!.id < c.id) {
          counts.left++;
          pending = emit(p!.id, leftValue, false);
          p = await prev.next();
        } else {
          counts.current++;
          if (c.value !== p!.value) {
            counts.changed++;
            pending = emit(c.id, c.value, false);
          }
          written = out.write(formatEntry(c));
          c = await current.next();
          p = await prev.next();
        }
        if (pending) await pending;
        if (written) await written;
      }
      await window.drain();
      await out.close();
      if (signal?.aborted) throw cancelled();
      const changes = counts.added + counts.changed + counts.left;
      // Unchanged: the stored list is already this one (and keeps its generation).
      if (!previous || changes > 0) {
        if (others === undefined) stored = await deps.memberships.write(objectName, outPath, previous);
        else {
          const size = (await stat(outPath)).size;
          // Measured against the source's other memberships read again now, not as counted at
          // the start: syncs of its other audiences under way at once each passed on that figure.
          // One check and store at a time per source here (other replicas may still overshoot
          // by a list).
          stored = await withLock(`share:${subject.sourceId}`, async () => {
            await checkShare(deps, subject.sourceId, objectName, size, previous?.size);
            return deps.memberships.write(objectName, outPath, previous);
          });
        }
      }
    } catch (err) {
      await window.settle();
      await out.abort();
      deps.log.warn(
        {
          sourceId: subject.sourceId,
          kind: subject.kind,
          key: subject.key,
          err: (err as Error)?.message,
        },
        "sync failed; stored membership unchanged",
      );
      throw err;
    } finally {
      await Promise.all([current.close(), prev.close()]).catch(() => {});
    }
    deps.log.info(
      {
        sourceId: subject.sourceId,
        kind: subject.kind,
        key: subject.key,
        ...counts,
        stored: stored?.size,
        ms: Math.round(performance.now() - started),
      },
      "sync done",
    );
    return counts;
  });
}
