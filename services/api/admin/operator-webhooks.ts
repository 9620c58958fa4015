import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs, durationMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  behindAfterViolations,
  Code,
  eventTypesViolations,
  type FieldViolation,
  failingBelowViolations,
  HookpostError,
  MAX_OPERATOR_WEBHOOK_ID_CHARS,
  MAX_OPERATOR_WEBHOOKS,
  type OperatorEventType,
  operatorSecretViolations,
  operatorUrlViolations,
} from "@hookpost/contract";
import type { OperatorWebhook, OperatorWebhookSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import type { OperatorWebhookRecord } from "@hookpost/core";
import { generateStandardWebhookSecret } from "@hookpost/receiver";
import { throwIfInvalid } from "../invalid.js";
import { auditChange, changeAudited, deleteAudited } from "./audit-changes.js";
import { createOnce } from "./create-once.js";
import { generateId, idViolations, nameViolations, notFound, requiredIdViolations } from "./ids.js";
import type { AdminDeps, AdminHandlers } from "./sources.js";
import { maskedFields } from "./update-mask.js";

/** The fields UpdateOperatorWebhook's update_mask may name. */
const UPDATABLE = [
  "name",
  "url",
  "secret",
  "event_types",
  "enabled",
  "failing_below",
  "behind_after",
] as const;
type Updatable = (typeof UPDATABLE)[number];
const OUTPUT_ONLY = new Set(["id", "secret_set", "create_time", "update_time"]);
const P = "operator_webhook.";

function missing(): HookpostError {
  return new HookpostError(Code.INVALID_ARGUMENT, "invalid request: operator_webhook: is required", [
    { field: "operator_webhook", description: "is required" },
  ]);
}

/** The webhook as the admin API shows it: the secret never leaves, only whether one is set. */
export function operatorWebhookToProto(
  w: OperatorWebhookRecord,
): MessageInitShape<typeof OperatorWebhookSchema> {
  return {
    id: w.id,
    name: w.name,
    url: w.url,
    secretSet: w.secret !== "",
    eventTypes: [...w.eventTypes],
    enabled: w.enabled,
    ...(w.failingBelow === undefined ? {} : { failingBelow: w.failingBelow }),
    ...(w.behindAfterMs === undefined ? {} : { behindAfter: durationFromMs(w.behindAfterMs) }),
    createTime: timestampFromDate(new Date(w.createdAt)),
    updateTime: timestampFromDate(new Date(w.updatedAt)),
  };
}

/** The named fields' rules. */
function fieldViolations(w: OperatorWebhook, fields: ReadonlySet<Updatable>): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (fields.has("name")) out.push(...nameViolations(w.name, `${P}name`));
  if (fields.has("url")) out.push(...operatorUrlViolations(w.url, `${P}url`));
  if (fields.has("event_types")) out.push(...eventTypesViolations(w.eventTypes, `${P}event_types`));
  if (fields.has("failing_below")) out.push(...failingBelowViolations(w.failingBelow, `${P}failing_below`));
  if (fields.has("behind_after"))
    out.push(...behindAfterViolations(w.behindAfter && durationMs(w.behindAfter), `${P}behind_after`));
  return out;
}

/** failing_below and behind_after: set, or (unset) back to the default. */
function setThresholds(
  record: OperatorWebhookRecord,
  w: OperatorWebhook,
  fields: ReadonlySet<Updatable>,
): void {
  if (fields.has("failing_below")) {
    if (w.failingBelow === undefined) delete record.failingBelow;
    else record.failingBelow = w.failingBelow;
  }
  if (fields.has("behind_after")) {
    if (w.behindAfter === undefined) delete record.behindAfterMs;
    else record.behindAfterMs = durationMs(w.behindAfter);
  }
}

/**
 * Operator webhooks (docs/api.md#operational-webhooks): where Hookpost announces failing,
 * recovered, auto-disabled and behind destinations, and dead letters. The secret is write-only:
 * generated when a create gives none (and answered once), never returned afterwards. Writes go
 * through the audited admin path like any other (admin-service.ts); the secret is redacted there.
 */
export function operatorWebhookHandlers(deps: AdminDeps) {
  const { store, log } = deps;
  const now = deps.now ?? (() => new Date());

  return {
    createOperatorWebhook: async (req, ctx) => {
      const w = req.operatorWebhook;
      if (!w) throw missing();
      const violations = fieldViolations(w, new Set(UPDATABLE));
      if (w.id !== "") {
        violations.push(...idViolations(w.id, `${P}id`));
        if (w.id.length > MAX_OPERATOR_WEBHOOK_ID_CHARS)
          violations.push({
            field: `${P}id`,
            description: `at most ${MAX_OPERATOR_WEBHOOK_ID_CHARS} characters`,
          });
      }
      if (w.secret !== "") violations.push(...operatorSecretViolations(w.secret, `${P}secret`));
      throwIfInvalid(violations);
      if (store.operatorWebhooks().length >= MAX_OPERATOR_WEBHOOKS) {
        throw new HookpostError(
          Code.FAILED_PRECONDITION,
          `at most ${MAX_OPERATOR_WEBHOOKS} operator webhooks: delete one, or send one webhook more event types`,
        );
      }
      const id = w.id === "" ? generateId("opw") : w.id;
      if (store.operatorWebhook(id)) throw alreadyExists(id);
      const generated = w.secret === "" ? generateStandardWebhookSecret() : undefined;
      const at = now().toISOString();
      const record: OperatorWebhookRecord = {
        id,
        name: w.name.trim(),
        url: w.url,
        secret: generated ?? w.secret,
        eventTypes: [...w.eventTypes] as OperatorEventType[],
        enabled: w.enabled ?? true,
        createdAt: at,
        updatedAt: at,
      };
      setThresholds(record, w, new Set(UPDATABLE));
      const revision = await createOnce(
        () => store.createOperatorWebhook(record),
        () => alreadyExists(id),
      );
      auditChange(ctx, id, { type: "operator_webhook", after: record });
      log.info({ operatorWebhookId: id, eventTypes: record.eventTypes }, "operator webhook created");
      return {
        operatorWebhook: operatorWebhookToProto(record),
        secret: generated ?? "",
        revision: BigInt(revision),
      };
    },

    getOperatorWebhook: async (req) => {
      throwIfInvalid(requiredIdViolations(req.id));
      const w = store.operatorWebhook(req.id);
      if (!w) throw notFound("operator webhook", req.id);
      return { operatorWebhook: operatorWebhookToProto(w) };
    },

    listOperatorWebhooks: async () => ({
      operatorWebhooks: store.operatorWebhooks().map(operatorWebhookToProto),
    }),

    updateOperatorWebhook: async (req, ctx) => {
      const w = req.operatorWebhook;
      if (!w) throw missing();
      throwIfInvalid(requiredIdViolations(w.id, `${P}id`));
      const { replaceAll, fields } = maskedFields(req.updateMask?.paths ?? [], UPDATABLE, OUTPUT_ONLY);
      const violations = fieldViolations(w, fields);
      // Empty mask: an empty secret keeps the current one. Named in the mask: it must be given.
      const secretChanges = replaceAll ? w.secret !== "" : fields.has("secret");
      if (secretChanges) {
        violations.push(
          ...(w.secret === ""
            ? [
                {
                  field: `${P}secret`,
                  description: "is required: an operator webhook always signs (whsec_…)",
                },
              ]
            : operatorSecretViolations(w.secret, `${P}secret`)),
        );
      }
      throwIfInvalid(violations);

      const { revision, record: next } = await changeAudited(
        ctx,
        store,
        "operator_webhook",
        w.id,
        (current) => {
          const next: OperatorWebhookRecord = { ...current, updatedAt: now().toISOString() };
          if (fields.has("name")) next.name = w.name.trim();
          if (fields.has("url")) next.url = w.url;
          if (fields.has("event_types")) next.eventTypes = [...w.eventTypes] as OperatorEventType[];
          if (fields.has("enabled") && (!replaceAll || w.enabled !== undefined))
            next.enabled = w.enabled ?? false;
          if (secretChanges) next.secret = w.secret;
          setThresholds(next, w, fields);
          return next;
        },
      );
      log.info({ operatorWebhookId: next.id, fields: [...fields] }, "operator webhook updated");
      return { operatorWebhook: operatorWebhookToProto(next), revision: BigInt(revision) };
    },

    deleteOperatorWebhook: async (req, ctx) => {
      const revision = await deleteAudited(ctx, store, "operator_webhook", req.id);
      log.info({ operatorWebhookId: req.id }, "operator webhook deleted");
      return { revision: BigInt(revision) };
    },
  } satisfies AdminHandlers;
}

function alreadyExists(id: string): HookpostError {
  return new HookpostError(Code.ALREADY_EXISTS, `operator webhook "${id}" already exists`);
}
