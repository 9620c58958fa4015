import { Code, HookpostError } from "@hookpost/contract";
import { SecretsKeyError } from "@hookpost/core";
import type { AdminDeps, AdminHandlers } from "./sources.js";

/** Rewrites at once: thousands of destinations finish within a CLI deadline, NATS is not flooded. */
const CONCURRENCY = 16;

/**
 * ReencryptSecrets: every destination not stored sealed with the newest key (SECRETS_KEYS' first)
 * is written again as it is, which seals it with that key (the store seals, config-store.ts). Each
 * write is compare-and-set, so a concurrent change is never undone: it is re-read and written on
 * top. Afterwards the older keys can be removed (docs/operations.md#rotating-the-secrets-key).
 */
export function reencryptSecretsHandler(deps: AdminDeps) {
  const { store, log } = deps;
  return {
    reencryptSecrets: async () => {
      const keyId = store.encryptionKeyId;
      if (keyId === undefined) {
        throw new HookpostError(
          Code.FAILED_PRECONDITION,
          "SECRETS_KEYS is not set on this ingest, so secrets are stored in plain text: set it on every service, restart them, then re-encrypt",
        );
      }
      const pending = store.destinationsToReencrypt();
      let reencrypted = 0;
      const worker = async () => {
        for (let id = pending.pop(); id !== undefined; id = pending.pop()) {
          // Unchanged content; undefined when the destination was deleted meanwhile.
          const revision = await store
            .changeDestination(id, (current) => current)
            .catch((err: unknown) => {
              if (err instanceof SecretsKeyError)
                throw new HookpostError(Code.FAILED_PRECONDITION, err.message);
              throw err;
            });
          if (revision !== undefined) reencrypted++;
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      // Operator webhooks' secrets are sealed alike (at most 10 of them).
      for (const id of store.operatorWebhooksToReencrypt()) {
        if ((await store.changeOperatorWebhook(id, (current) => current)) !== undefined) reencrypted++;
      }
      const unchanged = Math.max(
        0,
        store.destinations().length + store.operatorWebhooks().length - reencrypted,
      );
      log.info({ reencrypted, unchanged, keyId }, "destination secrets re-encrypted");
      return { reencrypted, unchanged, keyId };
    },
  } satisfies AdminHandlers;
}
