import { beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { failed, hookpost, stackWithFailingReceiver } from "./run-cli.js";

// `hookpost attempts search` and `attempts retention` as a real process against a real stack
// (issue 28): the issue's own example, the JSON form, older pages, and clear errors.

const t = stackWithFailingReceiver({ status: 503, body: "maintenance" });
const ids: Record<string, string> = {};

beforeAll(async () => {
  const src = await t.stack.source("shop");
  await t.stack.destination({ id: "crm", sourceIds: [src.id], urls: [t.failing.url()] });
  await t.stack.destination({ id: "ok", sourceIds: [src.id] });
  // One at a time, each delivered to "ok" before the next is sent: u1 and u2 are different users,
  // so their deliveries may otherwise end in either order, and the search lists the newest first.
  const send = async (userId: string, event: string) => {
    const { messageId } = await src.client.track({ userId, event });
    await until(
      async () =>
        (await t.stack.admin.searchAttempts({ messageId, destinationId: "ok" })).entries.length === 1,
      { message: `${messageId} delivered to ok` },
    );
    return messageId;
  };
  ids.u1 = await send("u1", "Order Completed");
  ids.u2 = await send("u2", "Order Completed");
  ids.other = await send("u1", "Signed Up");
  await until(async () => (await t.stack.admin.searchAttempts({})).entries.length === 6, {
    message: "every attempt in the log",
  });
}, 120_000);

describe("hookpost attempts search", () => {
  it("finds a user's failed orders of the last hour, as a table and as JSON", async () => {
    const args = [
      "attempts",
      "search",
      "--status",
      "failed",
      "--since",
      "1h",
      "--event",
      "Order Completed",
      "--user",
      "u1",
    ];
    const table = (await t.cli(args)).stdout;
    expect(table).toMatch(
      /^TIME\s+STATUS\s+HTTP\s+DESTINATION\s+SOURCE\s+MESSAGE ID\s+TYPE\s+EVENT\s+REASON$/m,
    );
    const rows = table.trim().split("\n").slice(1);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatch(
      new RegExp(`failed\\s+503\\s+crm\\s+\\S+\\s+${ids.u1}\\s+track\\s+Order Completed\\s+503 is retried`),
    );

    const json = JSON.parse((await t.cli(["--json", ...args])).stdout) as {
      entries: { messageId: string; status: string; httpStatus: number; attempt: { responseBody: string } }[];
      nextPageToken: string;
      unindexedRecords: string;
    };
    expect(json.entries).toEqual([
      expect.objectContaining({
        messageId: ids.u1,
        status: "failed",
        httpStatus: 503,
        attempt: expect.objectContaining({ responseBody: "maintenance" }),
      }),
    ]);
    expect(json.nextPageToken).toBe("");

    // Several statuses, an HTTP class, and the newest first.
    const all = JSON.parse(
      (
        await t.cli([
          "--json",
          "attempts",
          "search",
          "--status",
          "failed,delivered",
          "--http",
          "2xx",
          "--type",
          "track",
        ])
      ).stdout,
    ) as { entries: { messageId: string; destinationId: string }[] };
    expect(all.entries.map((e) => `${e.messageId} ${e.destinationId}`)).toEqual([
      `${ids.other} ok`,
      `${ids.u2} ok`,
      `${ids.u1} ok`,
    ]);
  }, 120_000);

  it("pages with --limit and --page-token, and shows the log's retention", async () => {
    const first = await t.cli(["attempts", "search", "--limit", "4"]);
    expect(first.stdout.trim().split("\n")).toHaveLength(5);
    const token = /--page-token (\S+)\)/.exec(first.stderr + first.stdout)?.[1];
    expect(token).toBeDefined();
    const rest = await t.cli(["attempts", "search", "--limit", "4", "--page-token", token!]);
    expect(rest.stdout.trim().split("\n")).toHaveLength(3);

    const retention = (await t.cli(["attempts", "retention"])).stdout;
    expect(retention).toMatch(
      /^kept:\s+3d \(ATTEMPT_LOG_MAX_AGE\), at most 1\.0 GiB \(ATTEMPT_LOG_MAX_BYTES\); the oldest go first$/m,
    );
    expect(retention).toMatch(/^holds:\s+[\d.]+ KiB in \d+ records$/m);
    expect(retention).toMatch(/^reaches:\s+\d{4}-\S+ to \d{4}-/m);
    const info = JSON.parse((await t.cli(["--json", "attempts", "retention"])).stdout) as {
      maxAge: string;
      records: string;
    };
    expect(info.maxAge).toBe("3d");
    expect(Number(info.records)).toBeGreaterThan(6);
  }, 120_000);

  it("says what is wrong with a flag, an unknown destination, or a token of another search", async () => {
    expect(failed(await hookpost(["attempts", "search", "--status", "lost"], t.env), 2)).toContain(
      "use delivered, failed, filtered, dead-lettered",
    );
    expect(failed(await hookpost(["attempts", "search", "--http", "5x"], t.env), 2)).toContain(
      "expected an HTTP status (500) or a class (5xx)",
    );
    expect(failed(await hookpost(["attempts", "search", "--destination", "nope"], t.env), 1)).toContain(
      'destination "nope" does not exist',
    );
    const first = JSON.parse((await t.cli(["--json", "attempts", "search", "--limit", "1"])).stdout) as {
      nextPageToken: string;
    };
    expect(
      failed(
        await hookpost(
          ["attempts", "search", "--status", "failed", "--page-token", first.nextPageToken],
          t.env,
        ),
        1,
      ),
    ).toContain("belongs to a search with other filters");
  }, 120_000);
});
