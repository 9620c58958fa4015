import { Command, Option } from "commander";
import type { Context, Session } from "../context.js";
import { UsageError } from "../errors.js";
import { everyItem } from "../pages.js";
import { collect } from "../parse.js";
import { type SourceView, sourceView } from "../views.js";
import { deleteCommand, getCommand, idCommand } from "./id-command.js";
import { idOption } from "./switch-flags.js";

export function sourcesCommand(session: Session): Command {
  const cmd = new Command("sources").description("manage sources (each has a write key)");

  cmd
    .command("create")
    .description("create a source and print its write key (shown once)")
    .argument("<name>", "a name for people")
    .addOption(idOption("source"))
    .addOption(allowedOriginOption())
    .action(async (name: string, opts: { id?: string; allowedOrigin?: string[] }, command: Command) => {
      const ctx = session.context(command);
      const res = await ctx
        .admin()
        .createSource({ name, id: opts.id ?? "", allowedOrigins: opts.allowedOrigin ?? [] });
      const source = sourceView(res.source!);
      if (ctx.out.json) return ctx.out.data({ source, writeKey: res.writeKey });
      ctx.out.line(`Created source ${source.id} ("${source.name}").`);
      printWriteKey(ctx, res.writeKey);
    });

  cmd
    .command("list")
    .description("list sources")
    .action(async (_opts: object, command: Command) => {
      const ctx = session.context(command);
      const all = await everyItem(
        (pageToken) => ctx.admin().listSources({ pageToken }),
        (r) => r.sources,
      );
      ctx.out.list(
        all.map(sourceView),
        ["ID", "NAME", "KEY PREFIX", "CREATED"],
        (s) => [s.id, s.name, `${s.writeKeyPrefix}…`, s.createTime ?? ""],
        "No sources. Create one with: hookpost sources create <name>",
      );
    });

  getCommand(
    session,
    cmd,
    "source",
    async (ctx, id) => sourceView((await ctx.admin().getSource({ id })).source!),
    printSource,
  ).description("show a source");

  cmd
    .command("update")
    .description("change a source's name or allowed origins; only the flags given change")
    .argument("<id>", "source id")
    .option("--name <name>", "a new name")
    .addOption(allowedOriginOption(" (replaces the list)"))
    .addOption(
      new Option("--any-origin", "allow browsers on any web site again (empties the list)").conflicts(
        "allowedOrigin",
      ),
    )
    .action(
      async (
        id: string,
        opts: { name?: string; allowedOrigin?: string[]; anyOrigin?: boolean },
        command: Command,
      ) => {
        const paths: string[] = [];
        if (opts.name !== undefined) paths.push("name");
        if (opts.allowedOrigin !== undefined || opts.anyOrigin) paths.push("allowed_origins");
        if (paths.length === 0)
          throw new UsageError("nothing to change: give --name, --allowed-origin or --any-origin");
        const ctx = session.context(command);
        const res = await ctx.admin().updateSource({
          source: { id, name: opts.name ?? "", allowedOrigins: opts.allowedOrigin ?? [] },
          updateMask: { paths },
        });
        const s = sourceView(res.source!);
        ctx.out.written(s, `Updated source ${s.id}.`, () => printSource(ctx, s));
      },
    );

  deleteCommand(session, cmd, "source", "delete a source; its write key stops working", (ctx, id) =>
    ctx.admin().deleteSource({ id }),
  );

  idCommand(session, cmd, "rotate-key", "source id", async (id, ctx) => {
    const res = await ctx.admin().rotateWriteKey({ id });
    const source = sourceView(res.source!);
    if (ctx.out.json) return ctx.out.data({ source, writeKey: res.writeKey });
    ctx.out.line(`New write key for source ${source.id}; the previous key no longer works.`);
    printWriteKey(ctx, res.writeKey);
  }).description("issue a new write key for a source; the old one stops working at once");

  return cmd;
}

function allowedOriginOption(suffix = ""): Option {
  return new Option(
    "--allowed-origin <origin>",
    `a web origin whose browsers may send this source's calls, e.g. https://shop.example.com or https://*.example.com; repeatable; none: any origin${suffix}`,
  ).argParser(collect);
}

function printSource(ctx: Context, s: SourceView): void {
  ctx.out.fields([
    ["id", s.id],
    ["name", s.name],
    ["write key", `${s.writeKeyPrefix}… (only the prefix is kept)`],
    ["created", s.createTime ?? ""],
    ["allowed origins", s.allowedOrigins.length === 0 ? "any" : s.allowedOrigins.join(", ")],
  ]);
}

/** The one time a write key is shown: set apart so nobody misses it. */
export function printWriteKey(ctx: Context, writeKey: string, label = "Write key"): void {
  ctx.out.shownOnce(`${label} (shown once, store it now)`, [writeKey]);
}
