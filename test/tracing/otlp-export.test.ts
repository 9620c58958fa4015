import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsServer } from "../helpers/nats-server.js";
import { Receiver } from "../helpers/receiver.js";
import { killIfRunning } from "../helpers/service-process.js";
import { adminClient, ingestClient, STACK_ADMIN_TOKEN } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { exitWithin, type ServiceProcess, spawnService } from "../ops/helpers.js";

// Ingest and dispatcher as real processes, configured only by the standard OTEL_* variables,
// export their spans over OTLP/HTTP to a stand-in collector (a local HTTP server taking
// POST /v1/traces): one trace, from the caller's traceparent to the webhook request.

const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: { key: string; value: Record<string, unknown> }[];
}
interface CollectedSpan extends OtlpSpan {
  service: string;
}

let nats: NatsServer;
let receiver: Receiver;
let collector: Server;
const collected: CollectedSpan[] = [];
const paths: string[] = [];
const children: ServiceProcess[] = [];

beforeAll(async () => {
  nats = await NatsServer.start();
  receiver = await Receiver.http();
  collector = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      paths.push(`${req.method} ${req.url} ${req.headers["content-type"]}`);
      const doc = JSON.parse(Buffer.concat(chunks).toString()) as {
        resourceSpans: {
          resource: { attributes: { key: string; value: { stringValue?: string } }[] };
          scopeSpans: { spans: OtlpSpan[] }[];
        }[];
      };
      for (const rs of doc.resourceSpans) {
        const service = rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue ?? "";
        for (const ss of rs.scopeSpans) for (const s of ss.spans) collected.push({ ...s, service });
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", () => resolve()));
});

afterAll(async () => {
  for (const c of children) killIfRunning(c.proc);
  await receiver?.close();
  await new Promise<void>((resolve) => (collector ? collector.close(() => resolve()) : resolve()));
  await nats?.stop();
});

const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes?.find((a) => a.key === key)?.value;
  return v ? Object.values(v)[0] : undefined;
};

describe("OTLP export from the service processes", () => {
  it("sends every step's span to the OTLP endpoint named by OTEL_* variables, and flushes on SIGTERM", async () => {
    const port = (collector.address() as AddressInfo).port;
    const common = { NATS_URL: nats.url, OPS_ADDR: "off", OTEL_BSP_SCHEDULE_DELAY: "200" };
    const ingest = spawnService("services/api/main.ts", {
      ...common,
      INGEST_ADDR: "127.0.0.1:0",
      ADMIN_TOKEN: STACK_ADMIN_TOKEN,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
    });
    children.push(ingest);
    const address = String((await ingest.waitFor("ingest listening")).address);
    const dispatcher = spawnService("services/dispatcher/main.ts", {
      ...common,
      WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
      PULL_EXPIRES: "1s",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${port}/v1/traces`,
      OTEL_SERVICE_NAME: "dispatcher-eu-1",
    });
    children.push(dispatcher);
    await dispatcher.waitFor("dispatcher started");
    for (const c of [ingest, dispatcher]) expect((await c.waitFor("tracing on")).otlp).toBe(true);

    const admin = adminClient(address);
    const { writeKey, source } = await admin.createSource({ name: "otlp" });
    const { destination } = await admin.createDestination({
      destination: { name: "hook", urls: [receiver.url()], enabled: true, sourceIds: [source!.id] },
    });
    admin.close();
    const client = ingestClient(address, writeKey);
    // The dispatcher may not pull the new destination yet: the call then waits on DELIVERIES.
    const { messageId } = await client.track(
      { userId: "u-1", event: "Exported" },
      { metadata: { traceparent: `00-${TRACE_ID}-b7ad6b7169203331-01` } },
    );
    client.close();
    const [req] = await receiver.waitFor(1, 30_000);
    expect(String(req!.headers.traceparent)).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));

    const spans = await until(
      () => {
        const mine = collected.filter((s) => s.traceId.toLowerCase() === TRACE_ID);
        const names = new Set(mine.map((s) => s.name));
        return (
          ["hookpost publish", "hookpost route", "hookpost deliver", "POST"].every((n) => names.has(n)) &&
          mine
        );
      },
      { timeout: 30_000, message: "the collector to get publish, route, deliver and request spans" },
    );
    const one = (name: string) => spans.find((s) => s.name === name)!;
    expect(one("hookpost publish").service).toBe("hookpost-ingest");
    expect(attr(one("hookpost publish"), "hookpost.message_id")).toBe(messageId);
    for (const n of ["hookpost route", "hookpost deliver", "POST"])
      expect(one(n).service).toBe("dispatcher-eu-1");
    expect(attr(one("hookpost deliver"), "hookpost.destination_id")).toBe(destination!.id);
    expect(attr(one("POST"), "http.response.status_code")).toBe(200);
    expect(paths.every((p) => p.startsWith("POST /v1/traces application/json"))).toBe(true);

    // SIGTERM: both stop cleanly (what is still buffered is exported on the way out).
    for (const c of [ingest, dispatcher]) c.proc.kill("SIGTERM");
    expect(await exitWithin(ingest, 30_000)).toBe(0);
    expect(await exitWithin(dispatcher, 30_000)).toBe(0);
    const logs = [...ingest.output, ...dispatcher.output].join("\n");
    expect(logs).not.toContain(writeKey);
    expect(logs).not.toMatch(/tracing: .*(fail|error)/i);
  });
});
