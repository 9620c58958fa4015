import { DELIVERIES_STREAM } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import {
  destination,
  eventsRouted,
  type Pipeline,
  pipeline,
  publishCall,
  Receiver,
  track,
} from "./helpers.js";

/**
 * PER_USER ordering when a call is routed only in part for longer than the dedup window
 * (docs/design/delivery-at-scale.md section 4): its copy in ORDERED is stored and delivered, but
 * the call stays on EVENTS (another destination's delivery cannot be stored) and the router
 * stores it again each time it tries, once the window has passed. A later call of that user must
 * not go before then: the copy stored again would arrive after it, an older call after a newer.
 */

let p: Pipeline;
let receiver: Receiver;
const keyOf = (r: { headers: Record<string, unknown> }) => String(r.headers["idempotency-key"]);

beforeAll(async () => {
  p = await pipeline();
  receiver = await Receiver.http();
});

afterAll(async () => {
  await p?.close();
  await receiver?.close();
});

describe("PER_USER ordering while a call is routed in part", () => {
  it("never delivers a user's later call before the earlier one has left EVENTS", async () => {
    // A short dedup window (DEDUP_WINDOW): each routing attempt after it stores a new copy.
    const dispatcher = await p.dispatcher({ topology: { dedupWindowMs: 1500 } as never });
    const deliveries = await p.jsm.streams.info(DELIVERIES_STREAM);
    try {
      const sourceId = "src-reroute";
      await p.putDestination(
        destination({
          id: "reroute-ord",
          sourceIds: [sourceId],
          urls: [receiver.url("/ord")],
          ordering: "PER_USER",
        }),
      );
      await p.putDestination(
        destination({ id: "reroute-plain", sourceIds: [sourceId], urls: [receiver.url("/plain")] }),
      );
      // DELIVERIES refuses every delivery (full): the unordered destination's copy cannot be
      // stored, so both calls stay on EVENTS while their ORDERED copies are stored.
      await p.jsm.streams.update(DELIVERIES_STREAM, { ...deliveries.config, max_bytes: 1 });

      const first = track({ sourceId, userId: "u" });
      const second = track({ sourceId, userId: "u" });
      await publishCall(p.js, first);
      await publishCall(p.js, second);

      const ord = () => receiver.requests.filter((r) => r.url === "/ord").map(keyOf);
      // The first call's copy stored again after the window and sent again (a duplicate).
      await until(() => ord().filter((k) => k === first.messageId).length >= 2, {
        timeout: 30_000,
        message: "the first call stored again and sent again",
      });

      // DELIVERIES takes deliveries again: both calls are routed, everything arrives.
      await p.jsm.streams.update(DELIVERIES_STREAM, deliveries.config);
      await eventsRouted(p.jsm, sourceId);
      await until(() => ord().includes(second.messageId), { timeout: 30_000, message: "the second call" });
      await until(() => receiver.requests.filter((r) => r.url === "/plain").length >= 2, {
        message: "the unordered destination's calls",
      });
      await until(
        async () => {
          const info = await p.jsm.streams.info("HOOKPOST_ORDERED", {
            subjects_filter: "hookpost.ordered.*.reroute-ord.*",
          });
          return Object.keys(info.state.subjects ?? {}).length === 0;
        },
        { message: "ORDERED drained" },
      );

      // Duplicates may come, but never the first call after the second one was sent.
      const order = ord();
      expect(
        order.lastIndexOf(first.messageId),
        `first sent after second: ${JSON.stringify(order.map((k) => (k === first.messageId ? 1 : 2)))}`,
      ).toBeLessThan(order.indexOf(second.messageId));
    } finally {
      await p.jsm.streams.update(DELIVERIES_STREAM, deliveries.config).catch(() => {});
      await dispatcher.close();
    }
  }, 120_000);
});
