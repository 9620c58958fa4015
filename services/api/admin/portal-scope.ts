import type { MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { Code, HookpostError, MAX_PORTAL_DESTINATIONS_PER_SOURCE } from "@hookpost/contract";
import type { Destination, DestinationSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { ConfigStore, DestinationRecord, PortalLinkRecord, SourceRecord } from "@hookpost/core";
import type { AdminMethods } from "./sources.js";
import { sourceToProto } from "./to-proto.js";

/**
 * What a portal link may do, method by method (docs/security.md#portal-links). Every AdminService
 * call made with a link passes `enterScope` before its handler runs:
 *
 * - `refused`: global methods, or methods about other sources: PERMISSION_DENIED whatever the request.
 * - `read` / `write`: allowed when `check` finds every id the request names inside the link's world
 *   (its source, and the destinations connected to it). `check` throws PERMISSION_DENIED otherwise,
 *   and narrows filters the request leaves open (source_id "" becomes the link's source) so a list
 *   never reaches past it. A `write` is refused to read-only links.
 *
 * The table is typed over the descriptor's methods, so a method added to admin.proto does not
 * compile until it has a rule here; at run time a method without one is refused to every link
 * (test/portal/portal-scope.test.ts also compares the table with the descriptor).
 *
 * Destinations shared with other sources: readable (their answers show only the link's source
 * among source_ids; attempts and dead letters only that source's calls), never changed through a
 * link, since any change (URL, pause, secret, replay, test call) would also act on the other
 * sources' deliveries.
 */
export interface PortalCaller {
  readonly link: PortalLinkRecord;
  readonly source: SourceRecord;
}

type Methods = AdminMethods;
type Name = keyof Methods & string;
type Req<K extends Name> = MessageShape<Methods[K]["input"]>;
type Res<K extends Name> = MessageInitShape<Methods[K]["output"]>;

export type ScopeRule<K extends Name> =
  | { access: "refused"; why: string }
  | {
      access: "read" | "write";
      /** Throws PERMISSION_DENIED when the request names anything outside the link's world; narrows open filters. */
      check?: (req: Req<K>, s: Scope) => void;
      /** Answers instead of the handler (the answer is already the link's world). */
      answer?: (req: Req<K>, s: Scope) => Res<K>;
      /** Narrows the handler's answer to the link's world (`req` as `check` left it). */
      narrow?: (res: Res<K>, s: Scope, req: Req<K>) => Res<K>;
    };

export type ScopeTable = { [K in Name]: ScopeRule<K> };

/** The checks the rules use, for one link. */
export class Scope {
  readonly sourceId: string;

  constructor(
    readonly caller: PortalCaller,
    readonly store: ConfigStore,
  ) {
    this.sourceId = caller.source.id;
  }

  /** A source id a request names: "" becomes the link's source; another source is refused. */
  sourceFilter(value: string, field: string): string {
    if (value === "" || value === this.sourceId) return this.sourceId;
    throw denied(
      `${field} "${clip(value)}" is another source: this portal link reaches only source "${this.sourceId}"`,
    );
  }

  /** A destination connected to the link's source (perhaps shared with others): may be read. */
  connected(id: string, field: string): DestinationRecord {
    const d = this.store.destination(id);
    // An unknown id and another source's destination answer alike: no existence oracle.
    if (!d?.sourceIds.includes(this.sourceId)) {
      throw denied(
        `${field} "${clip(id)}" is not a destination of source "${this.sourceId}", the only source this portal link reaches`,
      );
    }
    return d;
  }

  /** A destination of the link's source alone: may be changed. */
  owned(id: string, field: string): DestinationRecord {
    const d = this.connected(id, field);
    if (d.sourceIds.length !== 1) {
      throw denied(
        `destination "${d.id}" also receives calls of other sources, so it cannot be changed through a portal link (a change would act on their deliveries too): ask the operator`,
      );
    }
    return d;
  }

  /** The source_ids a destination is given: exactly the link's source ([] is read as it). */
  sourceIds(ids: string[], field: string): string[] {
    if (ids.length === 0 || (ids.length === 1 && ids[0] === this.sourceId)) return [this.sourceId];
    throw denied(
      `${field} must be ["${this.sourceId}"]: this portal link reaches only source "${this.sourceId}"`,
    );
  }

  /** A request that changes something even though its method may only read (a stored destination's dry run). */
  writing(why: string): void {
    if (this.caller.link.readOnly) throw denied(`this portal link is read-only: ${why}`);
  }

  /** A destination as the link's world shows it: only its source among source_ids. */
  destination(d: MessageInitShape<typeof DestinationSchema>): MessageInitShape<typeof DestinationSchema> {
    d.sourceIds = (d.sourceIds ?? []).filter((s) => s === this.sourceId);
    return d;
  }
}

function denied(message: string): HookpostError {
  return new HookpostError(Code.PERMISSION_DENIED, message);
}

/** Ids in messages are bounded (a request is recorded before it is validated). */
const clip = (s: string) => (s.length > 64 ? `${s.slice(0, 64)}…` : s);

/** A method a portal link may not call at all; `why` ends the refusal. */
const refused = (why: string) => ({ access: "refused", why }) as const;

const GLOBAL = "it acts on the whole installation, not one source";
const OTHER_SOURCES = "it is about sources, which only the operator manages";
const LINKS = "portal links are managed with the admin token only";

/** Requests filtered by source_id: "" becomes the link's source, another source is refused. */
function ofSource(req: { sourceId: string }, s: Scope): void {
  req.sourceId = s.sourceFilter(req.sourceId, "source_id");
}

/** Reads filtered by an optional destination_id: one connected to the link's source. */
function ofDestination(req: { destinationId: string }, s: Scope): void {
  if (req.destinationId !== "") s.connected(req.destinationId, "destination_id");
}

/** Reads filtered by an optional destination and source (attempts, dead letters): kept to the link's calls. */
function callsOfSource(req: { destinationId: string; sourceId: string }, s: Scope): void {
  ofDestination(req, s);
  ofSource(req, s);
}

/** Requests acting on one destination, which must be the link's source's alone. */
function ownDestination(req: { destinationId: string }, s: Scope): void {
  s.owned(req.destinationId, "destination_id");
}

/** A destination's id and whether the request replaces its source_ids (UpdateDestination). */
function updatesSources(paths: readonly string[]): boolean {
  return paths.length === 0 || paths.includes("source_ids");
}

export const PORTAL_SCOPE: ScopeTable = {
  // Sources: the link's own source can be read; nothing else about sources is reachable.
  createSource: refused(OTHER_SOURCES),
  getSource: {
    access: "read",
    check: (req, s) => {
      req.id = s.sourceFilter(req.id, "id");
    },
  },
  listSources: {
    access: "read",
    // The list of sources a link can see: its own.
    answer: (req, s) => ({
      sources: req.pageToken === "" ? [sourceToProto(s.caller.source)] : [],
      nextPageToken: "",
    }),
  },
  deleteSource: refused(OTHER_SOURCES),
  // A source's name and browser origins are the operator's (it runs the sites that send calls).
  updateSource: refused(OTHER_SOURCES),
  // The write key is the operator's credential for the services that send calls: a tenant rotating
  // it would stop the operator's own ingestion.
  rotateWriteKey: refused("the write key belongs to the services sending calls, which the operator runs"),

  createDestination: {
    access: "write",
    check: (req, s) => {
      const count = s.store.destinationsForSource(s.sourceId).length;
      if (count >= MAX_PORTAL_DESTINATIONS_PER_SOURCE) {
        throw new HookpostError(
          Code.RESOURCE_EXHAUSTED,
          `source "${s.sourceId}" has ${count} destinations, the most a portal link may create: delete one, or ask the operator`,
        );
      }
      if (req.destination) {
        req.destination.sourceIds = s.sourceIds(req.destination.sourceIds, "destination.source_ids");
      }
    },
  },
  getDestination: {
    access: "read",
    check: (req, s) => {
      s.connected(req.id, "id");
    },
    narrow: (res, s) => (res.destination ? { destination: s.destination(res.destination) } : {}),
  },
  listDestinations: {
    access: "read",
    check: ofSource,
    narrow: (res, s) => ({
      destinations: (res.destinations ?? []).map((d) => s.destination(d)),
      nextPageToken: res.nextPageToken ?? "",
    }),
  },
  updateDestination: {
    access: "write",
    check: (req, s) => {
      const d: Destination | undefined = req.destination;
      if (!d) return;
      s.owned(d.id, "destination.id");
      if (updatesSources(req.updateMask?.paths ?? [])) {
        d.sourceIds = s.sourceIds(d.sourceIds, "destination.source_ids");
      }
    },
  },
  deleteDestination: {
    access: "write",
    check: (req, s) => {
      s.owned(req.id, "id");
    },
  },

  listDeadLetters: { access: "read", check: callsOfSource },
  replayDeadLetters: {
    access: "write",
    check: (req, s) => {
      ownDestination(req, s);
      ofSource(req, s);
    },
  },
  rotateSecret: { access: "write", check: ownDestination },

  listAttempts: { access: "read", check: callsOfSource },
  // The link's source's entries only (source_id narrowed to it, a destination connected to it).
  searchAttempts: { access: "read", check: callsOfSource },
  // The whole log's limits and size.
  getAttemptLogInfo: refused(GLOBAL),
  getMessage: { access: "read", check: ofSource },
  listDestinationHealth: {
    access: "read",
    check: ofDestination,
    // Every destination's health, page by page: only the link's destinations are kept.
    narrow: (res, s) => ({
      nextPageToken: res.nextPageToken ?? "",
      destinations: (res.destinations ?? []).filter(
        (h) => s.store.destination(h.destinationId ?? "")?.sourceIds.includes(s.sourceId) ?? false,
      ),
    }),
  },
  // The history of the link's source and of its own destinations; the rest of the log is the
  // operator's (other sources, shared destinations, global changes).
  listAuditRecords: {
    access: "read",
    check: (req, s) => {
      if (req.resourceId === s.sourceId) return;
      if (req.resourceId === "") {
        throw denied(
          `resource_id is required: this portal link reads the audit records of source "${s.sourceId}" and of its destinations`,
        );
      }
      s.owned(req.resourceId, "resource_id");
    },
    // The log is filtered by id alone, but ids are unique per kind only: a destination may bear a
    // source's id (one the link created to read another source's history, say), and a record may
    // hold changes of other resources (deleting source B disconnects every destination of B). So
    // the answer keeps the records about the resource the check allowed, of its kind, each with
    // its changes to that resource only.
    narrow: (res, s, req) => {
      const kinds = new Set<string>();
      if (req.resourceId === s.sourceId) kinds.add("source");
      const d = s.store.destination(req.resourceId);
      if (d?.sourceIds.length === 1 && d.sourceIds[0] === s.sourceId) {
        // SendTestCall records name their destination without a kind.
        kinds.add("destination").add("");
      }
      const about = (r: { resourceType?: string; resourceId?: string }) =>
        kinds.has(r.resourceType ?? "") && r.resourceId === req.resourceId;
      return {
        nextPageToken: res.nextPageToken ?? "",
        records: (res.records ?? []).flatMap((r) => {
          const changes = (r.changes ?? []).filter(about);
          return about(r) || changes.length > 0 ? [{ ...r, changes } as typeof r] : [];
        }),
      };
    },
  },
  reencryptSecrets: refused(GLOBAL),
  // A deletion request spans every source that saw the user.
  getDeletion: refused(GLOBAL),
  // Operational webhooks alert the operator about every source's destinations.
  createOperatorWebhook: refused(GLOBAL),
  getOperatorWebhook: refused(GLOBAL),
  listOperatorWebhooks: refused(GLOBAL),
  updateOperatorWebhook: refused(GLOBAL),
  deleteOperatorWebhook: refused(GLOBAL),
  dryRunDestination: {
    access: "read",
    check: (req, s) => {
      if (req.destination.case === "destinationId") {
        // Its answer carries valid signatures for any body asked for: as good as sending one.
        s.owned(req.destination.value, "destination_id");
        s.writing("a dry run of a stored destination answers signed requests");
      } else if (req.destination.case === "draft") {
        req.destination.value.sourceIds = s.sourceIds(req.destination.value.sourceIds, "draft.source_ids");
      }
    },
  },
  sendTestCall: { access: "write", check: ownDestination },

  createPortalLink: refused(LINKS),
  listPortalLinks: refused(LINKS),
  revokePortalLink: refused(LINKS),
  // Who the caller is: the link itself.
  getCaller: { access: "read" },
};

/**
 * Runs one call made with a portal link under its rule: PERMISSION_DENIED when the method or the
 * request reaches past the link's source (or writes through a read-only link), else the handler
 * with the request narrowed, and its answer narrowed. `writes`: the method changes something
 * (audited), whatever its rule says.
 */
export async function inPortalScope(
  method: string,
  writes: boolean,
  req: unknown,
  scope: Scope,
  run: (req: unknown) => Promise<unknown>,
  table: Partial<Record<string, ScopeRule<Name>>> = PORTAL_SCOPE as Partial<Record<string, ScopeRule<Name>>>,
): Promise<unknown> {
  const rule = Object.hasOwn(table, method) ? table[method] : undefined;
  if (rule === undefined) throw denied(`${upper(method)} is not open to portal links`);
  if (rule.access === "refused") throw denied(`${upper(method)} is not open to portal links: ${rule.why}`);
  if ((rule.access === "write" || writes) && scope.caller.link.readOnly) {
    throw denied(`this portal link is read-only: ${upper(method)} changes something`);
  }
  const r = req as Req<Name>;
  rule.check?.(r as never, scope);
  if (rule.answer) return rule.answer(r as never, scope);
  const res = await run(r);
  return rule.narrow ? rule.narrow(res as never, scope, r as never) : res;
}

const upper = (m: string) => m.charAt(0).toUpperCase() + m.slice(1);
