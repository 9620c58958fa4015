import { Command } from "commander";
import type { Session } from "../context.js";
import { iso } from "../views.js";
import { oneArgumentCommand } from "./id-command.js";

/** `hookpost deletion <requestId>`: GetDeletion, how far the erasure of a deleted user is. */
export function deletionCommand(session: Session): Command {
  const cmd = new Command("deletion")
    .description(
      "show a deletion request: the sources notified, what was erased from Hookpost's stores, when done",
    )
    .argument("<requestId>", "the request id `delete-user` printed (del_…)");
  return oneArgumentCommand(session, cmd, async (requestId, ctx) => {
    const r = await ctx.admin().getDeletion({ requestId });
    const view = {
      requestId: r.requestId,
      notifiedSourceIds: r.notifiedSourceIds,
      requestTime: iso(r.requestTime),
      doneTime: iso(r.doneTime),
      erased: {
        deadLetters: Number(r.erasedDeadLetters),
        attemptRecords: Number(r.erasedAttemptRecords),
        pendingCalls: Number(r.erasedPendingCalls),
        memberships: Number(r.erasedMemberships),
      },
      passes: r.passes,
    };
    if (ctx.out.json) return ctx.out.data(view);
    ctx.out.line(`Deletion request ${view.requestId}, made ${view.requestTime}.`);
    ctx.out.line(
      view.notifiedSourceIds.length === 0
        ? "No source was notified."
        : `Notified: ${view.notifiedSourceIds.join(", ")}.`,
    );
    ctx.out.line(
      `Erased: ${view.erased.deadLetters} dead letters, ${view.erased.attemptRecords} attempt records, ${view.erased.pendingCalls} pending calls, ${view.erased.memberships} memberships.`,
    );
    ctx.out.line(
      view.doneTime ? `Done at ${view.doneTime}.` : `Still erasing (${view.passes} passes so far).`,
    );
  });
}
