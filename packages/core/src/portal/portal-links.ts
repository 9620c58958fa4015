import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { PORTAL_TOKEN_PREFIX } from "@hookpost/contract";
import type { KV, NatsConnection } from "nats";
import { isWrongLastSequence } from "../nats/jetstream-errors.js";
import { PORTAL_LINKS_BUCKET, PORTAL_LINKS_MAX_AGE_MS, portalLinkKey } from "../nats/topology.js";

/** A portal link as stored: everything but its token, of which only a hash is kept. */
export interface PortalLinkRecord {
  /** pl_…: names the link (the audit log's actor of writes made through it). */
  id: string;
  sourceId: string;
  /**
   * The source's createdAt when the link was made: a source deleted and created again with the
   * same id is another tenant, which the link must not reach.
   */
  sourceCreatedAt: string;
  name: string;
  readOnly: boolean;
  createdAt: string;
  expiresAt: string;
  revokedAt?: string;
  /** Who created it: the admin token's fingerprint. */
  createdBy: string;
  /** SHA-256 hex of the whole token (256 random bits: a fast hash is enough, as for write keys). */
  tokenHash: string;
}

const LINK_ID = /^pl_[A-Za-z0-9_-]{16}$/;
/** `hpl.<source id>.<link id>.<secret>`: the secret is 32 random bytes (43 base64url characters). */
const TOKEN = /^hpl\.([A-Za-z0-9_-]{1,64})\.(pl_[A-Za-z0-9_-]{16})\.[A-Za-z0-9_-]{43}$/;

export function newPortalLinkId(): string {
  return `pl_${randomBytes(12).toString("base64url")}`;
}

export function isPortalLinkId(id: string): boolean {
  return LINK_ID.test(id);
}

/**
 * A new token for a link. It names its source and link, so checking it is one KV read; the
 * 256-bit secret is what makes it unguessable.
 */
export function newPortalToken(sourceId: string, linkId: string): string {
  return `${PORTAL_TOKEN_PREFIX}${sourceId}.${linkId}.${randomBytes(32).toString("base64url")}`;
}

/** The source and link a token names; undefined when it is not shaped like a portal token. */
export function parsePortalToken(token: string): { sourceId: string; linkId: string } | undefined {
  const m = TOKEN.exec(token);
  return m ? { sourceId: m[1]!, linkId: m[2]! } : undefined;
}

export function hashPortalToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** Whether `token` is the one `record` was made with (constant time). */
export function portalTokenMatches(record: PortalLinkRecord, token: string): boolean {
  const stored = Buffer.from(record.tokenHash, "hex");
  const given = createHash("sha256").update(token).digest();
  return stored.length === given.length && timingSafeEqual(stored, given);
}

/** Compare-and-set retries of a revocation before giving up. */
const MAX_CAS_ATTEMPTS = 10;

/**
 * The share of the bucket's byte limit kept for revocations: a full refuse-new bucket refuses an
 * update too (nats-server 2.9 counts the new record before dropping the old), and a link that
 * cannot be revoked must never happen. New links stop at 90 %.
 */
const REVOCATION_RESERVE = 0.1;

/**
 * Portal links in a KV bucket. Read at every call made with a link (no cache), so a revocation
 * written on one replica is refused by every replica from its next call on.
 */
export class PortalLinkStore {
  readonly #kv: KV;

  private constructor(kv: KV) {
    this.#kv = kv;
  }

  static async open(nc: NatsConnection, o: { replicas?: number } = {}): Promise<PortalLinkStore> {
    const kv = await nc.jetstream().views.kv(PORTAL_LINKS_BUCKET, {
      history: 1,
      replicas: o.replicas ?? 1,
      ttl: PORTAL_LINKS_MAX_AGE_MS,
    });
    return new PortalLinkStore(kv);
  }

  /** Whether new links must wait: the bucket holds more than 90 % of its byte limit. */
  async nearlyFull(): Promise<boolean> {
    const { config, state } = (await this.#kv.status()).streamInfo;
    return config.max_bytes > 0 && state.bytes >= config.max_bytes * (1 - REVOCATION_RESERVE);
  }

  async create(r: PortalLinkRecord): Promise<void> {
    await this.#kv.create(portalLinkKey(r.sourceId, r.id), JSON.stringify(r));
  }

  async get(sourceId: string, linkId: string): Promise<PortalLinkRecord | undefined> {
    return (await this.#read(portalLinkKey(sourceId, linkId)))?.record;
  }

  /** The link with this id, whatever its source (one key filter). */
  async find(linkId: string): Promise<PortalLinkRecord | undefined> {
    for (const key of await this.#keys(`*.${linkId}`)) {
      const r = (await this.#read(key))?.record;
      if (r) return r;
    }
    return undefined;
  }

  /** Every stored link of a source (working, expired or revoked), in no particular order. */
  async list(sourceId: string): Promise<PortalLinkRecord[]> {
    const out: PortalLinkRecord[] = [];
    for (const key of await this.#keys(`${sourceId}.*`)) {
      const r = (await this.#read(key))?.record;
      if (r) out.push(r);
    }
    return out;
  }

  /** Marks the link revoked (compare-and-set); undefined when it is gone. Revoking twice keeps the first time. */
  async revoke(r: PortalLinkRecord, at: Date): Promise<PortalLinkRecord | undefined> {
    const key = portalLinkKey(r.sourceId, r.id);
    for (let i = 0; ; i++) {
      const cur = await this.#read(key);
      if (!cur) return undefined;
      if (cur.record.revokedAt !== undefined) return cur.record;
      const next = { ...cur.record, revokedAt: at.toISOString() };
      try {
        await this.#kv.update(key, JSON.stringify(next), cur.revision);
        return next;
      } catch (err) {
        if (!isWrongLastSequence(err) || i + 1 >= MAX_CAS_ATTEMPTS) throw err;
      }
    }
  }

  async #keys(filter: string): Promise<string[]> {
    // Keys first, records after: nats.js drops keys not read yet when the loop awaits (as DeletionStore).
    const keys: string[] = [];
    for await (const key of await this.#kv.keys(filter)) keys.push(key);
    return keys;
  }

  async #read(key: string): Promise<{ record: PortalLinkRecord; revision: number } | undefined> {
    const e = await this.#kv.get(key);
    if (e?.operation !== "PUT" || e.value.length === 0) return undefined;
    return { record: e.json<PortalLinkRecord>(), revision: e.revision };
  }
}
