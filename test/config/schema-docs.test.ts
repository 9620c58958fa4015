import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError, loadSettings, renderSettingsDocs, SETTINGS } from "@hookpost/core";
import { CONFIGURATION_DOC, withSettingsSection } from "@hookpost/local";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The only modules that read process.env: the schema, and the client/CLI variables of the contract. */
const SCHEMA_MODULES = ["packages/core/src/config/schema.ts", "packages/contract/src/config/client-env.ts"];

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    if (["node_modules", "dist", "gen"].includes(e.name)) continue;
    const path = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await sources(path)));
    else if (/\.(ts|tsx)$/.test(e.name)) out.push(path);
  }
  return out;
}

describe("docs/configuration.md", () => {
  it("has the settings section the schema renders (npm run docs:config)", async () => {
    const current = await readFile(CONFIGURATION_DOC, "utf8");
    expect(withSettingsSection(current, renderSettingsDocs())).toBe(current);
  });

  it("documents every variable, each with a description", () => {
    const docs = renderSettingsDocs();
    for (const [name, s] of Object.entries(SETTINGS)) {
      expect(docs, name).toContain(`| \`${name}\` |`);
      expect(s.description.length, name).toBeGreaterThan(10);
    }
  });
});

describe("the schema holds every variable", () => {
  it("is the only reader of process.env in packages/ and services/", async () => {
    const readers: string[] = [];
    for (const top of ["packages", "services"]) {
      for (const file of await sources(join(ROOT, top))) {
        const rel = relative(ROOT, file);
        if (SCHEMA_MODULES.includes(rel)) continue;
        const lines = (await readFile(file, "utf8")).split("\n");
        lines.forEach((line, i) => {
          const code = line.trim();
          if (code.startsWith("*") || code.startsWith("//") || code.startsWith("/*")) return;
          if (code.includes("process.env")) readers.push(`${rel}:${i + 1}: ${code}`);
        });
      }
    }
    expect(readers).toEqual([]);
  });

  it("knows every variable docker-compose passes to a service", async () => {
    const compose = parse(await readFile(join(ROOT, "docker-compose.yml"), "utf8"), { merge: true }) as {
      services: Record<string, { environment?: Record<string, string> }>;
    };
    const known = new Set<string>(
      Object.entries(SETTINGS).flatMap(([name, s]) => [name, ...("aliases" in s ? s.aliases : [])]),
    );
    const unknown = Object.values(compose.services)
      .flatMap((s) => Object.keys(s.environment ?? {}))
      .filter((k) => !known.has(k));
    expect(unknown).toEqual([]);
  });
});

describe("loadSettings", () => {
  it("gives the defaults, per service where they differ", () => {
    const api = loadSettings("api", {});
    expect(api.OPS_ADDR).toBe("127.0.0.1:9090");
    expect(api.EVENTS_MAX_BYTES).toBe(1024 ** 3);
    expect(api.PUBLISH_TIMEOUT).toBe(8000);
    expect(api.GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS).toBe(false);
    expect(loadSettings("dispatcher", {}).OPS_ADDR).toBe("127.0.0.1:9091");
    expect(loadSettings("local", {}).NATS_URL).toBeUndefined();
  });

  it("reads one unit per kind: durations, sizes, switches (old forms included)", () => {
    const s = loadSettings("api", {
      EVENTS_MAX_BYTES: "512KiB",
      DELIVERIES_MAX_BYTES: "1073741824",
      SYNC_RUN_BYTES: "4MiB",
      RETRY_WINDOW: "1h30m",
      DEDUP_WINDOW: "60000",
      GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS: "on",
      OPS_ADDR: "off",
      HTTP_ADDR: "",
    });
    expect(s.EVENTS_MAX_BYTES).toBe(512 * 1024);
    expect(s.DELIVERIES_MAX_BYTES).toBe(1024 ** 3);
    expect(s.SYNC_RUN_BYTES).toBe(4 * 1024 ** 2);
    expect(s.RETRY_WINDOW).toBe(5_400_000);
    expect(s.DEDUP_WINDOW).toBe(60_000);
    expect(s.GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS).toBe(true);
    expect(s.OPS_ADDR).toBeUndefined();
    expect(s.HTTP_ADDR).toBe("0.0.0.0:8080");
    expect(
      loadSettings("api", { GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS: "true" })
        .GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS,
    ).toBe(true);
  });

  it("still reads a renamed variable, in milliseconds, and warns once", () => {
    const warnings: string[] = [];
    const warn = (oldName: string, newName: string) => warnings.push(`${oldName}->${newName}`);
    expect(loadSettings("dispatcher", { WEBHOOK_TIMEOUT_MS: "300" }, warn).WEBHOOK_TIMEOUT).toBe(300);
    expect(loadSettings("dispatcher", { WEBHOOK_TIMEOUT_MS: "400" }, warn).WEBHOOK_TIMEOUT).toBe(400);
    expect(
      loadSettings("dispatcher", { WEBHOOK_TIMEOUT: "2s", WEBHOOK_TIMEOUT_MS: "400" }, warn).WEBHOOK_TIMEOUT,
    ).toBe(2000);
    expect(warnings).toEqual(["WEBHOOK_TIMEOUT_MS->WEBHOOK_TIMEOUT"]);
  });

  it.each([
    [
      "api",
      { EVENTS_MAX_BYTES: "1 GB" },
      'EVENTS_MAX_BYTES must be a size in bytes or like 512KiB, 64MiB, 1GiB, got "1 GB"',
    ],
    [
      "api",
      { GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS: "yes" },
      'GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS must be on or off, got "yes"',
    ],
    ["api", { PUBLISH_TIMEOUT_MS: "abc" }, "PUBLISH_TIMEOUT_MS must be a duration"],
    ["dispatcher", { ACK_WAIT: "10ms" }, 'ACK_WAIT must be at least 1s, got "10ms"'],
    ["dispatcher", { LOG_LEVEL: "loud" }, "LOG_LEVEL must be one of"],
  ] as const)("refuses %s %j in one line naming the variable", (service, env, message) => {
    let error: unknown;
    try {
      loadSettings(service, env, () => {});
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message.startsWith(message)).toBe(true);
    expect((error as Error).message).not.toContain("\n");
  });
});
