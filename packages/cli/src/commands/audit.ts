import { Command } from "commander";
import { actorText, auditView, changesText } from "../audit-views.js";
import type { Session } from "../context.js";
import { positiveInt } from "../parse.js";

export function auditCommand(session: Session): Command {
  const cmd = new Command("audit").description(
    "the audit log: who changed what through the admin API, and when (read-only)",
  );

  cmd
    .command("list")
    .description("list admin writes, newest first (secrets and header values are redacted)")
    .option("--resource <id>", "only calls about this source or destination")
    .option("--limit <n>", "at most this many (1..1000)", positiveInt(1000), 100)
    .option("--page-token <token>", "the next (older) page, from a previous listing")
    .action(async (opts: { resource?: string; limit: number; pageToken?: string }, command: Command) => {
      const ctx = session.context(command);
      const res = await ctx.admin().listAuditRecords({
        resourceId: opts.resource ?? "",
        pageSize: opts.limit,
        pageToken: opts.pageToken ?? "",
      });
      const list = res.records.map(auditView);
      if (ctx.out.json) return ctx.out.data({ records: list, nextPageToken: res.nextPageToken });
      ctx.out.table(
        ["TIME", "ACTOR", "ACTION", "RESOURCE", "OUTCOME", "REVISION", "WHAT"],
        list.map((r) => [
          r.time ?? "",
          actorText(r.actor),
          r.action,
          r.resourceType ? `${r.resourceType} ${r.resourceId}` : r.resourceId,
          r.outcome,
          r.revision === 0n ? "" : String(r.revision),
          changesText(r),
        ]),
        opts.resource ? `No audit records for ${opts.resource}.` : "No audit records.",
      );
      if (res.nextPageToken) ctx.out.note(`(older records: --page-token ${res.nextPageToken})`);
    });

  return cmd;
}
