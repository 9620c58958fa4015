import { filteredText } from "@hookpost/contract";
import { Command } from "commander";
import { excerpt, messageView, resultText } from "../attempt-views.js";
import type { Session } from "../context.js";

export function messagesCommand(session: Session): Command {
  const cmd = new Command("messages").description("follow one message through every destination");

  cmd
    .command("show")
    .description("where a message went, every attempt, and where each delivery stands")
    .argument("<message-id>", "the call's message id")
    .option("--source <id>", "when several sources used the same message id")
    .action(async (messageId: string, opts: { source?: string }, command: Command) => {
      const ctx = session.context(command);
      const res = await ctx.admin().getMessage({ messageId, sourceId: opts.source ?? "" });
      const m = messageView(res);
      if (ctx.out.json) return ctx.out.data(m);
      ctx.out.fields([
        ["Message", m.messageId],
        ["Source", m.sourceId],
        ["Received", m.receivedTime ?? "(unknown)"],
      ]);
      ctx.out.line();
      if (m.noDestination) ctx.out.line("No destination: the source had no destination when it was routed.");
      else {
        ctx.out.table(
          ["DESTINATION", "STATE", "ATTEMPTS", "NEXT ATTEMPT", "DEAD LETTER"],
          m.deliveries.map((d) => [
            d.destinationId,
            d.state === "filtered" ? filteredText(d.filterReason ?? undefined) : d.state,
            String(d.attempts),
            d.nextAttemptTime ?? "",
            d.deadLetterSequence === null ? "" : `seq ${d.deadLetterSequence}`,
          ]),
          "No deliveries recorded.",
        );
      }
      if (m.attempts.length > 0) {
        ctx.out.line();
        ctx.out.table(
          ["TIME", "DESTINATION", "#", "URL", "RESULT", "MS", "REASON", "RESPONSE"],
          m.attempts.map((a) => [
            a.startTime ?? "",
            a.destinationId,
            String(a.attempt),
            a.url,
            resultText(a),
            String(a.durationMs),
            a.reason,
            excerpt(a.responseBody, 40),
          ]),
          "",
        );
      }
      if (res.attemptsTruncated) {
        const source = `--source ${res.sourceId}`;
        ctx.out.note(`(older attempts left out: hookpost attempts list --message ${messageId} ${source})`);
      }
      if (m.body) {
        ctx.out.line();
        ctx.out.line("Body:");
        ctx.out.line(m.body);
      }
    });

  return cmd;
}
