import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ConsentMissing,
  type DestinationSchema,
  Ordering,
  Signing,
  type SourceSchema,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { DestinationRecord, SourceRecord, Signing as StoredSigning } from "@hookpost/core";
import { shapingToProto } from "./destination-shaping.js";
import { signingPublicKeys } from "./ed25519-signing-key.js";

export function sourceToProto(s: SourceRecord): MessageInitShape<typeof SourceSchema> {
  return {
    id: s.id,
    name: s.name,
    createTime: timestampFromDate(new Date(s.createdAt)),
    writeKeyPrefix: s.writeKeyPrefix,
    allowedOrigins: [...(s.allowedOrigins ?? [])],
  };
}

/** A destination as the admin API shows it: the shared secret never leaves, only whether one is set. */
export function destinationToProto(d: DestinationRecord): MessageInitShape<typeof DestinationSchema> {
  const previousUntil = previousSecretExpiry(d);
  return {
    id: d.id,
    name: d.name,
    sourceIds: [...d.sourceIds],
    urls: [...d.urls],
    headers: { ...d.headers },
    sharedSecretSet: d.sharedSecret !== undefined,
    signing: signingToProto(d.signing),
    enabled: d.enabled,
    createTime: timestampFromDate(new Date(d.createdAt)),
    updateTime: timestampFromDate(new Date(d.updatedAt)),
    disabledReason: d.disabledReason ?? "",
    ordering: d.ordering === "PER_USER" ? Ordering.PER_USER : Ordering.UNORDERED,
    consentCategories: [...(d.consentCategories ?? [])],
    consentMissing: d.consentMissing === "FILTER" ? ConsentMissing.FILTER : ConsentMissing.DELIVER,
    ...shapingToProto(d),
    ...(d.rateLimitPerSecond === undefined ? {} : { rateLimitPerSecond: d.rateLimitPerSecond }),
    ...(d.maxInFlight === undefined ? {} : { maxInFlight: d.maxInFlight }),
    ...(d.disabledAt === undefined ? {} : { disabledTime: timestampFromDate(new Date(d.disabledAt)) }),
    ...(previousUntil === undefined ? {} : { previousSecretExpireTime: timestampFromDate(previousUntil) }),
    signingPublicKeys: signingPublicKeys(d),
  };
}

/** When the rotated-out secret stops signing, while it still does. */
export function previousSecretExpiry(d: DestinationRecord, now = Date.now()): Date | undefined {
  if (!d.previousSecret || !d.previousSecretExpiresAt) return undefined;
  const at = new Date(d.previousSecretExpiresAt);
  return at.getTime() > now ? at : undefined;
}

export function signingToProto(s: StoredSigning): Signing {
  if (s === "standard-webhooks-ed25519") return Signing.STANDARD_WEBHOOKS_ED25519;
  return s === "standard-webhooks" ? Signing.STANDARD_WEBHOOKS : Signing.SEGMENT;
}

/** undefined for a value outside the enum (a newer client, or garbage). */
export function signingFromProto(s: Signing): StoredSigning | undefined {
  switch (s) {
    case Signing.UNSPECIFIED:
    case Signing.SEGMENT:
      return "segment";
    case Signing.STANDARD_WEBHOOKS:
      return "standard-webhooks";
    case Signing.STANDARD_WEBHOOKS_ED25519:
      return "standard-webhooks-ed25519";
    default:
      return undefined;
  }
}
