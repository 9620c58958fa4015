import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ADMIN_PAGES,
  answerBytes,
  Code,
  HookpostError,
  MAX_PORTAL_LINKS_PER_SOURCE,
  PORTAL_LINK_LIFETIME,
  portalLinkLifetimeViolations,
  portalLinkNameViolations,
  portalLinkUrl,
} from "@hookpost/contract";
import { ActorKind, type PortalLinkSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  type ConfigStore,
  countIfFull,
  hashPortalToken,
  isPortalLinkId,
  kvStream,
  type Logger,
  newPortalLinkId,
  newPortalToken,
  PORTAL_LINKS_BUCKET,
  type PortalLinkRecord,
  type PortalLinkStore,
} from "@hookpost/core";
import { throwIfInvalid } from "../invalid.js";
import { auditChange } from "./audit-changes.js";
import { callerOf } from "./callers.js";
import { notFound, requiredIdViolations } from "./ids.js";
import { pageOf } from "./paging.js";
import type { AdminHandlers } from "./sources.js";

export interface PortalLinkDeps {
  store: ConfigStore;
  portalLinks: PortalLinkStore;
  log: Logger;
  now?: () => Date;
  /** CONSOLE_URL: where users reach the console; portal link URLs start with it. */
  consoleUrl?: string | undefined;
}

/**
 * CreatePortalLink, ListPortalLinks, RevokePortalLink and GetCaller. What a link may do is not
 * decided here but by the scope table every call passes (portal-scope.ts); these only manage links.
 * The token is answered once and never logged; the store keeps its hash.
 */
export function portalLinkHandlers(deps: PortalLinkDeps) {
  const { store, portalLinks, log } = deps;
  const now = deps.now ?? (() => new Date());

  return {
    createPortalLink: async (req, ctx) => {
      const lifetimeMs = req.lifetime ? durationMs(req.lifetime) : undefined;
      throwIfInvalid([
        ...requiredIdViolations(req.sourceId, "source_id"),
        ...portalLinkLifetimeViolations(lifetimeMs, "lifetime"),
        ...portalLinkNameViolations(req.name, "name"),
      ]);
      const source = store.source(req.sourceId);
      if (!source) throw notFound("source", req.sourceId);
      const at = now();
      const working = (await portalLinks.list(source.id)).filter((l) => isWorking(l, at));
      if (working.length >= MAX_PORTAL_LINKS_PER_SOURCE) {
        throw new HookpostError(
          Code.RESOURCE_EXHAUSTED,
          `source "${source.id}" has ${working.length} working portal links, the most allowed: revoke some (ListPortalLinks, RevokePortalLink) or let them expire`,
        );
      }
      if (await portalLinks.nearlyFull()) throw bucketFull();
      const id = newPortalLinkId();
      const token = newPortalToken(source.id, id);
      const record: PortalLinkRecord = {
        id,
        sourceId: source.id,
        sourceCreatedAt: source.createdAt,
        name: req.name.trim(),
        readOnly: req.readOnly,
        createdAt: at.toISOString(),
        expiresAt: new Date(at.getTime() + (lifetimeMs ?? PORTAL_LINK_LIFETIME.defaultMs)).toISOString(),
        createdBy: callerOf(ctx)?.actor.id ?? "",
        tokenHash: hashPortalToken(token),
      };
      try {
        await portalLinks.create(record);
      } catch (err) {
        if (countIfFull(kvStream(PORTAL_LINKS_BUCKET), err)) throw bucketFull();
        throw err;
      }
      auditChange(ctx, id, { type: "portal_link", after: shown(record) });
      // Never the token: only what names the link.
      log.info(
        { sourceId: source.id, portalLinkId: id, expiresAt: record.expiresAt, readOnly: record.readOnly },
        "portal link created",
      );
      return { portalLink: portalLinkToProto(record), token, url: portalLinkUrl(deps.consoleUrl, token) };
    },

    listPortalLinks: async (req) => {
      throwIfInvalid(requiredIdViolations(req.sourceId, "source_id"));
      const all = await portalLinks.list(req.sourceId);
      if (all.length === 0 && !store.source(req.sourceId)) throw notFound("source", req.sourceId);
      const { page, nextPageToken } = pageOf(all, req, ADMIN_PAGES.portalLinks, (l) =>
        answerBytes(l.id, l.sourceId, l.name, l.createdBy),
      );
      return { portalLinks: page.map(portalLinkToProto), nextPageToken };
    },

    revokePortalLink: async (req, ctx) => {
      throwIfInvalid(
        req.id === ""
          ? [{ field: "id", description: "is required" }]
          : isPortalLinkId(req.id)
            ? []
            : [{ field: "id", description: "is not a portal link id (pl_…)" }],
      );
      const before = await portalLinks.find(req.id);
      const after = before && (await portalLinks.revoke(before, now()));
      if (!before || !after) {
        throw new HookpostError(Code.NOT_FOUND, `portal link "${req.id}" does not exist (or has aged out)`);
      }
      auditChange(ctx, after.id, { type: "portal_link", before: shown(before), after: shown(after) });
      log.info({ sourceId: after.sourceId, portalLinkId: after.id }, "portal link revoked");
      return { portalLink: portalLinkToProto(after) };
    },

    getCaller: async (_req, ctx) => {
      const caller = callerOf(ctx);
      if (!caller) throw new HookpostError(Code.INTERNAL, "the caller is not known");
      if (caller.kind === "admin") return { actorKind: ActorKind.ADMIN_TOKEN, actorId: caller.actor.id };
      return {
        actorKind: ActorKind.PORTAL_LINK,
        actorId: caller.link.id,
        portalLink: portalLinkToProto(caller.link),
      };
    },
  } satisfies AdminHandlers;
}

function bucketFull(): HookpostError {
  return new HookpostError(
    Code.RESOURCE_EXHAUSTED,
    "the portal links bucket is nearly full (its last 10 % is kept for revocations): expired and revoked links leave it by age",
  );
}

/** Neither expired nor revoked at `at`. */
function isWorking(l: PortalLinkRecord, at: Date): boolean {
  return l.revokedAt === undefined && Date.parse(l.expiresAt) > at.getTime();
}

/** What the audit log records of a link: everything but its token's hash. */
function shown(l: PortalLinkRecord): Omit<PortalLinkRecord, "tokenHash"> {
  const { tokenHash: _, ...rest } = l;
  return rest;
}

export function portalLinkToProto(l: PortalLinkRecord): MessageInitShape<typeof PortalLinkSchema> {
  return {
    id: l.id,
    sourceId: l.sourceId,
    name: l.name,
    readOnly: l.readOnly,
    createTime: timestampFromDate(new Date(l.createdAt)),
    expireTime: timestampFromDate(new Date(l.expiresAt)),
    ...(l.revokedAt === undefined ? {} : { revokeTime: timestampFromDate(new Date(l.revokedAt)) }),
    createdBy: l.createdBy,
  };
}
