import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ingestConfigFromEnv } from "@hookpost/api";
import { BadRequestSchema } from "@hookpost/contract/gen/google/rpc/error_details_pb";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { ConfigError } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";

let stack: Stack;
let base: string;

const client = (token?: string) =>
  createClient(
    AdminService,
    createConnectTransport({
      baseUrl: base,
      httpVersion: "1.1",
      interceptors: [
        (next) => (req) => {
          if (token) req.header.set("authorization", `Bearer ${token}`);
          return next(req);
        },
      ],
    }),
  );

async function refusal(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("the call succeeded");
}

beforeAll(async () => {
  stack = await Stack.start({ dispatchers: 0, ingest: { httpAddress: "127.0.0.1:0" } });
  base = `http://${stack.ingest.httpAddress}`;
});

afterAll(async () => {
  await stack?.close();
});

describe("AdminService over the Connect protocol", () => {
  it("serves the same handlers as gRPC: what one creates, the other lists", async () => {
    const created = await client(STACK_ADMIN_TOKEN).createSource({ name: "via connect", id: "via-connect" });
    expect(created.writeKey).not.toBe("");
    const { sources } = await stack.admin.listSources({});
    expect(sources.map((s) => s.id)).toContain("via-connect");
  });

  it("refuses calls without the admin token or with a wrong one (UNAUTHENTICATED)", async () => {
    const none = await refusal(client().listSources({}));
    expect(none.code).toBe(Code.Unauthenticated);
    expect(none.rawMessage).toMatch(/missing authorization/);
    const wrong = await refusal(client("not-the-token").listSources({}));
    expect(wrong.code).toBe(Code.Unauthenticated);
    expect(wrong.rawMessage).toBe("invalid admin token");
  });

  it("answers field violations as google.rpc.BadRequest details", async () => {
    const err = await refusal(
      client(STACK_ADMIN_TOKEN).createDestination({
        destination: { name: "", urls: ["ftp://x"], sourceIds: [] },
      }),
    );
    expect(err.code).toBe(Code.InvalidArgument);
    const fields = err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations.map((v) => v.field));
    expect(fields).toEqual(
      expect.arrayContaining(["destination.name", "destination.source_ids", "destination.urls[0]"]),
    );
  });

  it("answers NOT_FOUND with the same message as gRPC", async () => {
    const missing = await refusal(client(STACK_ADMIN_TOKEN).getDestination({ id: "nope" }));
    expect(missing.code).toBe(Code.NotFound);
    expect(missing.rawMessage).toBe('destination "nope" does not exist');
  });

  it("refuses oversized requests before reading them", async () => {
    const err = await refusal(client(STACK_ADMIN_TOKEN).createSource({ name: "x".repeat(2 << 20) }));
    expect(err.code).toBe(Code.ResourceExhausted);
  });
});

describe("the console's static files", () => {
  it("serves index.html with a strict CSP, no-cache, and gzip when asked", async () => {
    const res = await fetch(`${base}/console/`, { headers: { "accept-encoding": "gzip" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(await res.text()).toContain('<div id="app">');
  });

  it("answers client-side routes with the app, hashed assets as immutable and gzipped", async () => {
    const page = await (await fetch(`${base}/console/destinations/some-id`)).text();
    expect(page).toContain('<div id="app">');
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(page)?.[1];
    expect(script).toBeDefined();
    const raw = await fetch(`${base}${script}`, { headers: { "accept-encoding": "gzip" } });
    expect(raw.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(raw.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(raw.headers.get("content-encoding")).toBe("gzip");
    expect((await raw.text()).length).toBeGreaterThan(1000);
  });

  it("answers 404 for a missing asset and for paths outside the console, 301 for /console", async () => {
    expect((await fetch(`${base}/console/assets/nope.js`)).status).toBe(404);
    expect((await fetch(`${base}/elsewhere`)).status).toBe(404);
    const redirect = await fetch(`${base}/console`, { redirect: "manual" });
    expect(redirect.status).toBe(301);
    expect(redirect.headers.get("location")).toBe("/console/");
  });
});

describe("HTTP_ADDR", () => {
  it("defaults to 0.0.0.0:8080, `off` disables it, a bad value is refused by name", () => {
    expect(ingestConfigFromEnv({}).httpAddress).toBe("0.0.0.0:8080");
    expect(ingestConfigFromEnv({ HTTP_ADDR: "off" }).httpAddress).toBeUndefined();
    expect(() => ingestConfigFromEnv({ HTTP_ADDR: "8080" })).toThrow(ConfigError);
    expect(() => ingestConfigFromEnv({ HTTP_ADDR: "8080" })).toThrow(/HTTP_ADDR/);
  });
});
