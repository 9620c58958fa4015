import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exitWithin, type ServiceProcess, spawnService } from "../helpers/service-process.js";
import { useNats } from "../helpers/use-nats.js";
import { ADMIN_TOKEN } from "../ingest/harness.js";

// Issue 22 finding 10: a service that cannot open one of its ports says which variable and
// address in one line and exits non-zero; no stack trace.

const nats = useNats();
let taken: Server;
let takenAddress: string;
const children: ServiceProcess[] = [];

beforeAll(async () => {
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  const bound = taken.address();
  takenAddress = `127.0.0.1:${typeof bound === "object" && bound ? bound.port : 0}`;
});

afterAll(async () => {
  for (const c of children) if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
  await new Promise((resolve) => taken?.close(resolve));
});

async function failsToStart(service: "ingest" | "dispatcher", env: Record<string, string>) {
  const child = spawnService(`services/${service === "ingest" ? "api" : service}/main.ts`, {
    NATS_URL: nats.server.url,
    ADMIN_TOKEN,
    INGEST_ADDR: "127.0.0.1:0",
    OPS_ADDR: "off",
    ...env,
  });
  children.push(child);
  const code = await exitWithin(child, 30_000);
  const output = child.output.join("\n");
  expect(code, output).not.toBe(0);
  expect(output, "no stack trace").not.toMatch(/^\s+at /m);
  const fatal = child.records.filter((r) => r.level === 60);
  expect(fatal, output).toHaveLength(1);
  return String(fatal[0]!.msg);
}

describe("a port that cannot be opened", () => {
  it.each([
    ["ingest", "INGEST_ADDR"],
    ["ingest", "HTTP_ADDR"],
    ["ingest", "OPS_ADDR"],
    ["dispatcher", "OPS_ADDR"],
  ] as const)(
    "%s, %s in use: one line naming it and the address, exit non-zero",
    async (service, variable) => {
      const msg = await failsToStart(service, { [variable]: takenAddress });
      expect(msg).toBe(`cannot listen on ${variable} ${takenAddress}: address in use`);
    },
  );

  it("ingest, HTTP_ADDR on an address this machine does not have", async () => {
    const msg = await failsToStart("ingest", { HTTP_ADDR: "192.0.2.1:0" });
    expect(msg).toBe("cannot listen on HTTP_ADDR 192.0.2.1:0: no such address on this machine");
  });
});
