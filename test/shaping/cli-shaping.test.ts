import { HttpMethod } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { describe, expect, it } from "vitest";
import { ok, useCliUser } from "../cli/run-cli.js";
import { Receiver } from "../helpers/receiver.js";
import { STACK_ADMIN_TOKEN } from "../helpers/stack.js";
import { useFixture } from "../helpers/use-fixture.js";
import { useStack } from "../helpers/use-stack.js";

/**
 * Shaping through the CLI (issue 27): `apply -f` with the field names of the contract, a re-apply
 * that changes nothing, and `destinations dry-run` printing the request a call would make.
 */

// The receiver first: its hook closes it after the stack's.
const rx = useFixture(() => Receiver.http(), "receiver");
const stack = useStack();
const user = useCliUser(() => stack.ingest.address, STACK_ADMIN_TOKEN);

/** An apply file: source `source` (named Web), and destination `id` of it to `url`, with the YAML lines `fields`. */
function applyFile(d: { source: string; id: string; name: string; url: string }, fields: string[]): string {
  return [
    "sources:",
    `  - { id: ${d.source}, name: Web }`,
    "destinations:",
    `  - id: ${d.id}`,
    `    name: ${d.name}`,
    `    sources: [${d.source}]`,
    `    urls: ["${d.url}"]`,
    ...fields.map((f) => `    ${f}`),
    "",
  ].join("\n");
}

describe("shaping through the CLI", () => {
  it("apply -f sets filter, mapping and method; a second apply changes nothing; dry-run prints the request", async () => {
    const file = await user.file(
      "hookpost.yaml",
      applyFile({ source: "web", id: "crm", name: "CRM", url: rx.url("/contacts/{{ userId }}") }, [
        "method: PUT",
        "filter: { types: [identify, track], events: [Signed Up], expression: 'userId != \"bot\"' }",
        `mapping: '{"id": userId, "what": type}'`,
        "retry: { window: 120m, delays: [30s, 60s] }",
      ]),
    );
    ok(await user.run(["apply", "-f", file]));
    const { destination } = await stack.admin.getDestination({ id: "crm" });
    expect(destination?.method).toBe(HttpMethod.PUT);
    expect(destination?.mapping).toBe(`{"id": userId, "what": type}`);
    expect(destination?.filter).toMatchObject({
      types: ["identify", "track"],
      events: ["Signed Up"],
      expression: `userId != "bot"`,
    });
    expect(destination?.retry?.delays.map((d) => Number(d.seconds))).toEqual([30, 60]);
    expect(Number(destination?.retry?.window?.seconds)).toBe(7200);
    const again = ok(await user.run(["apply", "-f", file, "--dry-run"]));
    expect(again.stdout).toContain("destination crm: unchanged");

    const dry = ok(
      await user.run(["destinations", "dry-run", "crm", "--call", '{"type":"identify","userId":"u 1"}']),
    );
    expect(dry.stdout).toContain(`PUT ${rx.url("/contacts/u%201")}`);
    expect(dry.stdout).toContain(`{"id":"u 1","what":"identify"}`);
    const filtered = ok(
      await user.run(["destinations", "dry-run", "crm", "--call", '{"type":"identify","userId":"bot"}']),
    );
    expect(filtered.stdout).toContain("Filtered: filter: expression");
    const json = ok(
      await user.run(["--json", "destinations", "dry-run", "crm", "--call", '{"type":"page","userId":"u"}']),
    );
    expect(JSON.parse(json.stdout)).toMatchObject({
      id: "crm",
      requests: [],
      filteredReason: "filter: type",
    });
  });

  it("apply -f refuses an expression that does not compile, naming the file's path", async () => {
    const file = await user.file(
      "bad.yaml",
      applyFile({ source: "web2", id: "bad", name: "Bad", url: rx.url("/bad") }, ["mapping: '{\"a\": '"]),
    );
    const r = await user.run(["apply", "-f", file]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/mapping.*position \d+/);
  });
});
