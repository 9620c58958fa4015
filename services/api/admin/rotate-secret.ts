import { randomBytes } from "node:crypto";
import { type Duration, durationMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  Code,
  type FieldViolation,
  HookpostError,
  previousSecretViolations,
  sharedSecretViolations,
} from "@hookpost/contract";
import { type DestinationRecord, type Signing, signingSecrets } from "@hookpost/core";
import { generateStandardWebhookKeyPair, generateStandardWebhookSecret } from "@hookpost/receiver";
import { throwIfInvalid } from "../invalid.js";
import { changeAudited } from "./audit-changes.js";
import { requiredIdViolations } from "./ids.js";
import type { AdminDeps, AdminHandlers } from "./sources.js";
import { destinationToProto } from "./to-proto.js";

export const DEFAULT_OVERLAP_MS = 24 * 3600_000;
/** A longer overlap would leave an old (perhaps leaked) secret valid for too long. */
export const MAX_OVERLAP_MS = 30 * 24 * 3600_000;

/**
 * RotateSecret: the new secret becomes the current one and the previous one keeps signing beside
 * it until `previous_valid_for` has passed, so receivers can switch at any moment during the overlap
 * (see README "Destination lifecycle"). Rotating again during an overlap drops the oldest secret.
 * With Ed25519 signing the new secret is a key pair: the answer shows its public key, never the
 * private one.
 */
export function rotateSecretHandler(deps: AdminDeps) {
  const { store, log } = deps;
  const now = deps.now ?? (() => new Date());
  return {
    rotateSecret: async (req, ctx) => {
      throwIfInvalid(requiredIdViolations(req.destinationId, "destination_id"));
      const violations: FieldViolation[] = [];
      const overlapMs = overlap(req.previousValidFor, violations);
      throwIfInvalid(violations);
      // Generated once: a retried write below must store the secret this call answers with.
      const generated: Partial<Record<Signing, string>> = {};

      // Compare-and-set on the stored revision. The rotation is made from the secret read first:
      // if another rotation (or a secret set directly) got in between, this one is refused with
      // ABORTED rather than applied on top, where it would silently drop the secret that other
      // call has just answered with.
      let base: string | undefined | null = null;
      let secret = "";
      const { revision, record: next } = await changeAudited(
        ctx,
        store,
        "destination",
        req.destinationId,
        (current) => {
          if (base === null) base = current.sharedSecret;
          else if (current.sharedSecret !== base) throw concurrentRotation(req.destinationId);
          if (req.newSecret !== "") secret = req.newSecret;
          else {
            secret = generated[current.signing] ?? newSecret(current.signing);
            generated[current.signing] = secret;
          }
          const problems = sharedSecretViolations(secret, current.signing, "new_secret");
          if (secret === current.sharedSecret) {
            problems.push({ field: "new_secret", description: "is the current secret: choose a new one" });
          }
          const at = now();
          const next: DestinationRecord = { ...current, sharedSecret: secret, updatedAt: at.toISOString() };
          delete next.previousSecret;
          delete next.previousSecretExpiresAt;
          if (current.sharedSecret !== undefined && overlapMs > 0) {
            next.previousSecret = current.sharedSecret;
            next.previousSecretExpiresAt = new Date(at.getTime() + overlapMs).toISOString();
          }
          problems.push(
            ...previousSecretViolations(next, signingSecrets(next, at.getTime()), "previous_valid_for"),
          );
          throwIfInvalid(problems);
          return next;
        },
      );
      log.info(
        { destinationId: next.id, overlapMs, previousUntil: next.previousSecretExpiresAt },
        "destination secret rotated",
      );
      return {
        destination: destinationToProto(next),
        // An Ed25519 private key never leaves: receivers need only its public key (destination).
        secret: next.signing === "standard-webhooks-ed25519" ? "" : secret,
        ...(next.previousSecretExpiresAt === undefined
          ? {}
          : { previousSecretExpireTime: timestampFromDate(new Date(next.previousSecretExpiresAt)) }),
        revision: BigInt(revision),
      };
    },
  } satisfies AdminHandlers;
}

function newSecret(signing: Signing): string {
  if (signing === "standard-webhooks-ed25519") return generateStandardWebhookKeyPair().secretKey;
  return signing === "standard-webhooks" ? generateStandardWebhookSecret() : randomBytes(32).toString("hex");
}

function concurrentRotation(id: string): HookpostError {
  return new HookpostError(
    Code.ABORTED,
    `the secret of destination "${id}" was changed by another call while this one rotated it; nothing was changed by this call: read the destination and rotate again if still needed`,
  );
}

function overlap(d: Duration | undefined, violations: FieldViolation[]): number {
  if (d === undefined) return DEFAULT_OVERLAP_MS;
  const ms = durationMs(d);
  if (!Number.isFinite(ms) || ms < 0 || ms > MAX_OVERLAP_MS) {
    violations.push({
      field: "previous_valid_for",
      description: `must be 0 to 30 days (0: the previous secret stops at once), got ${ms} ms`,
    });
  }
  return ms;
}
