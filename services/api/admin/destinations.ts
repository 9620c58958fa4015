import {
  ADMIN_PAGES,
  answerBytes,
  Code,
  consentCategoriesViolations,
  consentMissingViolations,
  type FieldViolation,
  HookpostError,
  headersViolations,
  maxInFlightViolations,
  orderingViolations,
  previousSecretViolations,
  rateLimitViolations,
  sharedSecretViolations,
  sourceIdsViolations,
  urlsViolations,
} from "@hookpost/contract";
import { ConsentMissing, type Destination, Ordering } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { type DestinationRecord, type Signing, signingSecrets } from "@hookpost/core";
import { throwIfInvalid } from "../invalid.js";
import { auditChange, changeAudited, deleteAudited } from "./audit-changes.js";
import { createOnce } from "./create-once.js";
import {
  compiledViolations,
  SHAPING_FIELDS,
  setShaping,
  shapingFieldViolations,
} from "./destination-shaping.js";
import { dryRun, dryRunCall, missingDryRunDestination } from "./dry-run.js";
import { ensureSigningKey, oneNewKey } from "./ed25519-signing-key.js";
import { generateId, idViolations, nameViolations, notFound, requiredIdViolations } from "./ids.js";
import { pageOf } from "./paging.js";
import type { AdminDeps, AdminHandlers } from "./sources.js";
import { destinationToProto, signingFromProto } from "./to-proto.js";
import { maskedFields } from "./update-mask.js";

/** The fields UpdateDestination's update_mask may name. */
const UPDATABLE = [
  "name",
  "source_ids",
  "urls",
  "headers",
  "shared_secret",
  "signing",
  "enabled",
  "rate_limit_per_second",
  "max_in_flight",
  "ordering",
  "consent_categories",
  "consent_missing",
  ...SHAPING_FIELDS,
] as const;
type Updatable = (typeof UPDATABLE)[number];
const OUTPUT_ONLY = new Set([
  "id",
  "shared_secret_set",
  "create_time",
  "update_time",
  "disabled_reason",
  "disabled_time",
  "previous_secret_expire_time",
  "signing_public_keys",
]);

const P = "destination.";

/**
 * Webhook destinations. Every write validates the whole request first and changes nothing
 * when any rule fails. The shared secret is write-only: responses carry only
 * `shared_secret_set`.
 *
 * UpdateDestination follows the update_mask documented in admin.proto:
 * - empty mask: name, source_ids, urls, headers and signing are all replaced by the
 *   request's values (and validated like a create); enabled, rate_limit_per_second,
 *   max_in_flight, ordering and consent_missing are replaced when set and kept when not;
 *   consent_categories is replaced like the other lists (empty: no consent requirement);
 *   shared_secret is replaced when the request has one and kept when it is empty.
 * - with paths: only those fields change; `shared_secret` with an empty value clears the
 *   secret. Unknown or output-only paths are refused.
 * Either way the result must be consistent: standard-webhooks signing needs a valid
 * `whsec_` secret, whether it was just given or kept; standard-webhooks-ed25519 a `whsk_` key,
 * which is generated when none is given or kept (ensureSigningKey).
 */
export function destinationHandlers(deps: AdminDeps) {
  const { store, log } = deps;
  const now = deps.now ?? (() => new Date());

  /** Validates the named fields of `d`; returns the values and the violations. */
  const readFields = (d: Destination, fields: ReadonlySet<Updatable>) => {
    const violations: FieldViolation[] = [];
    let signing: Signing | undefined;
    if (fields.has("name")) violations.push(...nameViolations(d.name, `${P}name`));
    if (fields.has("source_ids"))
      violations.push(...sourceIdsViolations(d.sourceIds, `${P}source_ids`, store));
    if (fields.has("urls")) violations.push(...urlsViolations(d.urls, `${P}urls`));
    if (fields.has("headers")) violations.push(...headersViolations(d.headers, `${P}headers`));
    if (fields.has("rate_limit_per_second"))
      violations.push(...rateLimitViolations(d.rateLimitPerSecond, `${P}rate_limit_per_second`));
    if (fields.has("max_in_flight"))
      violations.push(...maxInFlightViolations(d.maxInFlight, `${P}max_in_flight`));
    if (fields.has("ordering")) violations.push(...orderingViolations(d.ordering, `${P}ordering`));
    if (fields.has("consent_categories"))
      violations.push(...consentCategoriesViolations(d.consentCategories, `${P}consent_categories`));
    if (fields.has("consent_missing"))
      violations.push(...consentMissingViolations(d.consentMissing, `${P}consent_missing`));
    violations.push(...shapingFieldViolations(d, fields, P, deps.retryBounds));
    if (fields.has("signing")) {
      signing = signingFromProto(d.signing);
      if (signing === undefined) {
        violations.push({
          field: `${P}signing`,
          description: `unknown signing ${d.signing}: use SIGNING_SEGMENT, SIGNING_STANDARD_WEBHOOKS or SIGNING_STANDARD_WEBHOOKS_ED25519`,
        });
      }
    }
    return { violations, signing };
  };

  /** A create's destination validated (like a create, compiled expressions included) as it would be stored. */
  const newRecord = (d: Destination | undefined, draft = false): DestinationRecord => {
    if (!d) throw missingDestination();
    // A dry run's draft is never stored: its id, if any, is not checked against stored ones.
    if (draft) d = { ...d, id: "" };
    const { violations, signing } = readFields(d, new Set(UPDATABLE));
    if (d.id !== "") violations.push(...idViolations(d.id, `${P}id`));
    const secret = d.sharedSecret === "" ? undefined : d.sharedSecret;
    if (signing) violations.push(...sharedSecretViolations(secret, signing, `${P}shared_secret`));
    throwIfInvalid(violations);

    const id = d.id === "" ? generateId("dst") : d.id;
    if (store.destination(id)) throw alreadyExists(id);
    const at = now().toISOString();
    const record: DestinationRecord = {
      id,
      name: d.name.trim(),
      sourceIds: [...d.sourceIds],
      urls: [...d.urls],
      headers: { ...d.headers },
      signing: signing!,
      // A destination is on unless asked otherwise (the seed's last setup step switches it on).
      enabled: d.enabled ?? true,
      createdAt: at,
      updatedAt: at,
    };
    if (secret !== undefined) record.sharedSecret = secret;
    ensureSigningKey(record, secret !== undefined, oneNewKey());
    setLimits(record, d, false);
    setOrdering(record, d.ordering, false);
    setConsentCategories(record, d.consentCategories);
    setConsentMissing(record, d.consentMissing, false);
    setShaping(record, d, new Set(UPDATABLE), false);
    throwIfInvalid(compiledViolations(record, P));
    return record;
  };

  return {
    createDestination: async (req, ctx) => {
      const record = newRecord(req.destination);
      const id = record.id;
      const revision = await createOnce(
        () => store.createDestination(record),
        () => alreadyExists(id),
      );
      auditChange(ctx, id, { type: "destination", after: record });
      log.info(
        { destinationId: id, sourceIds: record.sourceIds, enabled: record.enabled },
        "destination created",
      );
      return { destination: destinationToProto(record), revision: BigInt(revision) };
    },

    getDestination: async (req) => {
      throwIfInvalid(requiredIdViolations(req.id));
      const d = store.destination(req.id);
      if (!d) throw notFound("destination", req.id);
      return { destination: destinationToProto(d) };
    },

    listDestinations: async (req) => {
      const all = req.sourceId === "" ? store.destinations() : store.destinationsForSource(req.sourceId);
      const { page, nextPageToken } = pageOf(all, req, ADMIN_PAGES.destinations, destinationBytes);
      return { destinations: page.map(destinationToProto), nextPageToken };
    },

    updateDestination: async (req, ctx) => {
      const d = req.destination;
      if (!d) throw missingDestination();
      throwIfInvalid(requiredIdViolations(d.id, `${P}id`));

      const { replaceAll, fields } = maskedFields(req.updateMask?.paths ?? [], UPDATABLE, OUTPUT_ONLY);
      const { violations: fieldViolations, signing } = readFields(d, fields);

      // Compare-and-set on the stored revision: a change made meanwhile (another admin call,
      // auto-disable) is read again and this update applied on top of it, never over it.
      const signingKey = oneNewKey();
      const { revision, record: next } = await changeAudited(ctx, store, "destination", d.id, (current) => {
        const at = now();
        const next: DestinationRecord = { ...current, updatedAt: at.toISOString() };
        if (fields.has("name")) next.name = d.name.trim();
        if (fields.has("source_ids")) next.sourceIds = [...d.sourceIds];
        if (fields.has("urls")) next.urls = [...d.urls];
        if (fields.has("headers")) next.headers = { ...d.headers };
        // Named in the mask: set (unset means false); empty mask: kept when unset.
        if (fields.has("enabled") && (!replaceAll || d.enabled !== undefined)) {
          next.enabled = d.enabled ?? false;
          // An operator decided: the reason Hookpost paused it no longer applies.
          delete next.disabledReason;
          delete next.disabledAt;
        }
        setLimits(next, d, !replaceAll, fields);
        if (fields.has("ordering")) setOrdering(next, d.ordering, !replaceAll);
        if (fields.has("consent_categories")) setConsentCategories(next, d.consentCategories);
        if (fields.has("consent_missing")) setConsentMissing(next, d.consentMissing, !replaceAll);
        setShaping(next, d, fields, !replaceAll);
        if (signing) next.signing = signing;
        // Empty mask: an empty secret keeps the current one. Mask naming it: empty clears it.
        const secretChanges = replaceAll ? d.sharedSecret !== "" : fields.has("shared_secret");
        if (secretChanges) {
          if (d.sharedSecret === "") delete next.sharedSecret;
          else next.sharedSecret = d.sharedSecret;
          // Setting the secret directly switches at once; RotateSecret is the way with an overlap.
          delete next.previousSecret;
          delete next.previousSecretExpiresAt;
        }
        ensureSigningKey(next, secretChanges && d.sharedSecret !== "", signingKey);
        const violations = [...fieldViolations];
        // Expressions and templates compile on the record as it would be stored (a mask may
        // change urls without the mapping, or the other way round).
        if (violations.length === 0) violations.push(...compiledViolations(next, P));
        if (secretChanges || fields.has("signing")) {
          violations.push(
            ...sharedSecretViolations(next.sharedSecret, next.signing, `${P}shared_secret`, !secretChanges),
            ...previousSecretViolations(next, signingSecrets(next, at.getTime()), `${P}signing`),
          );
        }
        throwIfInvalid(violations);
        return next;
      });
      log.info({ destinationId: next.id, fields: [...fields] }, "destination updated");
      return { destination: destinationToProto(next), revision: BigInt(revision) };
    },

    dryRunDestination: async (req) => {
      const at = now();
      let dest: DestinationRecord;
      if (req.destination.case === "destinationId") {
        throwIfInvalid(requiredIdViolations(req.destination.value, "destination_id"));
        const stored = store.destination(req.destination.value);
        if (!stored) throw notFound("destination", req.destination.value);
        dest = stored;
      } else if (req.destination.case === "draft") {
        dest = newRecord(req.destination.value, true);
      } else throw missingDryRunDestination();
      return dryRun(dest, dryRunCall(req.callJson, dest.sourceIds[0] ?? "", at), at);
    },

    deleteDestination: async (req, ctx) => {
      const revision = await deleteAudited(ctx, store, "destination", req.id);
      log.info({ destinationId: req.id }, "destination deleted");
      return { revision: BigInt(revision) };
    },
  } satisfies AdminHandlers;
}

/**
 * rate_limit_per_second and max_in_flight. `masked`: the fields were named in an update mask,
 * so unset clears them; otherwise unset keeps what `record` has.
 */
function setLimits(
  record: DestinationRecord,
  d: Destination,
  masked: boolean,
  fields: ReadonlySet<Updatable> = new Set(UPDATABLE),
): void {
  if (fields.has("rate_limit_per_second")) {
    if (d.rateLimitPerSecond !== undefined) record.rateLimitPerSecond = d.rateLimitPerSecond;
    else if (masked) delete record.rateLimitPerSecond;
  }
  if (fields.has("max_in_flight")) {
    if (d.maxInFlight !== undefined) record.maxInFlight = d.maxInFlight;
    else if (masked) delete record.maxInFlight;
  }
}

/**
 * Stored as `ordering: "PER_USER"` or absent. `masked`: named in an update mask, so UNSPECIFIED
 * means UNORDERED; otherwise UNSPECIFIED keeps what `record` has. Calls already stored keep the
 * order they were routed with: PER_USER ones are still delivered in order after a switch back.
 */
function setOrdering(record: DestinationRecord, ordering: Ordering, masked: boolean): void {
  if (ordering === Ordering.PER_USER) record.ordering = "PER_USER";
  else if (ordering === Ordering.UNORDERED || masked) delete record.ordering;
}

/** Replaced like the other lists; empty means no consent requirement and is stored absent. */
function setConsentCategories(record: DestinationRecord, categories: readonly string[]): void {
  if (categories.length > 0) record.consentCategories = [...categories];
  else delete record.consentCategories;
}

/**
 * As ordering: stored as `consentMissing: "FILTER"` or absent (deliver). `masked`: named in an
 * update mask, so UNSPECIFIED means DELIVER; otherwise UNSPECIFIED keeps what `record` has.
 */
function setConsentMissing(record: DestinationRecord, value: ConsentMissing, masked: boolean): void {
  if (value === ConsentMissing.FILTER) record.consentMissing = "FILTER";
  else if (value === ConsentMissing.DELIVER || masked) delete record.consentMissing;
}

function missingDestination(): HookpostError {
  return new HookpostError(Code.INVALID_ARGUMENT, "invalid request: destination: is required", [
    { field: "destination", description: "is required" },
  ]);
}

function alreadyExists(id: string): HookpostError {
  return new HookpostError(Code.ALREADY_EXISTS, `a destination with id "${id}" already exists`);
}

/** What a destination adds to a list answer: its stored JSON overestimates it (secrets are not sent). */
function destinationBytes(d: DestinationRecord): number {
  return answerBytes(JSON.stringify(d));
}
