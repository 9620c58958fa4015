import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Command } from "commander";
import type { Session } from "../context.js";
import { collectSequences, pointInTime, positiveInt, sequence } from "../parse.js";
import { deadLetterView, outcomeText } from "../views.js";

interface ListOptions {
  destination?: string;
  source?: string;
  limit: number;
  after?: bigint;
}

export function deadLettersCommand(session: Session): Command {
  const cmd = new Command("dead-letters").description("inspect and replay deliveries that gave up");

  cmd
    .command("list")
    .description("list dead letters, oldest first (every destination's unless --destination)")
    .option("--destination <id>", "only this destination")
    .option("--source <id>", "only calls from this source")
    .option("--limit <n>", "at most this many (1..1000)", positiveInt(1000), 100)
    .option("--after <sequence>", "only records after this sequence (to page)", sequence)
    .action(async (opts: ListOptions, command: Command) => {
      const ctx = session.context(command);
      const res = await ctx.admin().listDeadLetters({
        destinationId: opts.destination ?? "",
        sourceId: opts.source ?? "",
        pageSize: opts.limit,
        afterSequence: opts.after ?? 0n,
      });
      const list = res.deadLetters.map(deadLetterView);
      if (ctx.out.json) return ctx.out.data(list);
      // Across destinations, say whose each one is.
      const all = opts.destination === undefined;
      ctx.out.table(
        [
          "SEQ",
          ...(all ? ["DESTINATION"] : []),
          "MESSAGE ID",
          "ATTEMPTS",
          "DEAD AT",
          "REASON",
          "LAST OUTCOMES",
        ],
        list.map((d) => [
          String(d.sequence),
          ...(all ? [d.destinationId] : []),
          d.messageId,
          String(d.attempts),
          d.deadTime ?? "",
          d.reason,
          d.outcomes.map(outcomeText).join("\n"),
        ]),
        all ? "No dead letters." : `No dead letters for destination ${opts.destination}.`,
      );
      // A page may stop short of --limit (about 1 MiB of bodies) and still have more.
      if (res.nextAfterSequence > 0n) {
        ctx.out.note(`(first ${list.length}; more with --after ${res.nextAfterSequence})`);
      }
    });

  cmd
    .command("replay")
    .description(
      "deliver dead letters again (all of the destination's, a time range, or the given sequences)",
    )
    .requiredOption("--destination <id>", "the destination")
    .option("--source <id>", "only calls from this source (two sources may use the same message id)")
    .option("--sequence <n>", "replay only this record, repeatable (or 1,2,3)", collectSequences)
    .option(
      "--since <when>",
      "only those that died since then: 1h, 30m, or 2026-11-21T09:30:00Z",
      pointInTime,
    )
    .option("--until <when>", "only those that died before then (same forms)", pointInTime)
    .action(
      async (
        opts: { destination: string; source?: string; sequence?: bigint[]; since?: Date; until?: Date },
        command: Command,
      ) => {
        const ctx = session.context(command);
        const res = await ctx.admin().replayDeadLetters({
          destinationId: opts.destination,
          sourceId: opts.source ?? "",
          sequences: opts.sequence ?? [],
          ...(opts.since ? { since: timestampFromDate(opts.since) } : {}),
          ...(opts.until ? { until: timestampFromDate(opts.until) } : {}),
        });
        if (ctx.out.json) return ctx.out.data({ destinationId: opts.destination, replayed: res.replayed });
        if (res.replayed === 0) {
          const range = opts.since || opts.until ? " in that time range" : "";
          ctx.out.line(`Nothing to replay: destination ${opts.destination} has no dead letters${range}.`);
          return;
        }
        ctx.out.line(
          `Replayed ${res.replayed} dead ${res.replayed === 1 ? "letter" : "letters"} of destination ${opts.destination}.`,
        );
      },
    );

  return cmd;
}
