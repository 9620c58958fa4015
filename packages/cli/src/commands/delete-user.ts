import { Command } from "commander";
import type { Session } from "../context.js";
import { oneArgumentCommand } from "./id-command.js";

export function deleteUserCommand(session: Session): Command {
  const cmd = new Command("delete-user")
    .description(
      "create a deletion request for a user: every destination of the sources that saw them is told",
    )
    .argument("<userId>", "the user id");
  return oneArgumentCommand(session, cmd, async (userId, ctx) => {
    const res = await ctx.ingestAdmin().delete({ userId });
    if (ctx.out.json) return ctx.out.data({ requestId: res.requestId, sourceIds: res.sourceIds });
    ctx.out.line(`Deletion request ${res.requestId} for user ${userId}.`);
    ctx.out.line(
      res.sourceIds.length === 0
        ? "No source has seen this user: nothing to notify."
        : `Destinations of ${res.sourceIds.length === 1 ? "source" : "sources"} ${res.sourceIds.join(", ")} will be notified.`,
    );
    ctx.out.line(`Their calls are being erased from Hookpost's stores: hookpost deletion ${res.requestId}`);
  });
}
