import type { Command } from "commander";
import type { Context, Session } from "../context.js";

/** A subcommand of `parent` taking one id and no options of its own; `run` gets the id and the call's context. */
export function idCommand(
  session: Session,
  parent: Command,
  spec: { name: string; description: string; id: string },
  run: (id: string, ctx: Context) => unknown,
): void {
  parent
    .command(spec.name)
    .description(spec.description)
    .argument("<id>", spec.id)
    .action(async (id: string, _opts: object, command: Command) => {
      await run(id, session.context(command));
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
  idCommand(session, parent, { name: "delete", description, id: `${kind} id` }, async (id, ctx) => {
    await remove(ctx, id);
    if (ctx.out.json) return ctx.out.data({ deleted: id });
    ctx.out.line(`Deleted ${kind} ${id}.`);
  });
}
