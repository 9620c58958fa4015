import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeKeyMetadata } from "@hookpost/client";
import { Code, HookpostError } from "@hookpost/contract";
import { afterAll, describe, expect, it } from "vitest";
import { spawnIngest } from "../helpers/ingest.js";
import type { ServiceProcess } from "../helpers/service-process.js";
import { killIfRunning } from "../helpers/service-process.js";
import { until } from "../helpers/until.js";
import { useNats } from "../helpers/use-nats.js";
import { ADMIN_TOKEN, adminClient, ingestClient } from "./harness.js";

/**
 * Sync streams that send a lot and never half-close must not grow ingest without bound, and
 * their temporary folders must not outlive them (issue 10, finding 3). Real ingest processes.
 */
const MIB = 1024 * 1024;
const RUN_BYTES = 2 * MIB;
/** Each sync reserves 2 × run + 6 × 4 MiB (sync-limiter.ts): 28 MiB, so 5 fit in 160 MiB. */
const MEMORY_BYTES = 160 * MIB;
const ADMITTED = 5;
const STREAMS = 30;
/** Per stream: this many messages of about 1 MiB of user ids (40 characters each). */
const CHUNKS = 6;
const IDS_PER_CHUNK = 25_000;

const nats = useNats();
const children: ServiceProcess[] = [];
const dirs: string[] = [];

afterAll(async () => {
  for (const c of children) killIfRunning(c.proc);
  await Promise.all(children.map((c) => c.exited));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "hookpost-sync-test-"));
  dirs.push(d);
  return d;
}

async function startIngest(env: Record<string, string>) {
  const child = spawnIngest(nats.server.url, ADMIN_TOKEN, env);
  children.push(child);
  const listening = await child.waitFor("ingest listening", 60_000);
  return { child, address: String(listening.address) };
}

/** Resident and peak resident memory of a process, in MiB (Linux /proc). */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)![1]) / 1024;
  return { rss: Math.round(kb("VmRSS")), peak: Math.round(kb("VmHWM")) };
}

function ids(stream: number, chunk: number): string[] {
  const prefix = `user-${String(stream).padStart(3, "0")}-${String(chunk).padStart(2, "0")}-`;
  return Array.from({ length: IDS_PER_CHUNK }, (_, i) => `${prefix}${String(i).padStart(24, "0")}`);
}

/**
 * A SyncAudience stream that sends its name and CHUNKS messages of ids, then neither sends nor
 * half-closes until `abort`. `sent` resolves once everything was handed to the transport (or
 * the server answered).
 */
function hangingSync(client: ReturnType<typeof ingestClient>, n: number) {
  const abort = new AbortController();
  let sentAll!: () => void;
  const sent = new Promise<void>((resolve) => {
    sentAll = resolve;
  });
  let answered = false;
  async function* requests() {
    for (let c = 0; c < CHUNKS && !answered; c++) {
      yield { audienceName: c === 0 ? `audience ${n}` : "", userIds: ids(n, c) };
    }
    sentAll();
    await new Promise((resolve) => abort.signal.addEventListener("abort", resolve, { once: true }));
  }
  const result = client.syncAudience(requests(), { signal: abort.signal }).then(
    () => undefined,
    (err: unknown) => err as HookpostError,
  );
  // A refused stream stops sending (and counts as sent).
  void result.then(() => {
    answered = true;
    sentAll();
  });
  return { abort, sent, result };
}

/** Bytes of sort runs a sync folder holds on disk. */
function spilledBytes(folder: string): number {
  return readdirSync(folder)
    .filter((f) => f.startsWith("run-"))
    .reduce((sum, f) => sum + statSync(join(folder, f)).size, 0);
}

describe("sync limits", () => {
  it("keeps ingest memory bounded under many huge never-ending syncs, refuses the excess, and removes the folders on cancel", async () => {
    const dir = tempDir();
    const { child, address } = await startIngest({
      SYNC_TMP_DIR: dir,
      SYNC_RUN_BYTES: String(RUN_BYTES),
      SYNC_MEMORY_BYTES: String(MEMORY_BYTES),
      SYNC_MAX_CONCURRENT: "64",
      SYNC_MAX_PER_SOURCE: "64",
      SYNC_IDLE_TIMEOUT: "10m",
    });
    const admin = adminClient(address);
    const { writeKey } = await admin.createSource({ name: "big" });
    const client = ingestClient(address, writeKeyMetadata(writeKey));
    const pid = child.proc.pid!;
    const before = memory(pid);

    const syncs = Array.from({ length: STREAMS }, (_, n) => hangingSync(client, n));
    // Every stream has sent everything (into the void when refused); then each one is either
    // refused (settled) or running (holding its folder on the server).
    await Promise.all(syncs.map((s) => s.sent));
    const settled = new Map<number, HookpostError | undefined>();
    syncs.forEach((s, i) => void s.result.then((err) => settled.set(i, err)));
    await until(() => settled.size + readdirSync(dir).length === STREAMS, {
      timeout: 120_000,
      message: "each stream refused or running",
    });
    const refused = [...settled.values()];
    for (const err of refused) {
      expect(err, String(err)).toBeInstanceOf(HookpostError);
      expect(err!.code, err!.message).toBe(Code.RESOURCE_EXHAUSTED);
      expect(err!.message).toMatch(/SYNC_MEMORY_BYTES=160 MiB.*retry/);
    }
    expect(refused).toHaveLength(STREAMS - ADMITTED);
    const running = syncs.filter((_, i) => !settled.has(i));
    expect(running).toHaveLength(ADMITTED);
    // The server has read (nearly) all of every running stream: all but the last run is on disk.
    const lineBytes = IDS_PER_CHUNK * 41;
    await until(() => readdirSync(dir).every((f) => spilledBytes(join(dir, f)) >= (CHUNKS - 1) * lineBytes), {
      timeout: 120_000,
      message: "the running syncs' runs spilled to disk",
    });
    const held = memory(pid);

    for (const s of running) s.abort.abort();
    const cancelled = await Promise.all(running.map((s) => s.result));
    for (const err of cancelled) expect(err?.code).toBe(Code.CANCELLED);
    await until(() => readdirSync(dir).length === 0, {
      timeout: 60_000,
      message: "the folders removed after cancel",
    });

    // The slots are free again: a normal sync goes through.
    const ok = await client.syncAudience([{ audienceName: "after", userIds: ["a", "b"] }]);
    expect(ok.members).toBe(2n);
    const after = memory(pid);
    client.close();
    admin.close();

    const sentMiB = Math.round((STREAMS * CHUNKS * IDS_PER_CHUNK * 40) / MIB);
    console.log(
      `sync memory: ${STREAMS} SyncAudience streams of ${CHUNKS} × ${IDS_PER_CHUNK} ids (~${sentMiB} MiB offered, never half-closed), ` +
        `SYNC_MEMORY_BYTES ${MEMORY_BYTES / MIB} MiB, SYNC_RUN_BYTES ${RUN_BYTES / MIB} MiB: ${ADMITTED} ran, ${refused.length} RESOURCE_EXHAUSTED; ` +
        `ingest RSS ${before.rss} MiB at start, ${held.rss} MiB while ${ADMITTED} held their data, ` +
        `${after.rss} MiB after cancel, peak ${after.peak} MiB; folders left: ${readdirSync(dir).length}`,
    );
    // The peak stays within twice the budget: the budget counts the syncs' data; RSS also holds
    // V8's uncollected garbage and the HTTP/2 buffers of the refused streams. (Before the limits,
    // every stream ran: about 13 MiB each, 4.1 GB at 320 streams.)
    expect(after.peak - before.rss).toBeLessThan((2 * MEMORY_BYTES) / MIB);
  }, 300_000);

  it("sweeps the folders of a killed ingest at the next start, and ends a silent sync after SYNC_IDLE_TIMEOUT", async () => {
    const dir = tempDir();
    const first = await startIngest({ SYNC_TMP_DIR: dir });
    const admin = adminClient(first.address);
    const { writeKey } = await admin.createSource({ name: "killed" });
    admin.close();
    const client = ingestClient(first.address, writeKeyMetadata(writeKey));
    const hanging = hangingSync(client, 1);
    await hanging.sent;
    await until(() => readdirSync(dir).length === 1, { timeout: 60_000, message: "the sync's folder" });
    const left = readdirSync(dir);
    first.child.proc.kill("SIGKILL");
    await first.child.exited;
    hanging.abort.abort();
    await hanging.result;
    client.close();
    expect(readdirSync(dir)).toEqual(left);

    const second = await startIngest({ SYNC_TMP_DIR: dir, SYNC_IDLE_TIMEOUT: "1s" });
    expect(readdirSync(dir)).toEqual([]);
    expect((await second.child.waitFor("removed sync folders left by stopped processes")).removed).toBe(1);

    // A stream that names its audience and then says nothing more is ended by the server.
    const again = ingestClient(second.address, writeKeyMetadata(writeKey));
    let release!: () => void;
    async function* silent() {
      yield { audienceName: "quiet", userIds: ["a"] };
      await new Promise<void>((resolve) => {
        release = resolve;
      });
    }
    const err = await again.syncAudience(silent()).then(
      () => undefined,
      (e: unknown) => e as HookpostError,
    );
    release();
    expect(err?.code, String(err)).toBe(Code.DEADLINE_EXCEEDED);
    expect(err?.message).toMatch(/SYNC_IDLE_TIMEOUT/);
    await until(() => readdirSync(dir).length === 0, { timeout: 60_000, message: "the folder removed" });
    again.close();
  }, 180_000);
});
