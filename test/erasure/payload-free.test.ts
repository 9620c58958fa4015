import { DeadLetters } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { Receiver } from "../helpers/receiver.js";
import { type IngestClient, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

/*
 * DEAD_LETTER_BODIES=off (issue 26, retention): dead letters keep their metadata but no body; a
 * replay takes the body from the call's routing record in the attempt log (ATTEMPT_LOG_BODIES on),
 * and skips a letter whose body is nowhere (both off).
 */

let stack: Stack;
let src: { id: string; client: IngestClient };
let receiver: Receiver;
let dead: DeadLetters;

beforeAll(async () => {
  stack = await Stack.start({ dispatcher: { ...STACK_OPTIONS.dispatcher, deadLetterBodies: false } });
  receiver = await Receiver.http();
  receiver.respond = () => ({ status: 400 });
  src = await stack.source("payload-free");
  dead = await DeadLetters.open(stack.nc);
});

afterAll(async () => {
  await stack?.close();
  await receiver?.close();
});

describe("dead letters without bodies", () => {
  it("keep metadata only, and replay with the body from the attempt log", async () => {
    const d = await stack.destination({ id: "refusing", sourceIds: [src.id], urls: [receiver.url()] });
    const sent = await src.client.track({
      userId: "u1",
      event: "Secret",
      properties: { card: "4111-payload" },
    });
    const [letter] = await until(async () => {
      const l = await dead.list(d.id);
      return l.length === 1 ? l : undefined;
    });
    expect(letter).toMatchObject({
      messageId: sent.messageId,
      body: "",
      bodyOmitted: true,
      reason: expect.any(String),
    });
    expect(JSON.stringify(letter)).not.toContain("4111-payload");
    const listed = await stack.admin.listDeadLetters({ destinationId: d.id });
    expect(listed.deadLetters.map((l) => [l.body, l.bodyOmitted])).toEqual([["", true]]);

    receiver.respond = () => ({ status: 200 });
    const before = receiver.requests.length;
    const r = await stack.admin.replayDeadLetters({ destinationId: d.id });
    expect(r.replayed).toBe(1);
    await receiver.waitFor(before + 1);
    expect(receiver.requests.at(-1)!.body.toString()).toContain("4111-payload");
  });

  it("skip a letter whose body the attempt log did not keep either", async () => {
    const other = await stack.addDispatcher({ deadLetterBodies: false, attemptLogBodies: false });
    // Only the replica without bodies anywhere: the first one leaves.
    const first = stack.dispatchers.shift()!;
    await first.close();
    receiver.respond = () => ({ status: 400 });
    const d = await stack.destination({ id: "refusing-2", sourceIds: [src.id], urls: [receiver.url("/2")] });
    await src.client.track({ userId: "u2", event: "Secret" });
    await until(async () => (await dead.list(d.id)).length === 1);
    expect((await stack.admin.replayDeadLetters({ destinationId: d.id })).replayed).toBe(0);
    expect(other).toBeDefined();
  });
});
