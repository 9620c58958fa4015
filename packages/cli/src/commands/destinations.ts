import { readFile } from "node:fs/promises";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { MAX_IN_FLIGHT, MAX_RATE_LIMIT_PER_SECOND, parseDuration, userVariables } from "@hookpost/contract";
import type { DestinationSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { Command, Option } from "commander";
import { attemptView, resultText } from "../attempt-views.js";
import type { Context, Session } from "../context.js";
import { UsageError } from "../errors.js";
import { everyItem } from "../pages.js";
import { collect, collectHeader, positiveInt } from "../parse.js";
import {
  CONSENT_MISSING,
  type ConsentMissingName,
  type DestinationView,
  destinationView,
  iso,
  ORDERING,
  type OrderingName,
  SIGNING,
  type SigningName,
  updateSummary,
} from "../views.js";
import { destinationHealthCommand } from "./destination-health.js";
import { deleteCommand, getCommand } from "./id-command.js";
import {
  type CreateFlags,
  createCommand,
  createdFields,
  type EnableFlags,
  enableFlags,
  setEnabled,
} from "./switch-flags.js";
import { Update } from "./update.js";

type DestinationInit = MessageInitShape<typeof DestinationSchema>;

/** Flags shared by create and update. */
interface DestinationFlags {
  name?: string;
  source?: string[];
  url?: string[];
  header?: [string, string][];
  secret?: string;
  secretEnv?: string;
  signing?: SigningName;
  rateLimit?: number | "off";
  maxInFlight?: number | "off";
  ordering?: OrderingName;
  consentCategory?: string[];
  consentMissing?: ConsentMissingName;
}

function addDestinationFlags(cmd: Command, verb: "create" | "update"): Command {
  const replaces = verb === "update" ? " (replaces the current list)" : "";
  const required = verb === "create";
  return cmd
    .addOption(new Option("--name <name>", "a name for people").makeOptionMandatory(required))
    .addOption(
      new Option("--source <id>", `a source to connect, repeatable${replaces}`)
        .argParser(collect)
        .makeOptionMandatory(required),
    )
    .addOption(
      new Option("--url <url>", `a webhook URL, repeatable, 1 to 5, tried in order${replaces}`)
        .argParser(collect)
        .makeOptionMandatory(required),
    )
    .option(
      "--header <header>",
      `a static header "Name: value", repeatable, at most 5${replaces}`,
      collectHeader,
    )
    .addOption(
      new Option(
        "--secret <secret>",
        "shared secret used to sign requests (standard-webhooks-ed25519: a whsk_ private key, generated when omitted)",
      ).conflicts("secretEnv"),
    )
    .option(
      "--secret-env <var>",
      "read the shared secret from this environment variable (keeps it out of ps)",
    )
    .addOption(new Option("--signing <mode>", "signature headers to send").choices(SIGNING.words))
    .addOption(
      new Option(
        "--ordering <order>",
        "per-user: each user's calls arrive in the order accepted, one at a time per user (default: unordered)",
      ).choices(ORDERING.words),
    )
    .option(
      "--consent-category <name>",
      `a consent category calls must grant (context.consent.categoryPreferences), repeatable, at most 20${replaces}`,
      collect,
    )
    .addOption(
      new Option(
        "--consent-missing <action>",
        "with consent categories, what a call without a consent object gets (default: deliver)",
      ).choices(CONSENT_MISSING.words),
    )
    .option(
      "--rate-limit <n>",
      "at most n deliveries per second, across all dispatchers (off: no limit)",
      limitOrOff(MAX_RATE_LIMIT_PER_SECOND),
    )
    .option(
      "--max-in-flight <n>",
      "at most n requests in flight, across all dispatchers (off: DELIVERY_CONCURRENCY per dispatcher)",
      limitOrOff(MAX_IN_FLIGHT),
    );
}

function limitOrOff(max: number) {
  const n = positiveInt(max);
  return (value: string): number | "off" => (value.trim() === "off" ? "off" : n(value));
}

/**
 * Sets the lifecycle limits, the ordering and the consent settings given as flags, each named in
 * the update's mask ("off": cleared).
 */
function setLimitFlags(update: Update<DestinationInit>, opts: DestinationFlags): void {
  const { rateLimit, maxInFlight } = opts;
  if (rateLimit !== undefined) update.set("rateLimitPerSecond", rateLimit === "off" ? undefined : rateLimit);
  if (maxInFlight !== undefined) update.set("maxInFlight", maxInFlight === "off" ? undefined : maxInFlight);
  if (opts.ordering !== undefined) update.set("ordering", ORDERING.value(opts.ordering));
  if (opts.consentCategory !== undefined) update.set("consentCategories", opts.consentCategory);
  if (opts.consentMissing !== undefined)
    update.set("consentMissing", CONSENT_MISSING.value(opts.consentMissing));
}

export function destinationsCommand(session: Session): Command {
  const cmd = new Command("destinations").description("manage webhook destinations");

  addDestinationFlags(
    createCommand(cmd, "destination", "create a webhook destination", "create it disabled"),
    "create",
  ).action(async (opts: DestinationFlags & CreateFlags, command: Command) => {
    const destination: DestinationInit = {
      ...createdFields(opts),
      sourceIds: opts.source!,
      urls: opts.url!,
      headers: Object.fromEntries(opts.header ?? []),
      sharedSecret: resolveSecret(opts) ?? "",
      signing: SIGNING.value(opts.signing ?? "segment"),
    };
    setLimitFlags(new Update(destination), opts);
    const ctx = session.context(command);
    const res = await ctx.admin().createDestination({ destination });
    const d = destinationView(res.destination!);
    ctx.out.written(d, `Created destination ${d.id} ("${d.name}").`, () => printDestination(ctx, d));
  });

  cmd
    .command("list")
    .description("list destinations")
    .option("--source <id>", "only those connected to this source")
    .action(async (opts: { source?: string }, command: Command) => {
      const ctx = session.context(command);
      const all = await everyItem(
        (pageToken) => ctx.admin().listDestinations({ sourceId: opts.source ?? "", pageToken }),
        (r) => r.destinations,
      );
      ctx.out.list(
        all.map(destinationView),
        ["ID", "NAME", "ENABLED", "SOURCES", "URLS", "SIGNING", "SECRET"],
        (d) => [
          d.id,
          d.name,
          d.enabled ? "yes" : "no",
          d.sourceIds.join(","),
          d.urls.join(" "),
          d.signing,
          d.sharedSecretSet ? "set" : "-",
        ],
        opts.source ? `No destinations for source ${opts.source}.` : "No destinations.",
      );
    });

  getCommand(
    session,
    cmd,
    "destination",
    async (ctx, id) => destinationView((await ctx.admin().getDestination({ id })).destination!),
    printDestination,
  ).description("show a destination (the shared secret is write-only: only whether one is set)");

  addDestinationFlags(
    enableFlags(
      cmd
        .command("update")
        .description("change a destination; only the flags given change")
        .argument("<id>", "destination id")
        .addOption(new Option("--clear-headers", "remove every static header").conflicts("header"))
        .addOption(
          new Option(
            "--clear-consent-categories",
            "remove every consent category (no consent requirement)",
          ).conflicts("consentCategory"),
        )
        .addOption(
          new Option(
            "--clear-secret",
            "remove the shared secret (requests go unsigned; standard-webhooks-ed25519: a new key pair replaces the key at once)",
          ).conflicts(["secret", "secretEnv"]),
        ),
      "enable the destination",
      "disable the destination (nothing is delivered to it)",
    ),
    "update",
  ).action(
    async (
      id: string,
      opts: DestinationFlags &
        EnableFlags & { clearHeaders?: boolean; clearConsentCategories?: boolean; clearSecret?: boolean },
      command: Command,
    ) => {
      const update = new Update<DestinationInit>({ id });
      if (opts.name !== undefined) update.set("name", opts.name);
      if (opts.source !== undefined) update.set("sourceIds", opts.source);
      if (opts.url !== undefined) update.set("urls", opts.url);
      if (opts.header !== undefined || opts.clearHeaders)
        update.set("headers", Object.fromEntries(opts.header ?? []));
      const secret = resolveSecret(opts);
      if (secret !== undefined || opts.clearSecret) update.set("sharedSecret", secret ?? "");
      if (opts.signing !== undefined) update.set("signing", SIGNING.value(opts.signing));
      setEnabled(update, opts);
      if (opts.clearConsentCategories) update.set("consentCategories", []);
      setLimitFlags(update, opts);
      const { message: destination, paths } = update.changes();
      const ctx = session.context(command);
      const res = await ctx.admin().updateDestination({ destination, updateMask: { paths } });
      const d = destinationView(res.destination!);
      ctx.out.written(d, `Updated destination ${d.id}: ${updateSummary(paths, d)}.`, () =>
        printDestination(ctx, d),
      );
    },
  );

  cmd
    .command("dry-run")
    .description(
      "show the exact request(s) a destination would send for one call (method, URL, headers with signatures, body), or why it is filtered; nothing is sent",
    )
    .argument("<id>", "destination id")
    .requiredOption(
      "--call <json|@file>",
      'the call as JSON (e.g. \'{"type":"track","userId":"u1","event":"E"}\'), or @file to read it',
    )
    .action(async (id: string, opts: { call: string }, command: Command) => {
      const callJson = opts.call.startsWith("@") ? await readCallFile(opts.call.slice(1)) : opts.call;
      const ctx = session.context(command);
      const res = await ctx
        .admin()
        .dryRunDestination({ destination: { case: "destinationId", value: id }, callJson });
      const requests = res.requests.map((r) => ({
        method: r.method,
        url: r.url,
        headers: { ...r.headers },
        body: r.body,
      }));
      if (ctx.out.json) {
        return ctx.out.data({
          id,
          requests,
          filteredReason: res.filteredReason || null,
          error: res.error || null,
        });
      }
      if (res.filteredReason) return ctx.out.line(`Filtered: ${res.filteredReason} (nothing would be sent).`);
      if (res.error) return ctx.out.line(`Not sent: ${res.error}`);
      requests.forEach((r, i) => {
        if (requests.length > 1)
          ctx.out.line(i === 0 ? "First URL:" : `If the previous URL fails, URL ${i + 1}:`);
        ctx.out.line(`${r.method} ${r.url}`);
        for (const [name, value] of Object.entries(r.headers)) ctx.out.line(`${name}: ${value}`);
        ctx.out.line();
        ctx.out.line(r.body);
        if (i < requests.length - 1) ctx.out.line();
      });
    });

  cmd
    .command("test")
    .description(
      "send one test call to a destination now, through the real delivery path (even when paused), and print its attempt; never retried",
    )
    .argument("<id>", "destination id")
    .option("--call <json|@file>", 'the call as JSON, or @file (default: a track call "Hookpost Test Call")')
    .action(async (id: string, opts: { call?: string }, command: Command) => {
      const callJson =
        opts.call === undefined
          ? ""
          : opts.call.startsWith("@")
            ? await readCallFile(opts.call.slice(1))
            : opts.call;
      const ctx = session.context(command);
      const res = await ctx.admin().sendTestCall({ destinationId: id, callJson });
      const attempts = res.attempts.map(attemptView);
      if (ctx.out.json) return ctx.out.data({ id, messageId: res.messageId, attempts });
      const ok = attempts.at(-1)?.outcome === "success";
      ctx.out.line(`Test call ${res.messageId} to ${id}: ${ok ? "delivered" : "not delivered"}.`);
      for (const a of attempts) {
        ctx.out.line(`  ${a.url}  ${resultText(a)}  ${a.durationMs} ms  ${a.reason}`.trimEnd());
      }
    });

  cmd
    .command("rotate-secret")
    .description(
      "set a new shared secret; the previous one keeps signing beside it for the overlap, so receivers can switch at any moment",
    )
    .argument("<id>", "destination id")
    .option("--overlap <duration>", "how long the previous secret keeps signing (0: stops at once)", "24h")
    .option(
      "--secret-env <var>",
      "read the new secret from this environment variable; generated when omitted",
    )
    .action(async (id: string, opts: { overlap: string; secretEnv?: string }, command: Command) => {
      let overlapMs: number;
      try {
        overlapMs = parseDuration(opts.overlap);
      } catch (err) {
        throw new UsageError(`--overlap: ${(err as Error).message}`);
      }
      const newSecret = resolveSecret(opts) ?? "";
      const ctx = session.context(command);
      const res = await ctx.admin().rotateSecret({
        destinationId: id,
        newSecret,
        previousValidFor: durationFromMs(overlapMs),
      });
      const until = iso(res.previousSecretExpireTime);
      // Printed once: Hookpost never shows a secret again. Not echoed when the caller gave it;
      // empty for an Ed25519 key pair, whose private key never leaves (its public keys are shown).
      const shown = newSecret === "" && res.secret !== "" ? res.secret : undefined;
      const publicKeys = res.destination?.signingPublicKeys ?? [];
      if (ctx.out.json) {
        const revision = Number(res.revision);
        return ctx.out.data({
          id,
          secret: shown ?? null,
          previousSecretExpireTime: until,
          revision,
          signingPublicKeys: [...publicKeys],
        });
      }
      ctx.out.line(`Rotated the shared secret of destination ${id}.`);
      if (shown !== undefined) ctx.out.line(`New secret (shown once): ${shown}`);
      if (publicKeys.length > 0) printPublicKeys(ctx, publicKeys);
      ctx.out.line(
        until ? `The previous secret keeps signing until ${until}.` : "The previous secret no longer signs.",
      );
    });

  deleteCommand(session, cmd, "destination", "delete a destination", (ctx, id) =>
    ctx.admin().deleteDestination({ id }),
  );

  cmd.addCommand(destinationHealthCommand(session));

  return cmd;
}

/** The secret from --secret or --secret-env; undefined when neither was given. */
export function resolveSecret(opts: { secret?: string; secretEnv?: string }): string | undefined {
  if (opts.secretEnv !== undefined) {
    const value = userVariables()[opts.secretEnv];
    if (!value) throw new UsageError(`--secret-env: environment variable ${opts.secretEnv} is not set`);
    return value;
  }
  if (opts.secret === "") throw new UsageError("--secret is empty (use --clear-secret to remove a secret)");
  return opts.secret;
}

/** `"Analytics", "Advertising" (no consent object: filter)`, or `none`. */
function consentText(d: DestinationView): string {
  if (d.consentCategories.length === 0) return "none";
  const names = d.consentCategories.map((c) => JSON.stringify(c)).join(", ");
  return `${names} (no consent object: ${d.consentMissing})`;
}

export function printDestination(ctx: Context, d: DestinationView): void {
  const headers = Object.entries(d.headers);
  ctx.out.fields([
    ["id", d.id],
    ["name", d.name],
    ["enabled", d.enabled ? "yes" : "no"],
    ["sources", d.sourceIds.join(", ") || "(none)"],
    ["signing", d.signing],
    ["ordering", d.ordering],
    ["consent", consentText(d)],
    ["shared secret", d.sharedSecretSet ? "set" : "not set"],
    ...(d.previousSecretExpireTime
      ? [["previous secret signs until", d.previousSecretExpireTime] as [string, string]]
      : []),
    ["rate limit", d.rateLimitPerSecond == null ? "none" : `${d.rateLimitPerSecond}/s`],
    ["max in flight", d.maxInFlight == null ? "DELIVERY_CONCURRENCY per dispatcher" : String(d.maxInFlight)],
    ...(d.disabledReason
      ? [
          ["disabled reason", d.disabledReason] as [string, string],
          ["disabled at", d.disabledTime ?? ""] as [string, string],
        ]
      : []),
    ["created", d.createTime ?? ""],
    ["updated", d.updateTime ?? ""],
    ["urls", d.urls.length === 0 ? "(none)" : ""],
  ]);
  d.urls.forEach((u, i) => {
    ctx.out.line(`  ${i + 1}. ${u}`);
  });
  ctx.out.line(headers.length === 0 ? "headers: (none)" : "headers:");
  for (const [k, v] of headers) ctx.out.line(`  ${k}: ${v}`);
  if (d.signingPublicKeys.length > 0) printPublicKeys(ctx, d.signingPublicKeys);
}

/** The whpk_ keys receivers verify with, the new one first; during an overlap both sign. */
function printPublicKeys(ctx: Context, keys: readonly string[]): void {
  ctx.out.line("public keys (receivers verify v1a signatures with these; trust every one listed):");
  keys.forEach((k, i) => {
    ctx.out.line(`  ${k}${i === 0 ? "" : " (previous, signs until the overlap ends)"}`);
  });
}

/** A dry run's call from a file (`--call @call.json`); a missing file is a usage error. */
async function readCallFile(file: string): Promise<string> {
  try {
    return await readFile(file, "utf8");
  } catch (err) {
    throw new UsageError(
      `--call @${file}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message}`,
    );
  }
}
