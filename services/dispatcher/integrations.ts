import type { StoredCall } from "@hookpost/contract";

/** The name a call's integrations object uses for Hookpost's webhook destinations (case-sensitive). */
export const INTEGRATION_NAME = "Webhooks";

/**
 * Whether a call goes to webhook destinations: on by default, `All: false` turns every destination
 * off except those set true, `Webhooks: false` turns this one off. Deletion notices ignore it.
 */
export function webhooksEnabled(call: StoredCall): boolean {
  if (call.type === "delete") return true;
  const i = call.integrations;
  if (!i) return true;
  const own = i[INTEGRATION_NAME];
  if (typeof own === "boolean") return own;
  return i.All !== false;
}
