import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { OPERATOR_EVENT_TYPES, parseDuration } from "@hookpost/contract";
import type { OperatorWebhookSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { Command, InvalidArgumentError, Option } from "commander";
import type { Context, Session } from "../context.js";
import { collect } from "../parse.js";
import { type OperatorWebhookView, operatorWebhookView } from "../views.js";
import { resolveSecret } from "./destinations.js";
import { deleteCommand, getCommand } from "./id-command.js";
import { printWriteKey } from "./sources.js";
import type { CreateFlags, EnableFlags } from "./switch-flags.js";
import { createCommand, createdFields, enableFlags, setEnabled } from "./switch-flags.js";
import { Update } from "./update.js";

type WebhookInit = MessageInitShape<typeof OperatorWebhookSchema>;

interface WebhookFlags {
  name?: string;
  url?: string;
  secret?: string;
  secretEnv?: string;
  event?: string[];
  failingBelow?: number | "default";
  behindAfter?: number | "default";
}

/** Repeatable `--event destination.failing`: a known type. */
function collectEventType(value: string, previous: string[] = []): string[] {
  if (!(OPERATOR_EVENT_TYPES as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`expected one of ${OPERATOR_EVENT_TYPES.join(", ")}`);
  }
  return collect(value, previous);
}

/** `0.5` (a success rate), or `default`. */
function rateOrDefault(value: string): number | "default" {
  if (value.trim() === "default") return "default";
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n > 1)
    throw new InvalidArgumentError("expected a success rate from 0.01 to 1, or default");
  return n;
}

/** `15m` (a duration), or `default`. */
function durationOrDefault(value: string): number | "default" {
  if (value.trim() === "default") return "default";
  try {
    return parseDuration(value);
  } catch {
    throw new InvalidArgumentError("expected a duration such as 30s, 15m or 1h, or default");
  }
}

function addFlags(cmd: Command, verb: "create" | "update"): Command {
  const required = verb === "create";
  return cmd
    .addOption(new Option("--name <name>", "a name for people").makeOptionMandatory(required))
    .addOption(new Option("--url <url>", "where events are POSTed").makeOptionMandatory(required))
    .addOption(
      new Option(
        "--secret <whsec>",
        `the Standard Webhooks secret that signs events (whsec_…)${required ? "; generated and shown once when omitted" : ""}`,
      ).conflicts("secretEnv"),
    )
    .option("--secret-env <var>", "read the secret from this environment variable (keeps it out of ps)")
    .addOption(
      new Option(
        "--event <type>",
        `an event type to send, repeatable${required ? "; omitted: every type" : " (replaces the list)"}`,
      ).argParser(collectEventType),
    )
    .option(
      "--failing-below <rate>",
      "destination.failing below this success rate (0.01 to 1; default 0.5)",
      rateOrDefault,
    )
    .option(
      "--behind-after <duration>",
      "destination.behind when the oldest pending call waited this long (default 15m)",
      durationOrDefault,
    );
}

/** Sets the thresholds given as flags, each named in the update's mask ("default": cleared). */
function setThresholds(update: Update<WebhookInit>, opts: WebhookFlags): void {
  const { failingBelow, behindAfter } = opts;
  if (failingBelow !== undefined)
    update.set("failingBelow", failingBelow === "default" ? undefined : failingBelow);
  if (behindAfter !== undefined)
    update.set("behindAfter", behindAfter === "default" ? undefined : durationFromMs(behindAfter));
}

/** `hookpost operator-webhooks …`: where Hookpost announces failing, behind and paused destinations and dead letters. */
export function operatorWebhooksCommand(session: Session): Command {
  const cmd = new Command("operator-webhooks").description(
    "manage operational webhooks: signed POSTs to your URLs when a destination fails, recovers, is paused by Hookpost, falls behind, or dead-letters calls",
  );

  addFlags(
    createCommand(
      cmd,
      "webhook",
      "create an operator webhook (prints the generated secret once when none is given)",
      "create it disabled (no events are sent)",
    ),
    "create",
  ).action(async (opts: WebhookFlags & CreateFlags, command: Command) => {
    const operatorWebhook: WebhookInit = {
      ...createdFields(opts),
      url: opts.url!,
      secret: resolveSecret(opts) ?? "",
      eventTypes: opts.event ?? [],
    };
    setThresholds(new Update(operatorWebhook), opts);
    const ctx = session.context(command);
    const res = await ctx.admin().createOperatorWebhook({ operatorWebhook });
    const w = operatorWebhookView(res.operatorWebhook!);
    if (ctx.out.json)
      return ctx.out.data({ operatorWebhook: w, ...(res.secret ? { secret: res.secret } : {}) });
    ctx.out.line(`Created operator webhook ${w.id} ("${w.name}").`);
    if (res.secret) printWriteKey(ctx, res.secret, "Secret (verify every event with it)");
    else ctx.out.line();
    printWebhook(ctx, w);
  });

  cmd
    .command("list")
    .description("list operator webhooks")
    .action(async (_opts: object, command: Command) => {
      const ctx = session.context(command);
      const list = (await ctx.admin().listOperatorWebhooks({})).operatorWebhooks.map(operatorWebhookView);
      ctx.out.list(
        list,
        ["ID", "NAME", "ENABLED", "URL", "EVENTS"],
        (w) => [w.id, w.name, w.enabled ? "yes" : "no", w.url, eventsText(w)],
        "No operator webhooks. Create one with: hookpost operator-webhooks create --name Pager --url https://…",
      );
    });

  getCommand(
    session,
    cmd,
    "operator webhook",
    async (ctx, id) => operatorWebhookView((await ctx.admin().getOperatorWebhook({ id })).operatorWebhook!),
    printWebhook,
  ).description("show an operator webhook (the secret is write-only)");

  addFlags(
    enableFlags(
      cmd
        .command("update")
        .description("change an operator webhook; only the flags given change")
        .argument("<id>", "operator webhook id")
        .addOption(new Option("--all-events", "send every event type").conflicts("event")),
      "send events again",
      "send no new events",
    ),
    "update",
  ).action(
    async (id: string, opts: WebhookFlags & EnableFlags & { allEvents?: boolean }, command: Command) => {
      const update = new Update<WebhookInit>({ id });
      if (opts.name !== undefined) update.set("name", opts.name);
      if (opts.url !== undefined) update.set("url", opts.url);
      const secret = resolveSecret(opts);
      if (secret !== undefined) update.set("secret", secret);
      if (opts.event !== undefined || opts.allEvents) update.set("eventTypes", opts.event ?? []);
      setEnabled(update, opts);
      setThresholds(update, opts);
      const { message: operatorWebhook, paths } = update.changes();
      const ctx = session.context(command);
      const res = await ctx.admin().updateOperatorWebhook({ operatorWebhook, updateMask: { paths } });
      const w = operatorWebhookView(res.operatorWebhook!);
      ctx.out.written(w, `Updated operator webhook ${w.id}: ${paths.join(", ")} changed.`, () =>
        printWebhook(ctx, w),
      );
    },
  );

  deleteCommand(
    session,
    cmd,
    "operator webhook",
    "delete an operator webhook; events not sent yet are dropped",
    (ctx, id) => ctx.admin().deleteOperatorWebhook({ id }),
  );

  return cmd;
}

function eventsText(w: OperatorWebhookView): string {
  return w.eventTypes.length === 0 ? "all" : w.eventTypes.join(", ");
}

function printWebhook(ctx: Context, w: OperatorWebhookView): void {
  ctx.out.fields([
    ["id", w.id],
    ["name", w.name],
    ["url", w.url],
    ["secret", w.secretSet ? "set (write-only)" : "-"],
    ["events", eventsText(w)],
    ["enabled", w.enabled ? "yes" : "no"],
    ["failing below", `${w.failingBelow ?? 0.5}${w.failingBelow === null ? " (default)" : ""}`],
    ["behind after", `${w.behindAfter ?? "15m"}${w.behindAfter === null ? " (default)" : ""}`],
    ["attempts", `hookpost attempts list --destination _ops_${w.id}`],
    ["created", w.createTime ?? ""],
    ["updated", w.updateTime ?? ""],
  ]);
}
