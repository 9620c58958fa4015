import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { httpMethodOf, parseDuration } from "@hookpost/contract";
import type { DestinationSchema, OperatorWebhookSchema } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { Command } from "commander";
import {
  type ApplyFile,
  type DesiredDestination,
  type DesiredOperatorWebhook,
  loadApplyFile,
} from "../apply-file.js";
import type { Context, Session } from "../context.js";
import { InputError, type InputProblem } from "../errors.js";
import { everyItem } from "../pages.js";
import {
  CONSENT_MISSING,
  DELIVERY_MODE,
  type DestinationView,
  destinationView,
  type OperatorWebhookView,
  ORDERING,
  operatorWebhookView,
  SIGNING,
  sourceView,
} from "../views.js";

type Action = "create" | "update" | "unchanged";

interface Step {
  kind: "source" | "destination" | "operator webhook";
  id: string;
  action: Action;
  /** For updates: the fields that change (proto names, as in the update mask). */
  changes: string[];
  note?: string;
  /** A destination whose file gives a secret that was not sent (it is write-only, so not compared). */
  secretKept?: boolean;
  /** Resolves to what is shown once: a new source's write key, a new operator webhook's generated secret. */
  run?: () => Promise<string | undefined>;
}

export function applyCommand(session: Session): Command {
  return new Command("apply")
    .description(
      "make sources, destinations and operator webhooks match a YAML or JSON file: creates what is missing, updates what differs, leaves the rest alone",
    )
    .requiredOption("-f, --file <file>", "the file (`-` reads stdin)")
    .option("--dry-run", "only show what would change")
    .option(
      "--update-secrets",
      "also push the secrets of existing destinations and operator webhooks (secrets are write-only, so they cannot be compared)",
    )
    .addHelpText(
      "after",
      `
The file (YAML or JSON):
  sources:
    - id: web
      name: Web app
      allowedOrigins: [https://shop.example.com]   # browsers on these web sites only; omit: any
  destinations:
    - id: crm                        # ids are required: a re-apply finds things by id
      name: CRM
      sources: [web]
      urls: [https://crm.example.com/hooks]   # 1 to 5, tried in order
      headers: { X-Team: growth }    # at most 5
      secretEnv: CRM_SECRET          # or secret: …; omit for none
      signing: segment               # or standard-webhooks (secret: whsec_…), or
                                     # standard-webhooks-ed25519 (secret: whsk_…, generated
                                     # when omitted; \`destinations get\` shows the public keys)
      ordering: unordered            # or per-user (each user's calls in the order accepted)
      consentCategories: [Analytics] # calls must grant these (context.consent); omit for none
      consentMissing: deliver        # or filter: what calls without a consent object get
      filter: { types: [track], events: [Signed Up], expression: 'properties.plan = "pro"' }
      mapping: '{"id": userId, "event": event}'   # JSONata on the default body; omit for it
      method: PUT                    # POST (default), PUT or PATCH
      retry: { window: 2h, delays: [10s, 1m, 5m] }   # the last delay repeats; omit for the server's
      batching: { maxCalls: 100, maxBytes: 524288, maxWait: 1s }   # JSON arrays; omit for one call per request
      deliveryMode: failover         # or fan-out: every URL gets every call, each retried on its own
      enabled: true
  operatorWebhooks:                  # operational events: failing, recovered, disabled, behind, dead letters
    - id: pager
      name: Pager
      url: https://pager.example.com/hookpost
      secretEnv: PAGER_SECRET        # or secret: whsec_…; omit to have one generated (printed once)
      events: [destination.failing, destination.recovered]   # omit for every type
      failingBelow: 0.5              # success rate over ALERT_HEALTH_WINDOW; omit for 0.5
      behindAfter: 15m               # oldest pending call; omit for 15m
      enabled: true

Nothing is deleted: sources and destinations missing from the file are left alone.
Write keys are printed only for sources created now, generated secrets only for operator
webhooks created now.`,
    )
    .action(async (opts: { file: string; dryRun?: boolean; updateSecrets?: boolean }, command: Command) => {
      const file = await loadApplyFile(opts.file);
      const ctx = session.context(command);
      const steps = await plan(ctx, file, Boolean(opts.updateSecrets));
      const writeKeys: Record<string, string> = {};
      const secrets: Record<string, string> = {};
      const done: Step[] = [];
      if (!opts.dryRun) {
        try {
          for (const step of steps) {
            const key = await step.run?.();
            if (key) (step.kind === "source" ? writeKeys : secrets)[step.id] = key;
            done.push(step);
          }
        } catch (err) {
          if (done.some((s) => s.action !== "unchanged")) {
            ctx.out.note("applied before the failure:");
            for (const s of done) ctx.out.note(`  ${stepText(s)}`);
          }
          if (Object.keys(writeKeys).length > 0) {
            ctx.out.note("write keys of the sources created (shown once):");
            for (const [id, key] of Object.entries(writeKeys)) ctx.out.note(`  ${id}: ${key}`);
          }
          if (Object.keys(secrets).length > 0) {
            ctx.out.note("secrets of the operator webhooks created (shown once):");
            for (const [id, key] of Object.entries(secrets)) ctx.out.note(`  ${id}: ${key}`);
          }
          throw err;
        }
      }
      report(ctx, steps, writeKeys, secrets, Boolean(opts.dryRun));
    });
}

async function plan(ctx: Context, file: ApplyFile, updateSecrets: boolean): Promise<Step[]> {
  const admin = ctx.admin();
  const [sources, destinations] = await Promise.all([
    everyItem(
      (pageToken) => admin.listSources({ pageToken }),
      (r) => r.sources,
    ),
    everyItem(
      (pageToken) => admin.listDestinations({ pageToken }),
      (r) => r.destinations,
    ),
  ]);
  const existingSources = new Map(sources.map((s) => [s.id, sourceView(s)]));
  const existingDestinations = new Map(destinations.map((d) => [d.id, destinationView(d)]));

  const known = new Set([...existingSources.keys(), ...file.sources.map((s) => s.id)]);
  const problems: InputProblem[] = [];
  for (const d of file.destinations) {
    d.sourceIds.forEach((id, i) => {
      if (!known.has(id)) {
        problems.push({
          path: `${d.path}.sources[${i}]`,
          message: `unknown source "${id}" (not in the file and not on the server)`,
        });
      }
    });
  }
  if (problems.length > 0) {
    throw new InputError(`the file refers to sources that do not exist; nothing was changed`, problems);
  }

  const steps: Step[] = [];
  for (const s of file.sources) {
    const current = existingSources.get(s.id);
    const source = { id: s.id, name: s.name, allowedOrigins: s.allowedOrigins };
    steps.push(
      step(
        "source",
        s.id,
        current
          ? {
              changes: [
                ...(current.name !== s.name ? ["name"] : []),
                ...(current.allowedOrigins.join("\n") !== s.allowedOrigins.join("\n")
                  ? ["allowed_origins"]
                  : []),
              ],
              update: (paths) => admin.updateSource({ source, updateMask: { paths } }),
            }
          : { create: async () => (await admin.createSource(source)).writeKey },
      ),
    );
  }
  for (const d of file.destinations) {
    const current = existingDestinations.get(d.id);
    steps.push(
      step(
        "destination",
        d.id,
        current
          ? {
              changes: diff(current, d, updateSecrets),
              secret: { given: d.secret !== undefined, field: "shared_secret" },
              update: (paths) =>
                admin.updateDestination({ destination: destinationInit(d), updateMask: { paths } }),
            }
          : {
              create: async () => {
                await admin.createDestination({ destination: destinationInit(d) });
                return undefined;
              },
            },
      ),
    );
  }
  steps.push(...(await planOperatorWebhooks(ctx, file.operatorWebhooks, updateSecrets)));
  return steps;
}

/** Only when the file has some: a server without operator webhooks still takes other files. */
async function planOperatorWebhooks(
  ctx: Context,
  wanted: DesiredOperatorWebhook[],
  updateSecrets: boolean,
): Promise<Step[]> {
  if (wanted.length === 0) return [];
  const admin = ctx.admin();
  const existing = new Map(
    (await admin.listOperatorWebhooks({})).operatorWebhooks.map((w) => [w.id, operatorWebhookView(w)]),
  );
  return wanted.map((w) => {
    const current = existing.get(w.id);
    return step(
      "operator webhook",
      w.id,
      current
        ? {
            changes: operatorWebhookDiff(current, w, updateSecrets),
            secret: { given: w.secret !== undefined, field: "secret" },
            update: (paths) =>
              admin.updateOperatorWebhook({ operatorWebhook: webhookInit(w), updateMask: { paths } }),
          }
        : {
            create: async () =>
              (await admin.createOperatorWebhook({ operatorWebhook: webhookInit(w) })).secret || undefined,
          },
    );
  });
}

/**
 * What to do with one resource of the file: create it (the server has none), or update the
 * fields that differ (`changes`, the update mask). `secret`: the file may give a secret, which is
 * write-only and so not compared: whether one was given and its field.
 */
type Plan =
  | { create: () => Promise<string | undefined> }
  | {
      changes: string[];
      secret?: { given: boolean; field: string };
      update: (paths: string[]) => Promise<unknown>;
    };

/** The step for one resource of the file: create, update, or unchanged. */
function step(kind: Step["kind"], id: string, plan: Plan): Step {
  if ("create" in plan) return { kind, id, action: "create", changes: [], run: plan.create };
  const { changes } = plan;
  // Write-only secrets cannot be compared: say so instead of pretending they match.
  const kept = plan.secret ? { secretKept: plan.secret.given && !changes.includes(plan.secret.field) } : {};
  if (changes.length === 0) return { kind, id, action: "unchanged", changes, ...kept };
  return {
    kind,
    id,
    action: "update",
    changes,
    ...kept,
    run: async () => {
      await plan.update(changes);
      return undefined;
    },
  };
}

/** The file's words for a duration ("90s", "2h") as a proto Duration. */
const protoDuration = (text: string) => durationFromMs(parseDuration(text));

function webhookInit(w: DesiredOperatorWebhook): MessageInitShape<typeof OperatorWebhookSchema> {
  return {
    id: w.id,
    name: w.name,
    url: w.url,
    secret: w.secret ?? "",
    eventTypes: w.events,
    enabled: w.enabled,
    ...(w.failingBelow === null ? {} : { failingBelow: w.failingBelow }),
    ...(w.behindAfter === null ? {} : { behindAfter: protoDuration(w.behindAfter) }),
  };
}

/** The update-mask paths where the server's operator webhook differs from the file's. */
export function operatorWebhookDiff(
  current: OperatorWebhookView,
  want: DesiredOperatorWebhook,
  updateSecrets: boolean,
): string[] {
  const changes: string[] = [];
  if (current.name !== want.name) changes.push("name");
  if (normalUrl(current.url) !== normalUrl(want.url)) changes.push("url");
  if (want.secret !== undefined && updateSecrets) changes.push("secret");
  if (!sameSet(current.eventTypes, want.events)) changes.push("event_types");
  if (current.enabled !== want.enabled) changes.push("enabled");
  if (current.failingBelow !== want.failingBelow) changes.push("failing_below");
  if (current.behindAfter !== want.behindAfter) changes.push("behind_after");
  return changes;
}

function destinationInit(d: DesiredDestination): MessageInitShape<typeof DestinationSchema> {
  return {
    id: d.id,
    name: d.name,
    sourceIds: d.sourceIds,
    urls: d.urls,
    headers: d.headers,
    sharedSecret: d.secret ?? "",
    signing: SIGNING.value(d.signing),
    ordering: ORDERING.value(d.ordering),
    consentCategories: d.consentCategories,
    consentMissing: CONSENT_MISSING.value(d.consentMissing),
    ...(d.filter
      ? {
          filter: {
            types: d.filter.types ?? [],
            events: d.filter.events ?? [],
            expression: d.filter.expression ?? "",
          },
        }
      : {}),
    mapping: d.mapping,
    method: httpMethodOf(d.method),
    ...(d.retry
      ? {
          retry: {
            ...(d.retry.window ? { window: protoDuration(d.retry.window) } : {}),
            delays: (d.retry.delays ?? []).map(protoDuration),
          },
        }
      : {}),
    ...(d.batching
      ? {
          batching: {
            maxCalls: d.batching.maxCalls ?? 0,
            maxBytes: d.batching.maxBytes ?? 0,
            ...(d.batching.maxWait ? { maxWait: protoDuration(d.batching.maxWait) } : {}),
          },
        }
      : {}),
    deliveryMode: DELIVERY_MODE.value(d.deliveryMode),
    enabled: d.enabled,
  };
}

/** The fields (update-mask paths) where the server's destination differs from the file's. */
export function diff(current: DestinationView, want: DesiredDestination, updateSecrets: boolean): string[] {
  const changes: string[] = [];
  if (current.name !== want.name) changes.push("name");
  if (!sameSet(current.sourceIds, want.sourceIds)) changes.push("source_ids");
  if (!sameList(current.urls.map(normalUrl), want.urls.map(normalUrl))) changes.push("urls");
  if (!sameHeaders(current.headers, want.headers)) changes.push("headers");
  const signingChanges = current.signing !== want.signing;
  // A new signing mode is checked against the secret: send the file's secret along with it.
  // Without one in the file an Ed25519 key is the server's to keep (it generated it): clearing it
  // on every apply would replace the key each time.
  const secretChanges =
    want.secret === undefined
      ? current.sharedSecretSet && want.signing !== "standard-webhooks-ed25519"
      : !current.sharedSecretSet || updateSecrets || signingChanges;
  if (secretChanges) changes.push("shared_secret");
  if (signingChanges) changes.push("signing");
  if (current.ordering !== want.ordering) changes.push("ordering");
  if (!sameList(current.consentCategories, want.consentCategories)) changes.push("consent_categories");
  if (current.consentMissing !== want.consentMissing) changes.push("consent_missing");
  if (JSON.stringify(current.filter) !== JSON.stringify(want.filter)) changes.push("filter");
  if (current.mapping !== want.mapping) changes.push("mapping");
  if (current.method !== want.method) changes.push("method");
  if (JSON.stringify(current.retry) !== JSON.stringify(want.retry)) changes.push("retry");
  if (JSON.stringify(current.batching) !== JSON.stringify(want.batching)) changes.push("batching");
  if (current.deliveryMode !== want.deliveryMode) changes.push("delivery_mode");
  if (current.enabled !== want.enabled) changes.push("enabled");
  return changes;
}

function sameList(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

function sameSet(a: string[], b: string[]): boolean {
  return sameList([...new Set(a)].sort(), [...new Set(b)].sort());
}

/** Header names are case-insensitive (a server may store them in another case). */
function sameHeaders(a: Record<string, string>, b: Record<string, string>): boolean {
  const norm = (h: Record<string, string>) =>
    Object.entries(h)
      .map(([k, v]) => `${k.toLowerCase()}\n${v}`)
      .sort();
  return sameList(norm(a), norm(b));
}

/** `https://a.example` and `https://a.example/` are the same URL. */
function normalUrl(u: string): string {
  try {
    return new URL(u).href;
  } catch {
    return u;
  }
}

const VERB: Record<Action, [string, string]> = {
  create: ["created", "would be created"],
  update: ["updated", "would be updated"],
  unchanged: ["unchanged", "unchanged"],
};

function stepText(s: Step, dryRun = false): string {
  const changes = s.action === "update" ? ` (${s.changes.join(", ")})` : "";
  const note = s.note ? `; note: ${s.note}` : "";
  return `${s.kind} ${s.id}: ${VERB[s.action][dryRun ? 1 : 0]}${changes}${note}`;
}

function report(
  ctx: Context,
  steps: Step[],
  writeKeys: Record<string, string>,
  secrets: Record<string, string>,
  dryRun: boolean,
): void {
  const count = (a: Action) => steps.filter((s) => s.action === a).length;
  const summary = { created: count("create"), updated: count("update"), unchanged: count("unchanged") };
  const kept = steps.filter((s) => s.secretKept).map((s) => s.id);
  if (ctx.out.json) {
    ctx.out.data({
      dryRun,
      summary,
      results: steps.map((s) => ({
        kind: s.kind,
        id: s.id,
        action: s.action,
        ...(s.action === "update" ? { changes: s.changes } : {}),
        ...(s.note ? { note: s.note } : {}),
      })),
      writeKeys,
      operatorWebhookSecrets: secrets,
      secretsNotCompared: kept,
    });
    return;
  }
  for (const s of steps) ctx.out.line(stepText(s, dryRun));
  const prefix = dryRun ? "Dry run, nothing was changed: would create" : "Summary:";
  ctx.out.line(
    dryRun
      ? `${prefix} ${summary.created}, update ${summary.updated}, leave ${summary.unchanged} unchanged.`
      : `${prefix} ${summary.created} created, ${summary.updated} updated, ${summary.unchanged} unchanged.`,
  );
  if (kept.length > 0) {
    ctx.out.line(
      `Shared secrets are write-only, so not compared: ${kept.join(", ")} kept the current one (--update-secrets sends the file's).`,
    );
  }
  // What the server generated for the new resources: the only time it is shown.
  const generated: [string, Record<string, string>][] = [
    ["Write keys of the new sources", writeKeys],
    ["Secrets of the new operator webhooks", secrets],
  ];
  for (const [heading, byId] of generated) {
    const entries = Object.entries(byId);
    if (entries.length === 0) continue;
    ctx.out.shownOnce(
      `${heading} (shown once, store them now)`,
      entries.map(([id, value]) => `${id}: ${value}`),
    );
  }
}
