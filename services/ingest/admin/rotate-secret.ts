import { randomBytes } from "node:crypto";
import { type Duration, durationMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, type FieldViolation, HookpostError, type ServiceImpl } from "../../../lib/grpc/mod.js";
import type { DestinationRecord } from "../../../lib/model/destination.js";
import { generateStandardWebhookSecret } from "../../../receiver/mod.js";
import { throwIfInvalid } from "../invalid.js";
import { sharedSecretViolations } from "./destination-rules.js";
import { requiredIdViolations } from "./ids.js";
import type { AdminDeps, AdminMethods } from "./sources.js";
import { destinationToProto } from "./to-proto.js";

export const DEFAULT_OVERLAP_MS = 24 * 3600_000;
/** A longer overlap would leave an old (perhaps leaked) secret valid for too long. */
export const MAX_OVERLAP_MS = 30 * 24 * 3600_000;

/**
 * RotateSecret: the new secret becomes the current one and the previous one keeps signing beside
 * it until `previous_valid_for` has passed, so receivers can switch at any moment during the overlap
 * (see README "Destination lifecycle"). Rotating again during an overlap drops the oldest secret.
 */
export function rotateSecretHandler(deps: AdminDeps): Pick<ServiceImpl<AdminMethods>, "rotateSecret"> {
  const { store, log } = deps;
  const now = deps.now ?? (() => new Date());
  return {
    rotateSecret: async (req) => {
      throwIfInvalid(requiredIdViolations(req.destinationId, "destination_id"));
      const current = store.destination(req.destinationId);
      if (!current) {
        throw new HookpostError(Code.NOT_FOUND, `destination "${req.destinationId}" does not exist`);
      }
      const violations: FieldViolation[] = [];
      const overlapMs = overlap(req.previousValidFor, violations);
      const secret =
        req.newSecret !== ""
          ? req.newSecret
          : current.signing === "standard-webhooks"
            ? generateStandardWebhookSecret()
            : randomBytes(32).toString("hex");
      violations.push(...sharedSecretViolations(secret, current.signing, "new_secret"));
      if (secret === current.sharedSecret) {
        violations.push({ field: "new_secret", description: "is the current secret: choose a new one" });
      }
      throwIfInvalid(violations);

      const at = now();
      const next: DestinationRecord = { ...current, sharedSecret: secret, updatedAt: at.toISOString() };
      delete next.previousSecret;
      delete next.previousSecretExpiresAt;
      if (current.sharedSecret !== undefined && overlapMs > 0) {
        next.previousSecret = current.sharedSecret;
        next.previousSecretExpiresAt = new Date(at.getTime() + overlapMs).toISOString();
      }
      const revision = await store.putDestination(next);
      log.info(
        { destinationId: next.id, overlapMs, previousUntil: next.previousSecretExpiresAt },
        "destination secret rotated",
      );
      return {
        destination: destinationToProto(next),
        secret,
        ...(next.previousSecretExpiresAt === undefined
          ? {}
          : { previousSecretExpireTime: timestampFromDate(new Date(next.previousSecretExpiresAt)) }),
        revision: BigInt(revision),
      };
    },
  };
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
