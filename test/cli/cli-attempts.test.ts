import { describe, expect, it } from "vitest";

import { Receiver } from "../helpers/receiver.js";
import { until } from "../helpers/until.js";
import { failed, hookpost, stackWithFailingReceiver } from "./run-cli.js";

// A new user with one failing destination, from the CLI alone (a real process against a real
// stack): every attempt, why it failed, when the next one is, the message's story, the
// destination's health; then dead letters across destinations and a replay by time range.
// Each test spawns a dozen CLI processes: on a loaded machine that takes a while.

const t = stackWithFailingReceiver({ status: 500, body: '{"error":"database unavailable"}' });

describe("seeing deliveries from the CLI", () => {
  it("attempts list, messages show and destinations health explain a failing destination", async () => {
    const src = await t.stack.source("shop");
    await t.stack.destination({ id: "crm", name: "CRM", sourceIds: [src.id], urls: [t.failing.url()] });
    const { messageId } = await src.client.track({ userId: "u-1", event: "Order Completed" });
    await t.failing.waitFor(1);
    await until(async () => {
      const r = await hookpost(["--json", "attempts", "list", "--destination", "crm"], t.env);
      return r.code === 0 && (JSON.parse(r.stdout) as { attempts: unknown[] }).attempts.length === 1;
    });

    const table = (await t.cli(["attempts", "list", "--destination", "crm", "--failed", "--since", "1h"]))
      .stdout;
    expect(table).toMatch(
      /^TIME\s+DESTINATION\s+MESSAGE ID\s+#\s+RESULT\s+MS\s+REASON\s+NEXT ATTEMPT\s+RESPONSE$/m,
    );
    expect(table).toMatch(new RegExp(`crm\\s+${messageId}\\s+1\\s+500\\s+\\d+\\s+500 is retried\\s+\\d{4}-`));
    expect(table).toContain('{"error":"database unavailable"}');
    const json = JSON.parse((await t.cli(["--json", "attempts", "list", "--destination", "crm"])).stdout) as {
      attempts: { reason: string; nextAttemptTime: string; responseBody: string; outcome: string }[];
    };
    expect(json.attempts[0]).toMatchObject({ reason: "500 is retried", outcome: "server-error" });
    expect(Date.parse(json.attempts[0]!.nextAttemptTime)).toBeGreaterThan(Date.now());

    const story = (await t.cli(["messages", "show", messageId])).stdout;
    expect(story).toMatch(new RegExp(`^Message:\\s+${messageId}$`, "m"));
    expect(story).toMatch(/^crm\s+retrying\s+1\s+\d{4}-/m);
    expect(story).toContain("500 is retried");
    expect(story).toContain('"event":"Order Completed"');

    const health = (await t.cli(["destinations", "health", "crm"])).stdout;
    expect(health).toMatch(/^State:\s+failing$/m);
    expect(health).toMatch(/^Backlog:\s+1\b/m);
    expect(health).toMatch(/^Last failure:\s+\d{4}-.*: 500 is retried$/m);
    expect(health).toMatch(/^Consecutive failures:\s+1$/m);
    expect(health).toMatch(/^Next retry:\s+\d{4}-/m);
    // One failure: far from opening the breaker.
    expect(health).toMatch(/^Breaker:\s+closed$/m);
    const all = (await t.cli(["destinations", "health"])).stdout;
    expect(all).toMatch(/^crm\s+failing\s+1\s+0\/1\s+0\/1\s+0%\s+1\s+closed\s+500 is retried\s+\d{4}-/m);
  }, 180_000);

  it("dead letters across destinations, replay by time range, clear errors for unknown ids", async () => {
    const src = await t.stack.source("dead");
    const gone = await Receiver.http();
    try {
      gone.respond = () => ({ status: 422, body: "bad" });
      await t.stack.destination({ id: "dl-one", sourceIds: [src.id], urls: [gone.url()] });
      await t.stack.destination({ id: "dl-two", sourceIds: [src.id], urls: [gone.url()] });
      await src.client.track({ userId: "u", event: "Rejected" });
      await until(async () => {
        const r = await hookpost(["--json", "dead-letters", "list"], t.env);
        return (
          (JSON.parse(r.stdout) as { destinationId: string }[]).filter((d) =>
            d.destinationId.startsWith("dl-"),
          ).length === 2
        );
      });
      const list = (await t.cli(["dead-letters", "list"])).stdout;
      expect(list).toMatch(/^SEQ\s+DESTINATION\s+MESSAGE ID/m);
      expect(list).toMatch(
        /^\d+\s+dl-one\s+\S+\s+1\s+\S+\s+422 is not retried\s+http:\S+ → 422 is not retried$/m,
      );
      expect(list).toMatch(/\bdl-two\b/);

      gone.respond = () => ({ status: 200 });
      // Nothing died in the future.
      const none = await t.cli([
        "dead-letters",
        "replay",
        "--destination",
        "dl-one",
        "--since",
        "2099-01-01T00:00:00Z",
      ]);
      expect(none.stdout).toBe(
        "Nothing to replay: destination dl-one has no dead letters in that time range.\n",
      );
      const replayed = await t.cli(["dead-letters", "replay", "--destination", "dl-one", "--since", "1h"]);
      expect(replayed.stdout).toBe("Replayed 1 dead letter of destination dl-one.\n");
      await gone.waitFor(3);

      expect(failed(await hookpost(["dead-letters", "list", "--destination", "nope"], t.env), 1)).toContain(
        'destination "nope" does not exist',
      );
      expect(
        failed(
          await hookpost(
            ["dead-letters", "replay", "--destination", "dl-two", "--sequence", "999999"],
            t.env,
          ),
          1,
        ),
      ).toContain("no dead letter of destination");
      expect(failed(await hookpost(["messages", "show", "never-sent"], t.env), 1)).toContain(
        'no record of message "never-sent"',
      );
      const noHealth = await hookpost(["destinations", "health", "nope"], t.env);
      expect(noHealth.code).toBe(1);
    } finally {
      await gone.close();
    }
  }, 180_000);
  it("two sources, one message id: messages show asks for --source, attempts, dead letters and replay take it", async () => {
    const a = await t.stack.source("dup-a");
    const b = await t.stack.source("dup-b");
    const shared = await Receiver.http();
    try {
      shared.respond = () => ({ status: 422 });
      await t.stack.destination({ id: "dup", sourceIds: [a.id, b.id], urls: [shared.url()] });
      const messageId = "cli-same-id";
      await a.client.track({ messageId, userId: "u-a", event: "From A" });
      await b.client.track({ messageId, userId: "u-b", event: "From B" });
      await until(async () => {
        const r = await hookpost(["--json", "dead-letters", "list", "--destination", "dup"], t.env);
        return r.code === 0 && (JSON.parse(r.stdout) as unknown[]).length === 2;
      });

      const ambiguous = await hookpost(["messages", "show", messageId], t.env);
      expect(ambiguous.code).toBe(1);
      expect(ambiguous.stderr).toContain(a.id);
      expect(ambiguous.stderr).toContain(b.id);
      const ofB = (await t.cli(["messages", "show", messageId, "--source", b.id])).stdout;
      expect(ofB).toMatch(new RegExp(`^Source:\\s+${b.id}$`, "m"));
      expect(ofB).toContain('"event":"From B"');
      expect(ofB).not.toContain("From A");
      const attempts = JSON.parse(
        (await t.cli(["--json", "attempts", "list", "--destination", "dup", "--source", a.id])).stdout,
      ) as { attempts: { sourceId: string; requestBody: string }[] };
      expect(attempts.attempts.map((x) => x.sourceId)).toEqual([a.id]);
      const letters = JSON.parse(
        (await t.cli(["--json", "dead-letters", "list", "--destination", "dup", "--source", b.id])).stdout,
      ) as { sourceId: string }[];
      expect(letters.map((l) => l.sourceId)).toEqual([b.id]);

      shared.respond = () => ({ status: 200 });
      const before = shared.requests.length;
      const replayed = await t.cli(["dead-letters", "replay", "--destination", "dup", "--source", a.id]);
      expect(replayed.stdout).toBe("Replayed 1 dead letter of destination dup.\n");
      await shared.waitFor(before + 1);
      expect(JSON.parse(shared.requests[before]!.body.toString())).toMatchObject({ event: "From A" });
      const left = JSON.parse(
        (await t.cli(["--json", "dead-letters", "list", "--destination", "dup"])).stdout,
      ) as {
        sourceId: string;
      }[];
      expect(left.map((l) => l.sourceId)).toEqual([b.id]);
    } finally {
      await shared.close();
    }
  }, 180_000);
});
