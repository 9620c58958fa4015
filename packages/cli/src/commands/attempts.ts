import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Command } from "commander";
import { attemptView, excerpt, resultText } from "../attempt-views.js";
import type { Session } from "../context.js";
import { pointInTime, positiveInt } from "../parse.js";

export function attemptsCommand(session: Session): Command {
  const cmd = new Command("attempts").description("the attempt log: every webhook request and why it failed");

  cmd
    .command("list")
    .description("list attempts, newest first")
    .option("--destination <id>", "only this destination")
    .option("--message <id>", "only this message")
    .option("--source <id>", "only calls from this source")
    .option("--failed", "only attempts that did not deliver")
    .option("--since <when>", "only attempts since then: 1h, 30m, or 2026-11-21T09:30:00Z", pointInTime)
    .option("--limit <n>", "at most this many (1..1000)", positiveInt(1000), 50)
    .option("--page-token <token>", "the next (older) page, from a previous listing")
    .action(
      async (
        opts: {
          destination?: string;
          message?: string;
          source?: string;
          failed?: boolean;
          since?: Date;
          limit: number;
          pageToken?: string;
        },
        command: Command,
      ) => {
        const ctx = session.context(command);
        const res = await ctx.admin().listAttempts({
          destinationId: opts.destination ?? "",
          messageId: opts.message ?? "",
          sourceId: opts.source ?? "",
          failedOnly: Boolean(opts.failed),
          pageSize: opts.limit,
          pageToken: opts.pageToken ?? "",
          ...(opts.since ? { since: timestampFromDate(opts.since) } : {}),
        });
        const list = res.attempts.map(attemptView);
        if (ctx.out.json) return ctx.out.data({ attempts: list, nextPageToken: res.nextPageToken });
        ctx.out.table(
          ["TIME", "DESTINATION", "MESSAGE ID", "#", "RESULT", "MS", "REASON", "NEXT ATTEMPT", "RESPONSE"],
          list.map((a) => [
            a.startTime ?? "",
            a.destinationId,
            a.messageId,
            String(a.attempt),
            resultText(a),
            String(a.durationMs),
            a.reason,
            a.nextAttemptTime ?? "",
            excerpt(a.responseBody, 40),
          ]),
          "No attempts recorded.",
        );
        if (res.nextPageToken) ctx.out.note(`(older attempts: --page-token ${res.nextPageToken})`);
      },
    );

  return cmd;
}
