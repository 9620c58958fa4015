import { Command } from "commander";
import { breakerText, healthView } from "../attempt-views.js";
import type { Session } from "../context.js";
import { everyItem } from "../pages.js";

const pct = (rate: number, attempts: number) => (attempts === 0 ? "-" : `${Math.round(rate * 1000) / 10}%`);
const perSecond = (n: number) => (Math.round(n * 100) / 100).toString();

/** `hookpost destinations health [id]`: is each destination keeping up, and if not, why. */
export function destinationHealthCommand(session: Session): Command {
  return new Command("health")
    .description("backlog, deliveries and failures, last failure, next retry and breaker, per destination")
    .argument("[id]", "one destination (default: all)")
    .action(async (id: string | undefined, _opts: object, command: Command) => {
      const ctx = session.context(command);
      const all = await everyItem(
        (pageToken) => ctx.admin().listDestinationHealth({ destinationId: id ?? "", pageToken }),
        (r) => r.destinations,
      );
      const list = all.map(healthView);
      if (ctx.out.json) return ctx.out.data(id ? list[0] : list);
      if (id && list[0]) {
        const h = list[0];
        ctx.out.fields([
          ["Destination", `${h.destinationId} (${h.name})`],
          ["State", h.disabledReason ? `${h.state}: ${h.disabledReason}` : h.state],
          [
            "Backlog",
            `${h.backlog}${h.oldestWaitingTime ? `, oldest waiting since ${h.oldestWaitingTime}` : ""}`,
          ],
          ["Last 5 min", `${h.deliveries5m} delivered, ${h.failures5m} failed`],
          [
            "Last hour",
            `${h.deliveries1h} delivered, ${h.failures1h} failed, success ${pct(h.successRate1h, h.deliveries1h + h.failures1h)}`,
          ],
          [
            "Rate (1 min)",
            `${perSecond(h.incomingPerSecond)}/s in, ${perSecond(h.deliveredPerSecond)}/s delivered`,
          ],
          ["Last success", h.lastSuccessTime ?? "-"],
          ["Last failure", h.lastFailureTime ? `${h.lastFailureTime}: ${h.lastFailureReason}` : "-"],
          ["Consecutive failures", String(h.consecutiveFailures)],
          ["Next retry", h.nextRetryTime ?? "-"],
          [
            "Breaker",
            h.breakerReplicas > 0
              ? `${breakerText(h)} (${h.breakerReplicas} ${h.breakerReplicas === 1 ? "replica" : "replicas"})`
              : breakerText(h),
          ],
        ]);
        return;
      }
      ctx.out.table(
        [
          "DESTINATION",
          "STATE",
          "BACKLOG",
          "5M OK/FAIL",
          "1H OK/FAIL",
          "SUCCESS",
          "FAILS IN A ROW",
          "BREAKER",
          "LAST FAILURE",
          "NEXT RETRY",
        ],
        list.map((h) => [
          h.destinationId,
          h.state,
          String(h.backlog),
          `${h.deliveries5m}/${h.failures5m}`,
          `${h.deliveries1h}/${h.failures1h}`,
          pct(h.successRate1h, h.deliveries1h + h.failures1h),
          String(h.consecutiveFailures),
          breakerText(h),
          h.lastFailureReason,
          h.nextRetryTime ?? "",
        ]),
        "No destinations.",
      );
    });
}
