import { Command } from "commander";
import type { Session } from "../context.js";
import { collectSequences, positiveInt, sequence } from "../parse.js";
import { deadLetterView, outcomeText } from "../views.js";

export function deadLettersCommand(session: Session): Command {
  const cmd = new Command("dead-letters").description("inspect and replay deliveries that gave up");

  cmd
    .command("list")
    .description("list a destination's dead letters, oldest first")
    .requiredOption("--destination <id>", "the destination")
    .option("--limit <n>", "at most this many (1..1000)", positiveInt(1000), 100)
    .option("--after <sequence>", "only records after this sequence (to page)", sequence)
    .action(async (opts: { destination: string; limit: number; after?: bigint }, command: Command) => {
      const ctx = session.context(command);
      const res = await ctx.admin().listDeadLetters({
        destinationId: opts.destination,
        pageSize: opts.limit,
        afterSequence: opts.after ?? 0n,
      });
      const list = res.deadLetters.map(deadLetterView);
      if (ctx.out.json) return ctx.out.data(list);
      ctx.out.table(
        ["SEQ", "MESSAGE ID", "ATTEMPTS", "DEAD AT", "REASON", "LAST OUTCOMES"],
        list.map((d) => [
          String(d.sequence),
          d.messageId,
          String(d.attempts),
          d.deadTime ?? "",
          d.reason,
          d.outcomes.map(outcomeText).join("\n"),
        ]),
        `No dead letters for destination ${opts.destination}.`,
      );
      if (list.length === opts.limit) {
        ctx.out.note(`(first ${opts.limit}; more with --after ${list.at(-1)!.sequence})`);
      }
    });

  cmd
    .command("replay")
    .description("deliver dead letters again (all of the destination's, or the given sequences)")
    .requiredOption("--destination <id>", "the destination")
    .option("--sequence <n>", "replay only this record, repeatable (or 1,2,3)", collectSequences)
    .action(async (opts: { destination: string; sequence?: bigint[] }, command: Command) => {
      const ctx = session.context(command);
      const res = await ctx.admin().replayDeadLetters({
        destinationId: opts.destination,
        sequences: opts.sequence ?? [],
      });
      if (ctx.out.json) return ctx.out.data({ destinationId: opts.destination, replayed: res.replayed });
      ctx.out.line(
        `Replayed ${res.replayed} dead ${res.replayed === 1 ? "letter" : "letters"} of destination ${opts.destination}.`,
      );
    });

  return cmd;
}
