import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { httpStatusFilterOf, LOG_STATUS_NAMES, logStatusOf } from "@hookpost/contract";
import type { LogEntry } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { Command, InvalidArgumentError } from "commander";
import { attemptView, bytesText, excerpt, logEntryView, logInfoView, resultText } from "../attempt-views.js";
import type { Session } from "../context.js";
import { pointInTime, positiveInt } from "../parse.js";

/** Repeatable `--status failed --status dead-lettered`, or `failed,dead-lettered`. */
function collectStatuses(value: string, previous: number[] = []): number[] {
  return [
    ...previous,
    ...value.split(",").map((v) => {
      const s = logStatusOf(v);
      if (s === undefined) throw new InvalidArgumentError(`use ${LOG_STATUS_NAMES.join(", ")}`);
      return s;
    }),
  ];
}

function httpFilter(value: string): { httpStatus?: number; httpStatusClass?: number } {
  const f = httpStatusFilterOf(value);
  if (!f) throw new InvalidArgumentError("expected an HTTP status (500) or a class (5xx)");
  return f;
}

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

  cmd
    .command("search")
    .description(
      "search attempts, dead letters and filtered calls, newest first (every filter is optional; they all apply)",
    )
    .option("--destination <id>", "only this destination")
    .option("--source <id>", "only calls from this source")
    .option(
      "--status <status>",
      `only these (repeatable, or comma-separated): ${LOG_STATUS_NAMES.join(", ")}`,
      collectStatuses,
    )
    .option("--http <status>", "only this HTTP status (500) or class (5xx)", httpFilter)
    .option("--since <when>", "only since then: 1h, 30m, or 2026-11-21T09:30:00Z", pointInTime)
    .option("--until <when>", "only before then: 1h, 30m, or 2026-11-21T09:30:00Z", pointInTime)
    .option("--type <type>", "only this call type: identify, track, page, screen, group, alias, delete")
    .option("--event <name>", "only track calls of this event name (exactly)")
    .option("--user <id>", "only calls of this userId (matched through its hash)")
    .option("--message <id>", "only this message")
    .option("--limit <n>", "at most this many (1..1000)", positiveInt(1000), 50)
    .option("--page-token <token>", "the next (older) page, from a previous search with the same filters")
    .action(
      async (
        opts: {
          destination?: string;
          source?: string;
          status?: number[];
          http?: { httpStatus?: number; httpStatusClass?: number };
          since?: Date;
          until?: Date;
          type?: string;
          event?: string;
          user?: string;
          message?: string;
          limit: number;
          pageToken?: string;
        },
        command: Command,
      ) => {
        const ctx = session.context(command);
        const admin = ctx.admin();
        const entries: LogEntry[] = [];
        let token = opts.pageToken ?? "";
        let unindexed = 0n;
        // A page may end early (old records take long to read): more pages until the limit.
        do {
          const res = await admin.searchAttempts({
            destinationId: opts.destination ?? "",
            sourceId: opts.source ?? "",
            statuses: opts.status ?? [],
            ...(opts.http ?? {}),
            ...(opts.since ? { since: timestampFromDate(opts.since) } : {}),
            ...(opts.until ? { until: timestampFromDate(opts.until) } : {}),
            callType: opts.type ?? "",
            event: opts.event ?? "",
            userId: opts.user ?? "",
            messageId: opts.message ?? "",
            pageSize: opts.limit - entries.length,
            pageToken: token,
          });
          entries.push(...res.entries);
          token = res.nextPageToken;
          unindexed = res.unindexedRecords;
        } while (token !== "" && entries.length < opts.limit);
        const list = entries.map(logEntryView);
        if (ctx.out.json) {
          return ctx.out.data({ entries: list, nextPageToken: token, unindexedRecords: unindexed });
        }
        ctx.out.table(
          ["TIME", "STATUS", "HTTP", "DESTINATION", "SOURCE", "MESSAGE ID", "TYPE", "EVENT", "REASON"],
          list.map((e) => [
            e.time ?? "",
            e.status,
            e.httpStatus ? String(e.httpStatus) : "",
            e.destinationId,
            e.sourceId,
            e.messageId,
            e.callType,
            excerpt(e.event, 30),
            excerpt(e.reason, 60),
          ]),
          "Nothing in the attempt log matches.",
        );
        if (unindexed > 0n) {
          ctx.out.note(
            `(the ${unindexed} newest records are not indexed yet on this API replica: not searched)`,
          );
        }
        if (token) ctx.out.note(`(older entries: --page-token ${token})`);
      },
    );

  cmd
    .command("retention")
    .description("how long and how much the attempt log keeps, what it holds now, and its search index")
    .action(async (_opts: unknown, command: Command) => {
      const ctx = session.context(command);
      const info = logInfoView(await ctx.admin().getAttemptLogInfo({}));
      if (ctx.out.json) return ctx.out.data(info);
      const limit = info.maxBytes > 0n ? bytesText(info.maxBytes) : "none";
      ctx.out.line(
        `kept:     ${info.maxAge} (ATTEMPT_LOG_MAX_AGE), at most ${limit} (ATTEMPT_LOG_MAX_BYTES); the oldest go first`,
      );
      ctx.out.line(`holds:    ${bytesText(info.bytes)} in ${info.records} records`);
      ctx.out.line(
        info.oldestTime
          ? `reaches:  ${info.oldestTime} to ${info.newestTime}`
          : "reaches:  nothing yet (empty)",
      );
      ctx.out.line(`index:    ${bytesText(info.indexBytes)} (at most ${bytesText(info.indexMaxBytes)})`);
      if (info.unindexedRecords > 0n) ctx.out.line(`not indexed yet: ${info.unindexedRecords} records`);
    });

  return cmd;
}
