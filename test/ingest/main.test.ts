import { writeKeyMetadata } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsServer } from "../helpers/nats-server.js";
import { type ServiceProcess, spawnService } from "../helpers/service-process.js";
import { ADMIN_TOKEN, adminClient, ingestClient, rawCall, rawClient } from "./harness.js";

const startMain = (env: Record<string, string>) => spawnService("services/api/main.ts", env);

let nats: NatsServer;
const children: ServiceProcess[] = [];

beforeAll(async () => {
  nats = await NatsServer.start();
});

afterAll(async () => {
  for (const c of children) if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
  await nats?.stop();
});

describe("services/api/main.ts as a process", () => {
  it("starts, logs where it listens, serves calls, health and metrics, and stops on SIGTERM", async () => {
    const child = startMain({
      NATS_URL: nats.url,
      INGEST_ADDR: "127.0.0.1:0",
      HTTP_ADDR: "127.0.0.1:0",
      OPS_ADDR: "127.0.0.1:0",
      ADMIN_TOKEN,
      LOG_LEVEL: "debug",
    });
    children.push(child);
    const listening = await child.waitFor("ingest listening");
    const address = String(listening.address);
    expect(address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(address).not.toBe("127.0.0.1:0");
    expect(listening.ops).toMatch(/^127\.0\.0\.1:\d+$/);

    const admin = adminClient(address);
    const { writeKey } = await admin.createSource({ name: "proc" });
    const calls = ingestClient(address, writeKeyMetadata(writeKey));
    const { messageId } = await calls.track({ userId: "u1", event: "Started" });
    expect(messageId).not.toBe("");

    // grpc.health.v1: an empty HealthCheckRequest (all services) answers SERVING (status = 1).
    const raw = rawClient(address);
    const health = await rawCall(raw, "/grpc.health.v1.Health/Check", new Uint8Array());
    expect(health.code).toBe(Code.OK);
    expect([...health.bytes!]).toEqual([0x08, 0x01]);

    const ops = `http://${String(listening.ops)}`;
    expect((await fetch(`${ops}/healthz`)).status).toBe(200);
    const ready = await fetch(`${ops}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: "ready", nats: true });
    const metrics = await (await fetch(`${ops}/metrics`)).text();
    expect(metrics).toContain(
      'hookpost_ingest_calls_total{transport="grpc",method="IngestService/Track",code="OK"} 1',
    );
    expect(metrics).toContain('hookpost_ingest_events_total{type="track",outcome="stored"} 1');

    admin.close();
    calls.close();
    raw.close();
    child.proc.kill("SIGTERM");
    expect(await child.exited).toBe(0);
    expect(child.records.some((r) => r.msg === "ingest stopped")).toBe(true);
    const all = child.output.join("\n");
    expect(all).not.toContain(ADMIN_TOKEN);
    expect(all).not.toContain(writeKey);
  });

  it("refuses a bad configuration with a readable message and exit code 1", async () => {
    const child = startMain({ NATS_URL: nats.url, INGEST_ADDR: "no-port-here" });
    children.push(child);
    expect(await child.exited).toBe(1);
    const fatal = child.records.find((r) => r.level === 60);
    expect(String(fatal?.msg)).toContain("INGEST_ADDR must be host:port");
  });
});
