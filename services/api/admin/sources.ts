import type { GenService } from "@bufbuild/protobuf/codegenv2";
import {
  ADMIN_PAGES,
  allowedOriginsViolations,
  answerBytes,
  Code,
  type FieldViolation,
  HookpostError,
  normalizeOrigins,
} from "@hookpost/contract";
import type { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { Logger } from "@hookpost/core";
import {
  type ConfigStore,
  type DestinationRecord,
  generateWriteKey,
  hashWriteKey,
  type ServiceImpl,
  type SourceRecord,
  writeKeyPrefix,
} from "@hookpost/core";
import { throwIfInvalid } from "../invalid.js";
import { auditChange, changeAudited } from "./audit-changes.js";
import { createOnce } from "./create-once.js";
import { generateId, idViolations, nameViolations, notFound, requiredIdViolations } from "./ids.js";
import { pageOf } from "./paging.js";
import { sourceToProto } from "./to-proto.js";

export type AdminMethods = typeof AdminService extends GenService<infer S> ? S : never;

/**
 * Some of AdminService's methods: each handler group's object satisfies it, so its keys are the
 * methods it serves (misspelt or unknown ones are refused) and its handlers' requests are typed.
 */
export type AdminHandlers = Partial<ServiceImpl<AdminMethods>>;

export interface AdminDeps {
  store: ConfigStore;
  log: Logger;
  /** Called after a source is deleted (forgets which users it has seen). */
  onSourceDeleted?: (id: string) => Promise<void>;
  now?: () => Date;
  /** RETRY_WINDOW and RETRY_MAX_DELAY (default: the default topology's). */
  retryBounds?: { windowMs: number; maxDelayMs: number };
}

/**
 * Sources: a name, an id and a write key. The key is shown once (create, rotate); only its
 * hash is stored, so a lost key is replaced, never recovered.
 *
 * Deleting a source stops its write key at once and disconnects it from every destination
 * (its id is removed from their source_ids). A destination left without sources is kept,
 * with its settings and dead letters, but receives nothing until it is connected again.
 * Calls of the source already accepted but not yet routed find no destination and are dropped.
 */
export function sourceHandlers(deps: AdminDeps) {
  const { store, log } = deps;
  const now = deps.now ?? (() => new Date());
  const existing = (id: string): SourceRecord => {
    throwIfInvalid(requiredIdViolations(id));
    const s = store.source(id);
    if (!s) throw notFound("source", id);
    return s;
  };

  return {
    createSource: async (req, ctx) => {
      throwIfInvalid([
        ...nameViolations(req.name, "name"),
        ...(req.id === "" ? [] : idViolations(req.id, "id")),
        ...allowedOriginsViolations(req.allowedOrigins, "allowed_origins"),
      ]);
      const id = req.id === "" ? generateId("src") : req.id;
      if (store.source(id)) throw alreadyExists(id);
      const writeKey = generateWriteKey();
      const record: SourceRecord = {
        id,
        name: req.name.trim(),
        writeKeyHash: hashWriteKey(writeKey),
        writeKeyPrefix: writeKeyPrefix(writeKey),
        createdAt: now().toISOString(),
        ...withOrigins(normalizeOrigins(req.allowedOrigins)),
      };
      const revision = await createOnce(
        () => store.createSource(record),
        () => alreadyExists(id),
      );
      auditChange(ctx, id, { type: "source", after: record });
      log.info({ sourceId: id }, "source created");
      return { source: sourceToProto(record), writeKey, revision: BigInt(revision) };
    },

    getSource: async (req) => ({ source: sourceToProto(existing(req.id)) }),

    listSources: async (req) => {
      const { page, nextPageToken } = pageOf(store.sources(), req, ADMIN_PAGES.sources, (r) =>
        answerBytes(r.id, r.name, r.writeKeyPrefix, ...(r.allowedOrigins ?? [])),
      );
      return { sources: page.map(sourceToProto), nextPageToken };
    },

    updateSource: async (req, ctx) => {
      const s = req.source;
      if (!s) throw HookpostError.invalid([{ field: "source", description: "is required" }]);
      throwIfInvalid(requiredIdViolations(s.id, "source.id"));
      const paths = req.updateMask?.paths ?? [];
      const violations: FieldViolation[] = [];
      paths.forEach((p, i) => {
        if (!(SOURCE_UPDATABLE as readonly string[]).includes(p)) {
          violations.push({
            field: `update_mask.paths[${i}]`,
            description: `unknown or read-only field "${p.slice(0, 80)}": use ${SOURCE_UPDATABLE.join(", ")}`,
          });
        }
      });
      throwIfInvalid(violations);
      const fields = new Set(paths.length === 0 ? SOURCE_UPDATABLE : paths);
      throwIfInvalid([
        ...(fields.has("name") ? nameViolations(s.name, "source.name") : []),
        ...(fields.has("allowed_origins")
          ? allowedOriginsViolations(s.allowedOrigins, "source.allowed_origins")
          : []),
      ]);
      const { revision, record: next } = await changeAudited(ctx, store, "source", s.id, (current) => {
        const next = { ...current };
        if (fields.has("name")) next.name = s.name.trim();
        if (fields.has("allowed_origins")) {
          delete next.allowedOrigins;
          Object.assign(next, withOrigins(normalizeOrigins(s.allowedOrigins)));
        }
        return next;
      });
      log.info({ sourceId: next.id, fields: [...fields] }, "source updated");
      return { source: sourceToProto(next), revision: BigInt(revision) };
    },

    deleteSource: async (req, ctx) => {
      const source = existing(req.id);
      let revision = await store.deleteSource(source.id);
      auditChange(ctx, source.id, { type: "source", before: source });
      const connected = store.destinationsForSource(source.id);
      for (const d of connected) {
        // Revision-checked: a change made to the destination meanwhile is kept.
        let change: { before: DestinationRecord; after: DestinationRecord } | undefined;
        const changed = await store.changeDestination(d.id, (cur) => {
          if (!cur.sourceIds.includes(source.id)) return undefined;
          const after = {
            ...cur,
            sourceIds: cur.sourceIds.filter((s) => s !== source.id),
            updatedAt: now().toISOString(),
          };
          change = { before: cur, after };
          return after;
        });
        if (changed !== undefined && change) {
          revision = changed;
          auditChange(ctx, d.id, { type: "destination", ...change });
        }
      }
      await deps.onSourceDeleted?.(source.id);
      log.info(
        { sourceId: source.id, disconnectedDestinations: connected.map((d) => d.id) },
        "source deleted",
      );
      return { revision: BigInt(revision) };
    },

    rotateWriteKey: async (req, ctx) => {
      const source = existing(req.id);
      const writeKey = generateWriteKey();
      // Compare-and-set: a rotation that lost the race is refused (ABORTED), not applied over
      // the winner, whose key would then be answered yet never accepted.
      let base: string | undefined;
      const { revision, record } = await changeAudited(ctx, store, "source", source.id, (current) => {
        base ??= current.writeKeyHash;
        if (current.writeKeyHash !== base) throw concurrentChange(source.id);
        return {
          ...current,
          writeKeyHash: hashWriteKey(writeKey),
          writeKeyPrefix: writeKeyPrefix(writeKey),
        };
      });
      log.info({ sourceId: source.id }, "write key rotated");
      return { source: sourceToProto(record), writeKey, revision: BigInt(revision) };
    },
  } satisfies AdminHandlers;
}

/** UpdateSource's mask paths. */
const SOURCE_UPDATABLE = ["name", "allowed_origins"] as const;

/** An empty list is stored as no field: the record of a source without origins stays as it was. */
function withOrigins(origins: string[]): Pick<SourceRecord, "allowedOrigins"> {
  return origins.length === 0 ? {} : { allowedOrigins: origins };
}

function concurrentChange(id: string): HookpostError {
  return new HookpostError(
    Code.ABORTED,
    `the write key of source "${id}" was rotated by another call meanwhile; this call changed nothing: the key that call answered with is the one in force`,
  );
}

function alreadyExists(id: string): HookpostError {
  return new HookpostError(Code.ALREADY_EXISTS, `a source with id "${id}" already exists`);
}
