import { randomBytes } from "node:crypto";
import { Command } from "commander";
import type { Session } from "../context.js";
import { UsageError } from "../errors.js";

/** As SECRETS_KEYS reads them (packages/core/src/secrets/keyring.ts). */
const KEY_ID = /^[A-Za-z0-9_.-]{1,64}$/;
const KEY_BYTES = 32;

/**
 * `hookpost secrets …`: the keys that encrypt destinations' secrets and header values at rest
 * (SECRETS_KEYS), and re-encrypting with the newest one (docs/operations.md#rotating-the-secrets-key).
 */
export function secretsCommand(session: Session): Command {
  const cmd = new Command("secrets").description(
    "encryption of destinations' secrets at rest: make a key, re-encrypt with the newest key",
  );

  cmd
    .command("new-key")
    .description("print a new SECRETS_KEYS entry (id:base64key, 32 random bytes); nothing is sent")
    .option("--id <id>", "the key's id (letters, digits, '.', '_', '-'); default key-<today>")
    .action((opts: { id?: string }, command: Command) => {
      const id = opts.id ?? `key-${new Date().toISOString().slice(0, 10)}`;
      if (!KEY_ID.test(id)) throw new UsageError("--id: letters, digits, '.', '_' and '-' only, at most 64");
      const entry = `${id}:${randomBytes(KEY_BYTES).toString("base64")}`;
      const ctx = session.context(command);
      if (ctx.out.json) return ctx.out.data({ id, entry });
      ctx.out.line(entry);
      ctx.out.note(
        "Add it first to SECRETS_KEYS on every service, the older keys after it; restart them; then: hookpost secrets re-encrypt (docs/operations.md#rotating-the-secrets-key)",
      );
    });

  cmd
    .command("re-encrypt")
    .description(
      "rewrite every destination not yet encrypted with the newest key (the first of SECRETS_KEYS); then older keys can go",
    )
    .action(async (_opts: object, command: Command) => {
      const ctx = session.context(command);
      const res = await ctx.admin().reencryptSecrets({});
      if (ctx.out.json) {
        return ctx.out.data({ reencrypted: res.reencrypted, unchanged: res.unchanged, keyId: res.keyId });
      }
      ctx.out.line(
        `Re-encrypted ${res.reencrypted} destination${res.reencrypted === 1 ? "" : "s"} with key ${res.keyId} (${res.unchanged} already were).`,
      );
    });

  return cmd;
}
