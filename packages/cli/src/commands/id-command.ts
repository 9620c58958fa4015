import type { Command } from "commander";
import type { Context, Session } from "../context.js";

/** What the help of a one-argument command says: the command, and its argument's name and meaning. */
interface OneArgument {
  description: string;
  /** `<id>`, `<userId>`: as the usage line shows it. */
  argument: string;
  about: string;
}

/** `cmd` taking one argument and no options of its own; `run` gets the argument and the call's context. */
export function oneArgumentCommand(
  session: Session,
  cmd: Command,
  spec: OneArgument,
  run: (value: string, ctx: Context) => unknown,
): Command {
  return cmd
    .description(spec.description)
    .argument(spec.argument, spec.about)
    .action(async (value: string, _opts: object, command: Command) => {
      await run(value, session.context(command));
    });
}

/** A subcommand of `parent` taking one id and no options of its own; `run` gets the id and the call's context. */
export function idCommand(
  session: Session,
  parent: Command,
  spec: { name: string; description: string; id: string },
  run: (id: string, ctx: Context) => unknown,
): void {
  const { description, id } = spec;
  oneArgumentCommand(session, parent.command(spec.name), { description, argument: "<id>", about: id }, run);
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
