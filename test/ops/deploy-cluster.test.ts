import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { ROOT } from "./helpers.js";

// docker-compose.cluster.yml, checked without a Docker engine: merged over docker-compose.yml the
// way `docker compose -f docker-compose.yml -f docker-compose.cluster.yml` does (maps merge key by
// key, lists and scalars are replaced), it must describe a working 3-node JetStream cluster.

type Yaml = Record<string, unknown>;
const isMap = (v: unknown): v is Yaml => typeof v === "object" && v !== null && !Array.isArray(v);

function merge(base: unknown, over: unknown): unknown {
  if (!isMap(base) || !isMap(over)) return over;
  const out: Yaml = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = k in base ? merge(base[k], v) : v;
  return out;
}

const read = async (file: string) => parse(await readFile(join(ROOT, file), "utf8"), { merge: true }) as Yaml;
const merged = merge(await read("docker-compose.yml"), await read("docker-compose.cluster.yml")) as {
  services: Record<
    string,
    {
      command?: string[];
      volumes?: string[];
      environment?: Record<string, string>;
      depends_on?: Record<string, { condition: string }>;
      healthcheck?: unknown;
    }
  >;
  volumes: Record<string, unknown>;
};
const nodes = Object.entries(merged.services).filter(([name]) => /^nats(-\d)?$/.test(name));

/** The value following a flag on a nats-server command line. */
const flag = (command: string[] | undefined, name: string) => command?.[command.indexOf(name) + 1];

describe("docker-compose.cluster.yml", () => {
  it("runs three JetStream nodes with their own stores, one cluster name, each routed to the two others", () => {
    expect(nodes.map(([n]) => n).sort()).toEqual(["nats", "nats-2", "nats-3"]);
    const names = new Set<string>();
    const stores = new Set<string>();
    for (const [service, s] of nodes) {
      expect(s.command).toContain("-js");
      expect(s.healthcheck, service).toBeDefined();
      names.add(flag(s.command, "--server_name")!);
      expect(flag(s.command, "--cluster_name")).toBe("hookpost");
      expect(flag(s.command, "--cluster")).toBe("nats://0.0.0.0:6222");
      const routes = flag(s.command, "--routes")!.split(",");
      const others = nodes.filter(([n]) => n !== service).map(([n]) => `nats://${n}:6222`);
      expect(routes.sort()).toEqual(others.sort());
      const volume = s.volumes?.find((v) => v.endsWith(`:${flag(s.command, "-sd")}`))?.split(":")[0];
      expect(Object.keys(merged.volumes), service).toContain(volume);
      stores.add(volume!);
    }
    expect(names.size).toBe(3);
    expect(stores.size).toBe(3);
  });

  it("gives ingest and the dispatchers all three URLs and R3 streams, once every node is healthy", () => {
    for (const service of ["ingest", "dispatcher"]) {
      const s = merged.services[service]!;
      expect(s.environment?.NATS_URL?.split(",").sort()).toEqual(
        nodes.map(([n]) => `nats://${n}:4222`).sort(),
      );
      expect(s.environment?.STREAM_REPLICAS).toBe("3");
      for (const [n] of nodes)
        expect(s.depends_on?.[n]?.condition, `${service} waits for ${n}`).toBe("service_healthy");
      // Settings of the base file stay.
      expect(s.environment?.RETRY_WINDOW).toBeDefined();
    }
  });
});
