import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { Metadata } from "@grpc/grpc-js";
import { Code, HookpostError } from "@hookpost/contract";
import type { AuditActor, ConfigStore, SourceRecord } from "@hookpost/core";

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const BASIC_HINT = "send metadata `authorization: Basic base64(<write key>:)`";
const BEARER_HINT = "send metadata `authorization: Bearer <admin token>`";

export function unauthenticated(message: string): HookpostError {
  return new HookpostError(Code.UNAUTHENTICATED, message);
}

/** The one `authorization` value of a call. */
function authorizationValue(metadata: Metadata, hint: string): string {
  const values = metadata.get("authorization");
  if (values.length === 0) throw unauthenticated(`missing authorization: ${hint}`);
  if (values.length > 1) throw unauthenticated(`more than one authorization value: ${hint}`);
  const value = values[0];
  if (typeof value !== "string") throw unauthenticated(`authorization must be text: ${hint}`);
  return value;
}

/** The one `authorization` value of a call, split into scheme and credentials. */
function authorization(metadata: Metadata, hint: string): { scheme: string; credentials: string } {
  return splitAuthorization(authorizationValue(metadata, hint), hint);
}

function splitAuthorization(value: string, hint: string): { scheme: string; credentials: string } {
  const match = /^([A-Za-z]+) +(\S+) *$/.exec(value);
  if (!match) throw unauthenticated(`malformed authorization: ${hint}`);
  return { scheme: match[1]!.toLowerCase(), credentials: match[2]! };
}

/**
 * Authenticates a call with a source's write key (`Basic base64(<write key>:)`, the key as
 * user name and an empty password) and returns that source. Looks the key up in memory.
 */
export function authenticateSource(store: ConfigStore, metadata: Metadata): SourceRecord {
  const value = authorizationValue(metadata, BASIC_HINT);
  const cache = knownKeys(store);
  const known = cache.get(value);
  if (known !== undefined) {
    const source = store.source(known.id);
    // A rotated key no longer matches the source's hash; a deleted source is gone.
    if (source?.writeKeyHash === known.writeKeyHash) return source;
    cache.delete(value);
  }
  const { scheme, credentials } = splitAuthorization(value, BASIC_HINT);
  if (scheme !== "basic") {
    throw unauthenticated(`calls authenticate with a source write key: ${BASIC_HINT}`);
  }
  const source = sourceByWriteKey(store, writeKeyFromBasic(credentials, BASIC_HINT));
  if (cache.size >= MAX_KNOWN_KEYS) cache.delete(cache.keys().next().value!);
  cache.set(value, { id: source.id, writeKeyHash: source.writeKeyHash });
  return source;
}

/**
 * Recently accepted `authorization` values and their source, per store, so that a call does not
 * hash its write key again (SHA-256, ~5 % of a call's CPU). Only accepted keys are kept, at most
 * MAX_KNOWN_KEYS (oldest dropped first); every source change empties it, and a hit is checked
 * against the source's current key hash, so a rotated or deleted key is refused at once.
 */
const known = new WeakMap<ConfigStore, Map<string, { id: string; writeKeyHash: string }>>();
const MAX_KNOWN_KEYS = 1024;

function knownKeys(store: ConfigStore): Map<string, { id: string; writeKeyHash: string }> {
  let cache = known.get(store);
  if (cache === undefined) {
    const created = new Map<string, { id: string; writeKeyHash: string }>();
    store.on("change", (c) => {
      if (c.kind === "source") created.clear();
    });
    known.set(store, created);
    cache = created;
  }
  return cache;
}

/** The write key (the user name) of Basic credentials `base64(<write key>:)`. */
export function writeKeyFromBasic(credentials: string, hint: string): string {
  if (!BASE64.test(credentials)) throw unauthenticated(`authorization is not valid base64: ${hint}`);
  const decoded = Buffer.from(credentials, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  const writeKey = colon < 0 ? decoded : decoded.slice(0, colon);
  if (writeKey === "") throw unauthenticated(`the write key is empty: ${hint}`);
  return writeKey;
}

/** The source of a write key; UNAUTHENTICATED when none has it. Looks the key up in memory. */
export function sourceByWriteKey(store: ConfigStore, writeKey: string): SourceRecord {
  const source = store.sourceByWriteKey(writeKey);
  if (!source) {
    throw unauthenticated("unknown write key: it belongs to no source (deleted or rotated?)");
  }
  return source;
}

/** The credentials of an admin call's `Bearer <credentials>` (UNAUTHENTICATED when there is none). */
export function bearerCredentials(metadata: Metadata): string {
  const { scheme, credentials } = authorization(metadata, BEARER_HINT);
  if (scheme !== "bearer") throw unauthenticated(`this call needs the admin token: ${BEARER_HINT}`);
  return credentials;
}

/** Checks an admin call's `Bearer <admin token>` in constant time. */
export class AdminAuth {
  readonly #digest: Buffer;

  constructor(token: string) {
    this.#digest = sha256(token);
  }

  /** Returns who the caller is, for the audit log: the token's fingerprint, never the token. */
  check(metadata: Metadata): AuditActor {
    return this.checkToken(bearerCredentials(metadata));
  }

  /** As check, for credentials already read from the call. */
  checkToken(credentials: string): AuditActor {
    // Comparing fixed-size digests keeps the time independent of where (and whether) they differ.
    if (!timingSafeEqual(sha256(credentials), this.#digest)) throw unauthenticated("invalid admin token");
    return { kind: "admin", id: tokenFingerprint(credentials) };
  }
}

/**
 * 8 hex digits of an HMAC-SHA256 of the token: tells two admin tokens apart in the audit log
 * (after a token change) while revealing nothing usable of a 192-bit token.
 */
export function tokenFingerprint(token: string): string {
  return createHmac("sha256", "hookpost audit actor").update(token).digest("hex").slice(0, 8);
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}
