import { beforeAll, describe, expect, it } from "vitest";
import { counterValue } from "../e2e/helpers.js";
import {
  type FloodTarget,
  underFlood as flood,
  floodTarget,
  type RealAnswer,
} from "../helpers/http-flood.js";
import { useHarness } from "../ingest/harness.js";

// Issue 22 finding 8: ~1 100 connections trickling bytes held every slot of the HTTP port,
// and 0-1 of 36 real requests got through. Default limits throughout: the test is about them.

const h = useHarness({ config: { httpAddress: "127.0.0.1:0" } });
let target: FloodTarget;

beforeAll(async () => {
  const { writeKey } = await h.source("flooded");
  target = floodTarget(h.ingest.httpAddress!, writeKey);
});

const underFlood = async (sources: readonly string[], body = false) =>
  (await flood(target, sources, body)).map((a: RealAnswer) => a.answer);
const succeeded = (answers: (number | string)[]) => answers.filter((a) => a === 200).length;
const closedFor = (reason: string) =>
  counterValue(h.ingest.metrics.registry, "hookpost_ingest_http_connections_closed_total", { reason });

describe("a flood of slow connections (issue 22 finding 8)", () => {
  it("from 4 addresses leaves real requests from another address served (>= 35 of 36)", async () => {
    const answers = await underFlood(["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]);
    expect(succeeded(answers), `answers: ${answers.join(" ")}`).toBeGreaterThanOrEqual(35);
    const perIp = await closedFor("per_ip");
    expect(perIp, "connections over the per-address cap are counted").toBeGreaterThan(0);
  });

  it("from 1 address leaves real requests from another address served (>= 35 of 36)", async () => {
    const answers = await underFlood(["127.0.0.2"]);
    expect(succeeded(answers), `answers: ${answers.join(" ")}`).toBeGreaterThanOrEqual(35);
  });

  const many = Array.from({ length: 22 }, (_, i) => `127.0.1.${i + 1}`);

  it("from 22 addresses (under the per-address cap, over the total) sheds the slowest, not newcomers", async () => {
    const answers = await underFlood(many);
    expect(succeeded(answers), `answers: ${answers.join(" ")}`).toBeGreaterThanOrEqual(35);
    const shed = await closedFor("shed");
    expect(shed, "connections shed at the total cap are counted").toBeGreaterThan(0);
  });

  it("of bodies trickling from 22 addresses sheds the slowest requests, not newcomers", async () => {
    const answers = await underFlood(many, true);
    expect(succeeded(answers), `answers: ${answers.join(" ")}`).toBeGreaterThanOrEqual(35);
    // A request cut off mid-body is a cancelled call, not an internal error (nor an error log).
    const calls = (code: string) =>
      counterValue(h.ingest.metrics.registry, "hookpost_ingest_calls_total", { transport: "http", code });
    expect(await calls("CANCELLED")).toBeGreaterThan(0);
    expect(await calls("INTERNAL")).toBe(0);
  });
});
