import {
  type AuditChange,
  type CallContext,
  type ConfigStore,
  changedFields,
  type DestinationRecord,
  type OperatorWebhookRecord,
  redact,
  type SourceRecord,
} from "@hookpost/core";
import { throwIfInvalid } from "../invalid.js";
import { notFound, requiredIdViolations } from "./ids.js";

/**
 * What the handlers of one admin call tell the audit log: each resource they changed, before and
 * after. Keyed by the call's context, which the audit wrapper (audited.ts) opens before the
 * handler runs and reads once it answered; a handler called without one (tests) records nothing.
 */
const changes = new WeakMap<CallContext, AuditChange[]>();

export function openAuditChanges(ctx: CallContext): AuditChange[] {
  const list: AuditChange[] = [];
  changes.set(ctx, list);
  return list;
}

type Resource =
  | { type: "source"; before?: SourceRecord | undefined; after?: SourceRecord | undefined }
  | { type: "destination"; before?: DestinationRecord | undefined; after?: DestinationRecord | undefined }
  | { type: "portal_link"; before?: object | undefined; after?: object | undefined }
  | {
      type: "operator_webhook";
      before?: OperatorWebhookRecord | undefined;
      after?: OperatorWebhookRecord | undefined;
    };

/** Records that the call changed one resource (redacted here: secrets never reach the log). */
export function auditChange(ctx: CallContext, id: string, r: Resource): void {
  changes.get(ctx)?.push({
    resourceType: r.type,
    resourceId: id,
    ...(r.before === undefined ? {} : { before: redact(r.before) }),
    ...(r.after === undefined ? {} : { after: redact(r.after) }),
    changedFields: changedFields(r.before, r.after),
  });
}

/** The stored resources the admin API changes one at a time, and their names in NOT_FOUND. */
interface Stored {
  source: SourceRecord;
  destination: DestinationRecord;
  operator_webhook: OperatorWebhookRecord;
}
type Kind = keyof Stored;
type Change<K extends Kind> = (current: Stored[K]) => Stored[K] | undefined;

/** ConfigStore's methods for each kind (a function per kind: TypeScript cannot pick them by key). */
const STORED: {
  [K in Kind]: {
    noun: "source" | "destination" | "operator webhook";
    get(store: ConfigStore, id: string): Stored[K] | undefined;
    change(store: ConfigStore, id: string, change: Change<K>): Promise<number | undefined>;
    remove(store: ConfigStore, id: string): Promise<number>;
  };
} = {
  source: {
    noun: "source",
    get: (store, id) => store.source(id),
    change: (store, id, change) => store.changeSource(id, change),
    remove: (store, id) => store.deleteSource(id),
  },
  destination: {
    noun: "destination",
    get: (store, id) => store.destination(id),
    change: (store, id, change) => store.changeDestination(id, change),
    remove: (store, id) => store.deleteDestination(id),
  },
  operator_webhook: {
    noun: "operator webhook",
    get: (store, id) => store.operatorWebhook(id),
    change: (store, id, change) => store.changeOperatorWebhook(id, change),
    remove: (store, id) => store.deleteOperatorWebhook(id),
  },
};

/**
 * A compare-and-set change of one stored resource (ConfigStore's change…: `change` may run again
 * on a newer record, and throw to refuse), recorded with what it was and what it became. NOT_FOUND
 * when there is no such resource; resolves to the revision written and the record as stored.
 */
export async function changeAudited<K extends Kind>(
  ctx: CallContext,
  store: ConfigStore,
  type: K,
  id: string,
  change: (current: Stored[K]) => Stored[K],
): Promise<{ revision: number; record: Stored[K] }> {
  let before: Stored[K] | undefined;
  let after: Stored[K] | undefined;
  const revision = await STORED[type].change(store, id, (current) => {
    before = current;
    after = change(current);
    return after;
  });
  if (revision === undefined || after === undefined) throw notFound(STORED[type].noun, id);
  auditChange(ctx, id, { type, before, after } as Resource);
  return { revision, record: after };
}

/** Deletes the stored resource `id` (required), recorded with what it was; NOT_FOUND when there is none. */
export async function deleteAudited(
  ctx: CallContext,
  store: ConfigStore,
  type: Kind,
  id: string,
): Promise<number> {
  throwIfInvalid(requiredIdViolations(id));
  const before = STORED[type].get(store, id);
  if (!before) throw notFound(STORED[type].noun, id);
  const revision = await STORED[type].remove(store, id);
  auditChange(ctx, id, { type, before } as Resource);
  return revision;
}
