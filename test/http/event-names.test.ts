import { randomUUID } from "node:crypto";
import { MAX_LOGGED_EVENT_CHARS } from "@hookpost/core";
import { describe, expect, it } from "vitest";
import { STACK_OPTIONS, settledCount } from "../e2e/helpers.js";
import { receiverLane } from "../helpers/receiver-lane.js";
import { until } from "../helpers/until.js";
import { useStack } from "../helpers/use-stack.js";
import { post } from "./helpers.js";

/**
 * Event names are free text: JSON may carry half a surrogate pair (`\ud83d`), and a long name may
 * have a pair where records cut it. Accepted means delivered: the router writes the name into a
 * delivery header (percent-encoded, which refuses lone halves), and a call it could not head was
 * handed back every 5 s, never delivered.
 */

const stack = useStack({ ...STACK_OPTIONS, ingest: { httpAddress: "127.0.0.1:0" } });

describe("event names", () => {
  it("a lone surrogate, or a pair at the logged cut, is delivered once as sent and searchable as kept", async () => {
    const lane = await receiverLane(stack, "event-names");
    try {
      const cutAt = "a".repeat(MAX_LOGGED_EVENT_CHARS - 1);
      const names = ["sign \ud83d up", `${cutAt}😀 and more`];
      const sent = new Map<string, string>();
      for (const event of names) {
        const messageId = randomUUID();
        // JSON.stringify writes the lone half as the escape `\ud83d`, as an SDK's JSON may.
        const r = await post(
          `http://${stack.ingest.httpAddress}`,
          "/v1/track",
          { userId: "u-names", event, messageId },
          { writeKey: lane.writeKey },
        );
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        sent.set(messageId, event);
      }
      await lane.rx.waitFor(sent.size, 30_000);
      expect(await settledCount(lane.rx, 1_000)).toBe(sent.size);
      for (const r of lane.rx.requests) {
        const id = r.headers["idempotency-key"] as string;
        expect((JSON.parse(r.body.toString("utf8")) as { event: string }).event).toBe(sent.get(id));
      }
      // The attempt log keeps the name well-formed and cut outside the pair.
      let events: string[] = [];
      await until(async () => {
        events = (await stack.admin.searchAttempts({ sourceId: lane.id })).entries.map((e) => e.event);
        return events.length === sent.size;
      });
      expect(events.sort()).toEqual([cutAt, "sign \ufffd up"].sort());
      expect((await stack.admin.searchAttempts({ event: `${cutAt}😀 and more` })).entries).toHaveLength(1);
    } finally {
      await lane.rx.close();
    }
  });
});
