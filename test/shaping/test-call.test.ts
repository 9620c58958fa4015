import { AttemptOutcome, HttpMethod } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { beforeAll, describe, expect, it } from "vitest";
import { ok, useCliUser } from "../cli/run-cli.js";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { Receiver } from "../helpers/receiver.js";
import { STACK_ADMIN_TOKEN } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { useFixture } from "../helpers/use-fixture.js";
import { useStack } from "../helpers/use-stack.js";

/**
 * "Send test call" (issue 27): one synthetic call through the dispatcher's real path, answered
 * with its attempt; sent even to a paused destination, never retried, never a dead letter.
 */

// The receiver first: its hook closes it after the stack's.
const rx = useFixture(() => Receiver.http(), "receiver");
const stack = useStack(STACK_OPTIONS);
let src: { id: string };
const user = useCliUser(() => stack.ingest.address, STACK_ADMIN_TOKEN);

beforeAll(async () => {
  src = await stack.source("tests");
});

describe("send test call", () => {
  it("reaches a paused destination with its mapping and method, and answers with the attempt", async () => {
    const dest = await stack.destination({
      name: "paused",
      sourceIds: [src.id],
      urls: [rx.url("/test/{{ userId }}")],
      enabled: false,
      method: HttpMethod.PATCH,
      mapping: `{"e": event, "u": userId}`,
    });
    const res = await stack.admin.sendTestCall({ destinationId: dest.id, callJson: "" });
    expect(res.messageId).toMatch(/^test_/);
    expect(res.attempts).toHaveLength(1);
    expect(res.attempts[0]).toMatchObject({ outcome: AttemptOutcome.SUCCESS, status: 200 });
    const got = rx.requests.find((r) => r.headers["idempotency-key"] === res.messageId);
    expect(got?.method).toBe("PATCH");
    expect(got?.url).toBe("/test/hookpost-test");
    expect(JSON.parse(got!.body.toString())).toEqual({ e: "Hookpost Test Call", u: "hookpost-test" });
    // Still paused: a test call changes nothing.
    expect((await stack.admin.getDestination({ id: dest.id })).destination?.enabled).toBe(false);
  });

  it("a test call naming a real user is found by that user, as its deletion finds it", async () => {
    const dest = await stack.destination({ name: "user's", sourceIds: [src.id], urls: [rx.url("/user")] });
    const res = await stack.admin.sendTestCall({
      destinationId: dest.id,
      callJson: JSON.stringify({ type: "track", userId: "tested-user", event: "Checkout" }),
    });
    expect(res.attempts).toHaveLength(1);
    // The search index follows the log: waited for.
    await until(
      async () =>
        (await stack.admin.searchAttempts({ userId: "tested-user", event: "Checkout" })).entries.some(
          (e) => e.messageId === res.messageId,
        ),
      { message: "the test call's attempt found by its user and event" },
    );
  });

  it("a failing endpoint's answer comes back once: no retry, no dead letter", async () => {
    const failing = await Receiver.http();
    failing.respond = () => ({ status: 503, body: "down for maintenance" });
    try {
      const dest = await stack.destination({
        name: "failing",
        sourceIds: [src.id],
        urls: [failing.url("/down")],
      });
      const res = await stack.admin.sendTestCall({
        destinationId: dest.id,
        callJson: JSON.stringify({ type: "identify", userId: "t1", traits: { plan: "pro" } }),
      });
      expect(res.attempts).toHaveLength(1);
      expect(res.attempts[0]).toMatchObject({ outcome: AttemptOutcome.SERVER_ERROR, status: 503 });
      expect(res.attempts[0]!.responseBody).toBe("down for maintenance");
      expect(res.attempts[0]!.nextAttemptTime).toBeUndefined();
      // A later real call is delivered after the test call, and still the test call was sent once.
      failing.respond = () => ({ status: 200 });
      const later = await stack.admin.sendTestCall({ destinationId: dest.id, callJson: "" });
      expect(later.attempts.at(-1)?.outcome).toBe(AttemptOutcome.SUCCESS);
      expect(failing.requests.filter((r) => r.headers["idempotency-key"] === res.messageId)).toHaveLength(1);
      expect((await stack.admin.listDeadLetters({ destinationId: dest.id })).deadLetters).toHaveLength(0);
    } finally {
      await failing.close();
    }
  });

  it("the CLI's destinations test prints the attempt", async () => {
    const dest = await stack.destination({ name: "cli", sourceIds: [src.id], urls: [rx.url("/cli")] });
    const out = ok(await user.run(["destinations", "test", dest.id]));
    expect(out.stdout).toMatch(/^Test call test_\S+ to \S+: delivered\./);
    expect(out.stdout).toContain("200");
    const bad = await user.run(["destinations", "test", "nope"]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('destination "nope" does not exist');
  });
});
