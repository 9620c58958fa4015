import { type IngestHandle, ingestConfigFromEnv } from "@hookpost/api";
import { ConfigError } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestIngest } from "../helpers/ingest.js";
import { NatsServer } from "../helpers/nats-server.js";

// Who may show the console in an iframe (CONSOLE_FRAME_ANCESTORS): nobody by default, only the
// sites listed otherwise; read from real HTTP answers of a real ingest.

let nats: NatsServer;
const ingests: IngestHandle[] = [];

beforeAll(async () => {
  nats = await NatsServer.start();
});

afterAll(async () => {
  for (const i of ingests) await i.close();
  await nats?.stop();
});

async function consoleHeaders(frameAncestors?: string[]): Promise<Headers> {
  const ingest = await startTestIngest(nats.url, "frame-test-token", {
    httpAddress: "127.0.0.1:0",
    ...(frameAncestors ? { frameAncestors } : {}),
  });
  ingests.push(ingest);
  const res = await fetch(`http://${ingest.httpAddress}/console/`);
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return res.headers;
}

const frameAncestorsOf = (h: Headers) =>
  /frame-ancestors ([^;]*)/.exec(h.get("content-security-policy") ?? "")?.[1];

describe("framing the console", () => {
  it("is refused everywhere by default: frame-ancestors 'none' and X-Frame-Options DENY", async () => {
    const h = await consoleHeaders();
    expect(frameAncestorsOf(h)).toBe("'none'");
    expect(h.get("x-frame-options")).toBe("DENY");
  });

  it("is allowed on the listed sites only, without X-Frame-Options (which would refuse them)", async () => {
    const h = await consoleHeaders(["https://app.example.com", "https://*.example.org"]);
    expect(frameAncestorsOf(h)).toBe("https://app.example.com https://*.example.org");
    expect(h.get("x-frame-options")).toBeNull();
    // The rest of the policy is unchanged.
    expect(h.get("content-security-policy")).toContain("script-src 'self'");
  });

  it("CONSOLE_FRAME_ANCESTORS takes hosts and 'self', and refuses what would open it to every site or break the header", () => {
    const read = (v: string) => ingestConfigFromEnv({ CONSOLE_FRAME_ANCESTORS: v }).frameAncestors;
    expect(read("https://app.example.com, https://*.example.org:8443 ,'self'")).toEqual([
      "https://app.example.com",
      "https://*.example.org:8443",
      "'self'",
    ]);
    expect(ingestConfigFromEnv({}).frameAncestors).toBeUndefined();
    for (const bad of [
      "*",
      "https:",
      "'unsafe-inline'",
      "a.example.com; script-src *",
      "https://a.com/x y",
      "'none'x",
    ]) {
      expect(() => read(bad), bad).toThrow(ConfigError);
    }
    expect(() => read("*")).toThrow(/CONSOLE_FRAME_ANCESTORS/);
  });

  it("CONSOLE_URL must be an absolute http(s) URL", () => {
    expect(ingestConfigFromEnv({ CONSOLE_URL: "https://hooks.example.com/console/" }).consoleUrl).toBe(
      "https://hooks.example.com/console/",
    );
    for (const bad of ["/console/", "ftp://x/console/", "https://x/console/#a"]) {
      expect(() => ingestConfigFromEnv({ CONSOLE_URL: bad }), bad).toThrow(ConfigError);
    }
  });
});
