import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MEMBERSHIPS_BUCKET, membershipObjectName } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Env, range, startEnv } from "./helpers.js";

let env: Env;
let dir: string;

beforeAll(async () => {
  env = await startEnv();
  dir = await mkdtemp(join(tmpdir(), "hookpost-ms-test-"));
});
afterAll(async () => {
  await env?.close();
  await rm(dir, { recursive: true, force: true });
});

const text = (n: number) => `${range(n).sort().join("\n")}\n`;

async function readMine(name: string): Promise<string> {
  const info = await env.memberships.info(name);
  const parts: Buffer[] = [];
  for await (const c of env.memberships.chunks(info!)) parts.push(Buffer.from(c));
  return Buffer.concat(parts).toString("utf8");
}

describe("membership store", () => {
  it("writes objects the stock Object Store client reads, and reads what it writes", async () => {
    const content = text(40_000); // ~470 KiB: several chunks
    const path = join(dir, "a.txt");
    await writeFile(path, content);
    const name = membershipObjectName("web", "audience", "compat");
    const stored = await env.memberships.write(name, path, undefined);
    expect(stored.chunks).toBeGreaterThan(2);

    const os = await env.nc.jetstream().views.os(MEMBERSHIPS_BUCKET);
    const got = await os.getBlob(name);
    expect(Buffer.from(got!).toString("utf8")).toBe(content);
    expect((await os.info(name))!.digest).toBe(stored.digest);

    const other = text(25_000);
    await os.putBlob({ name: "stock-written" }, new TextEncoder().encode(other));
    expect(await readMine("stock-written")).toBe(other);
    expect(await readMine(name)).toBe(content);
  });

  it("names unicode keys safely and keeps an empty list", async () => {
    const name = membershipObjectName("web", "audience", "日本_users");
    expect(name).toMatch(/^audience\.web\.x-[A-Za-z0-9_-]+$/);
    const path = join(dir, "empty.txt");
    await writeFile(path, "");
    await env.memberships.write(name, path, undefined);
    const info = await env.memberships.info(name);
    expect(info?.size).toBe(0);
    expect(await readMine(name)).toBe("");
  });

  it("refuses to overwrite a version it did not start from (concurrent sync)", async () => {
    const name = membershipObjectName("web", "audience", "race");
    const path = join(dir, "r.txt");
    await writeFile(path, "a\n");
    const v1 = await env.memberships.write(name, path, undefined);
    const err = await env.memberships.write(name, path, undefined).catch((e) => e);
    expect(err.code).toBe("CONFLICT");
    const v2 = await env.memberships.write(name, path, v1);
    const stale = await env.memberships.write(name, path, v1).catch((e) => e);
    expect(stale.code).toBe("CONFLICT");
    expect((await env.memberships.info(name))?.revision).toBe(v2.revision);
    expect(await readMine(name)).toBe("a\n");
  });

  it("writes bytes made on the fly in whole chunks, and lists each stored membership once", async () => {
    const content = text(30_000); // ~350 KiB: three chunks
    // Uneven pieces, as a filter hands them over.
    async function* pieces() {
      for (let i = 0; i < content.length; i += 7_001) yield Buffer.from(content.slice(i, i + 7_001));
    }
    const name = membershipObjectName("web", "audience", "on_the_fly");
    const v1 = await env.memberships.write(name, pieces(), undefined);
    expect(v1.chunks).toBe(Math.ceil(Buffer.byteLength(content) / (128 * 1024)));
    expect(await readMine(name)).toBe(content);
    await env.memberships.write(name, pieces(), v1);

    const listed: string[] = [];
    for await (const v of env.memberships.list()) listed.push(v.membership.name);
    expect(listed.filter((n) => n === name)).toHaveLength(1);
    expect(listed).toContain(membershipObjectName("web", "audience", "race"));
  });
});
