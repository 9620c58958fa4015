import type { Metadata } from "@grpc/grpc-js";
import { Code, HookpostError, PORTAL_TOKEN_PREFIX } from "@hookpost/contract";
import {
  type AuditActor,
  type CallContext,
  type ConfigStore,
  type PortalLinkRecord,
  type PortalLinkStore,
  parsePortalToken,
  portalTokenMatches,
  type SourceRecord,
} from "@hookpost/core";
import { type AdminAuth, bearerCredentials, unauthenticated } from "../auth.js";

/** Who an AdminService call comes from: the admin token, or a portal link limited to one source. */
export type Caller =
  | { kind: "admin"; actor: AuditActor }
  | { kind: "portal_link"; actor: AuditActor; link: PortalLinkRecord; source: SourceRecord };

/**
 * Identifies the caller of an admin call from its `Bearer` credentials: a portal link token
 * (`hpl.…`) is checked against the portal links bucket at every call (so a revocation made on any
 * replica applies at the next call), anything else against the admin token.
 */
export class Callers {
  readonly #admin: AdminAuth;
  readonly #links: Pick<PortalLinkStore, "get">;
  readonly #store: ConfigStore;
  readonly #now: () => Date;

  constructor(deps: {
    adminAuth: AdminAuth;
    portalLinks: Pick<PortalLinkStore, "get">;
    store: ConfigStore;
    now?: () => Date;
  }) {
    this.#admin = deps.adminAuth;
    this.#links = deps.portalLinks;
    this.#store = deps.store;
    this.#now = deps.now ?? (() => new Date());
  }

  async identify(metadata: Metadata): Promise<Caller> {
    const credentials = bearerCredentials(metadata);
    if (!credentials.startsWith(PORTAL_TOKEN_PREFIX)) {
      return { kind: "admin", actor: this.#admin.checkToken(credentials) };
    }
    const named = parsePortalToken(credentials);
    if (!named) throw unknownLink();
    let link: PortalLinkRecord | undefined;
    try {
      link = await this.#links.get(named.sourceId, named.linkId);
    } catch (err) {
      throw new HookpostError(
        Code.UNAVAILABLE,
        `portal links cannot be checked now (NATS: ${(err as Error).message}): retry`,
      );
    }
    // Only the hash is stored: an unknown id and a wrong secret look the same.
    if (!link || !portalTokenMatches(link, credentials)) throw unknownLink();
    if (link.revokedAt !== undefined) {
      throw unauthenticated("this portal link was revoked: ask whoever gave it to you for a new one");
    }
    if (Date.parse(link.expiresAt) <= this.#now().getTime()) {
      throw unauthenticated(
        `this portal link expired at ${link.expiresAt}: ask whoever gave it to you for a new one`,
      );
    }
    const source = this.#store.source(link.sourceId);
    // A source deleted (and perhaps created again under the same id) ends its links.
    if (!source || source.createdAt !== link.sourceCreatedAt) {
      throw unauthenticated("the source of this portal link no longer exists");
    }
    return { kind: "portal_link", actor: { kind: "portal_link", id: link.id }, link, source };
  }
}

function unknownLink(): HookpostError {
  return unauthenticated("unknown portal link: check that it was copied whole, or ask for a new one");
}

/** The caller of each call in progress, for the handlers that answer about it (GetCaller). */
const callers = new WeakMap<CallContext, Caller>();

export function rememberCaller(ctx: CallContext, caller: Caller): void {
  callers.set(ctx, caller);
}

export function callerOf(ctx: CallContext): Caller | undefined {
  return callers.get(ctx);
}
