import type { Command } from "commander";
import type { Context, Session } from "../context.js";

/**
 * `cmd` (its description and one argument declared) taking no options of its own; `run` gets the
 * argument and the call's context.
 */
export function oneArgumentCommand(
  session: Session,
  cmd: Command,
  run: (value: string, ctx: Context) => unknown,
): Command {
  return cmd.action(async (value: string, _opts: object, command: Command) => {
    await run(value, session.context(command));
  });
}

/**
 * A subcommand `name <id>` of `parent` taking no options of its own (`about` says what the id is);
 * `run` gets the id and the call's context. Returned for its description.
 */
export function idCommand(
  session: Session,
  parent: Command,
  name: string,
  about: string,
  run: (id: string, ctx: Context) => unknown,
): Command {
  return oneArgumentCommand(session, parent.command(name).argument("<id>", about), run);
}

/** `get <id>`, alike for every kind: the item as data, or printed. */
export function getCommand<T>(
  session: Session,
  parent: Command,
  kind: "source" | "destination" | "operator webhook",
  load: (ctx: Context, id: string) => Promise<T>,
  print: (ctx: Context, item: T) => void,
): Command {
  return idCommand(session, parent, "get", `${kind} id`, async (id, ctx) => {
    const item = await load(ctx, id);
    if (ctx.out.json) return ctx.out.data(item);
    print(ctx, item);
  });
}

/** `delete <id>`, alike for every kind: what was deleted, as data or as a line. */
export function deleteCommand(
  session: Session,
  parent: Command,
  kind: "source" | "destination" | "operator webhook",
  description: string,
  remove: (ctx: Context, id: string) => Promise<unknown>,
): void {
  idCommand(session, parent, "delete", `${kind} id`, async (id, ctx) => {
    await remove(ctx, id);
    if (ctx.out.json) return ctx.out.data({ deleted: id });
    ctx.out.line(`Deleted ${kind} ${id}.`);
  }).description(description);
}
