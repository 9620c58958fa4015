import { randomBytes } from "node:crypto";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { IngestHandle } from "@hookpost/api";
import { Signing } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import {
  CONFIG_BUCKET,
  ConfigStore,
  Keyring,
  kvStream,
  newSecretKeyEntry,
  parseSecretKeys,
  type StoredDestination,
} from "@hookpost/core";
import { type RunningDispatcher, startDispatcher } from "@hookpost/dispatcher";
import { generateStandardWebhookSecret, verifySegmentRequest } from "@hookpost/receiver";
import { connect, type NatsConnection } from "nats";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hookpost } from "../cli/run-cli.js";
import { destination, publishCall, quietLogger, testConfig, track } from "../dispatcher/helpers.js";
import { spawnIngest, startTestIngest } from "../helpers/ingest.js";
import { NatsServer } from "../helpers/nats-server.js";
import { type ReceivedRequest, Receiver } from "../helpers/receiver.js";
import { waitForRevision } from "../helpers/revisions.js";
import { killIfRunning, type ServiceProcess, spawnService } from "../helpers/service-process.js";
import { type AdminClient, adminClient, STACK_ADMIN_TOKEN } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

// Secrets at rest (SPEC 12, "Data governance"): destinations' shared secrets, Standard Webhooks
// keys and header values are encrypted in the configuration bucket with SECRETS_KEYS. Real
// nats-server, ingest and dispatcher (in-process, then as processes for the exits), a real
// receiver that verifies every signature. The tests run in order: each builds on the last.

const KEY_A = newSecretKeyEntry("key-a");
const KEY_B = newSecretKeyEntry("key-b");
/** Another key under B's id: the wrong key. */
const WRONG_B = newSecretKeyEntry("key-b");
const KEY_Z = newSecretKeyEntry("key-z");
const keyring = (...entries: string[]) => new Keyring(parseSecretKeys(entries.join(",")));
const keyText = (entry: string) => entry.slice(entry.indexOf(":") + 1);

const unique = (prefix: string) => `${prefix}-${randomBytes(9).toString("hex")}`;
const SEGMENT_SECRET = unique("segment-secret");
const ROTATED_SECRET = unique("rotated-secret");
const WHSEC = generateStandardWebhookSecret();
const API_KEY = unique("api-key");
const BEARER = unique("bearer");
const LEGACY_SECRET = unique("legacy-secret");
const LEGACY_HEADER = unique("legacy-header");
/** Every secret and header value the tests store. */
const SECRETS = [SEGMENT_SECRET, ROTATED_SECRET, WHSEC, API_KEY, BEARER, LEGACY_SECRET, LEGACY_HEADER];
const KEYS = [KEY_A, KEY_B, WRONG_B, KEY_Z].map(keyText);

let nats: NatsServer;
let nc: NatsConnection;
let receiver: Receiver;
let sourceId: string;

interface Services {
  ingest: IngestHandle;
  dispatcher: RunningDispatcher;
  admin: AdminClient;
  close(): Promise<void>;
}
let svc: Services | undefined;

/** Ingest and one dispatcher, in-process, both with these keys (as a restart with new settings). */
async function start(keys: Keyring): Promise<Services> {
  await svc?.close();
  const ingest = await startTestIngest(nats.url, STACK_ADMIN_TOKEN, { keyring: keys });
  const dispatcher = await startDispatcher(testConfig(nats.url, { keyring: keys }), { logger: quietLogger });
  const admin = adminClient(ingest.address);
  svc = {
    ingest,
    dispatcher,
    admin,
    close: async () => {
      admin.close();
      await dispatcher.close();
      await ingest.close();
      svc = undefined;
    },
  };
  return svc;
}

beforeAll(async () => {
  nats = await NatsServer.start();
  nc = await connect({ servers: nats.url });
  receiver = await Receiver.http();
});

afterAll(async () => {
  await svc?.close();
  await receiver?.close();
  await nc?.close();
  await nats?.stop();
});

/** Every message of the bucket's stream, raw: subject, headers and data. */
async function rawMessages(): Promise<{ subject: string; text: string }[]> {
  const jsm = await nc.jetstreamManager();
  const stream = kvStream(CONFIG_BUCKET);
  const { first_seq, last_seq } = (await jsm.streams.info(stream)).state;
  const out: { subject: string; text: string }[] = [];
  for (let seq = first_seq; seq <= last_seq; seq++) {
    const m = await jsm.streams.getMessage(stream, { seq }).catch(() => undefined); // deleted: gone
    if (!m) continue;
    const headers = m.header ? [...m.header.keys()].map((k) => `${k}: ${m.header.get(k)}`) : [];
    out.push({ subject: m.subject, text: `${m.subject}\n${headers.join("\n")}\n${m.string()}` });
  }
  return out;
}

const rawBucket = async () => (await rawMessages()).map((m) => m.text).join("\n\n");

/** The stored destinations as the raw messages hold them, by id. */
async function storedDestinations(): Promise<Map<string, StoredDestination>> {
  const prefix = `$KV.${CONFIG_BUCKET}.destination.`;
  const out = new Map<string, StoredDestination>();
  for (const m of await rawMessages()) {
    if (!m.subject.startsWith(prefix)) continue;
    const data = m.text.slice(m.text.lastIndexOf("\n") + 1);
    if (data !== "") out.set(m.subject.slice(prefix.length), JSON.parse(data) as StoredDestination);
  }
  return out;
}

/** The text, and its base64 and base64url forms. */
const forms = (text: string) => [
  text,
  Buffer.from(text).toString("base64").replace(/=+$/, ""),
  Buffer.from(text).toString("base64url"),
];

function expectNowhere(raw: string, secrets: readonly string[]): void {
  for (const secret of secrets) for (const form of forms(secret)) expect(raw).not.toContain(form);
}

/** One call of the test's source, and its request at each URL path, once all arrived. */
async function deliverOne(paths: readonly string[]): Promise<Map<string, ReceivedRequest>> {
  const call = track({ sourceId });
  await publishCall(nc.jetstream(), call);
  const mine = () => receiver.requests.filter((r) => r.headers["idempotency-key"] === call.messageId);
  await until(() => mine().length >= paths.length, {
    timeout: 20_000,
    message: `${paths.length} deliveries of ${call.messageId}`,
  });
  return new Map(mine().map((r) => [r.url, r]));
}

/** The receiver's checks: each signature verifies with the secret the destination was given. */
function verifyAll(got: Map<string, ReceivedRequest>, { legacy = false } = {}): void {
  const segment = got.get("/segment")!;
  expect(verifySegmentRequest(segment.body, segment.headers, ROTATED_SECRET)).toBe(true);
  expect(verifySegmentRequest(segment.body, segment.headers, SEGMENT_SECRET)).toBe(true); // the overlap
  expect(segment.headers["x-api-key"]).toBe(API_KEY);
  const sw = got.get("/standard")!;
  expect(
    new Webhook(WHSEC).verify(sw.body.toString("utf8"), sw.headers as Record<string, string>),
  ).toBeTruthy();
  expect(sw.headers.authorization).toBe(`Bearer ${BEARER}`);
  if (legacy) {
    const old = got.get("/legacy")!;
    expect(verifySegmentRequest(old.body, old.headers, LEGACY_SECRET)).toBe(true);
    expect(old.headers["x-legacy"]).toBe(LEGACY_HEADER);
  }
}

const ALL = ["/segment", "/standard", "/legacy"];

describe("secrets at rest", () => {
  it("stores no shared secret, signing key or header value in the clear, and still signs with them", async () => {
    const { admin, dispatcher } = await start(keyring(KEY_A));
    sourceId = (await admin.createSource({ name: "web", id: "web" })).source!.id;
    await admin.createDestination({
      destination: {
        id: "seg",
        name: "segment-signed",
        sourceIds: [sourceId],
        urls: [receiver.url("/segment")],
        headers: { "X-Api-Key": API_KEY },
        sharedSecret: SEGMENT_SECRET,
        enabled: true,
      },
    });
    await admin.createDestination({
      destination: {
        id: "sw",
        name: "standard-webhooks",
        sourceIds: [sourceId],
        urls: [receiver.url("/standard")],
        headers: { Authorization: `Bearer ${BEARER}` },
        sharedSecret: WHSEC,
        signing: Signing.STANDARD_WEBHOOKS,
        enabled: true,
      },
    });
    // The rotated-out secret keeps signing for an hour: it is stored too.
    const rotated = await admin.rotateSecret({
      destinationId: "seg",
      newSecret: ROTATED_SECRET,
      previousValidFor: durationFromMs(3600_000),
    });
    await waitForRevision(rotated.revision, [dispatcher]);

    const raw = await rawBucket();
    expectNowhere(raw, SECRETS);
    const stored = await storedDestinations();
    const shapes = [...stored.values()].map((d) => [
      d.id,
      d.sealed?.key,
      "headers" in d,
      "sharedSecret" in d,
    ]);
    expect(shapes.sort()).toEqual([
      ["seg", "key-a", false, false],
      ["sw", "key-a", false, false],
    ]);
    expect(stored.get("seg")?.previousSecretExpiresAt).toBeDefined();

    // Readers get them in clear: the admin API (header values), the dispatcher (signatures).
    expect((await admin.getDestination({ id: "seg" })).destination?.headers).toEqual({
      "X-Api-Key": API_KEY,
    });
    verifyAll(await deliverOne(["/segment", "/standard"]));
  });

  it("reads destinations stored in plain text before encryption, and the CLI re-encrypts them", async () => {
    const { ingest, dispatcher } = svc!;
    // As an earlier version wrote it: the record as it is, secrets in clear.
    const kv = await nc.jetstream().views.kv(CONFIG_BUCKET);
    const legacy = destination({
      id: "legacy",
      sourceIds: [sourceId],
      urls: [receiver.url("/legacy")],
      headers: { "X-Legacy": LEGACY_HEADER },
      sharedSecret: LEGACY_SECRET,
    });
    const revision = await kv.create("destination.legacy", JSON.stringify(legacy));
    await waitForRevision(revision, [dispatcher]);
    // The scan sees clear text where there is some.
    expect(await rawBucket()).toContain(LEGACY_SECRET);
    verifyAll(await deliverOne(ALL), { legacy: true });

    const env = { HOOKPOST_ENDPOINT: ingest.address, ADMIN_TOKEN: STACK_ADMIN_TOKEN };
    const first = await hookpost(["secrets", "re-encrypt"], env);
    expect(first.stderr).toBe("");
    expect(first.stdout).toBe("Re-encrypted 1 destination with key key-a (2 already were).\n");
    expectNowhere(await rawBucket(), SECRETS);
    expect((await storedDestinations()).get("legacy")?.sealed?.key).toBe("key-a");
    const again = await hookpost(["secrets", "re-encrypt", "--json"], env);
    expect(JSON.parse(again.stdout)).toEqual({ reencrypted: 0, unchanged: 3, keyId: "key-a" });
    verifyAll(await deliverOne(ALL), { legacy: true });

    // The runbook's first step: a new key, printed as an entry SECRETS_KEYS reads.
    const made = await hookpost(["secrets", "new-key", "--id", "key-c"], {});
    expect(made.code).toBe(0);
    expect(parseSecretKeys(made.stdout).map((k) => k.id)).toEqual(["key-c"]);
    expect(made.stderr).toMatch(/^Add it first to SECRETS_KEYS on every service/);
  });

  it("rotates keys: the new key first beside the old one, re-encrypt, then the new key alone", async () => {
    // Restarted with B first: everything sealed with A is still read, new writes use B.
    let { admin } = await start(keyring(KEY_B, KEY_A));
    verifyAll(await deliverOne(ALL), { legacy: true });
    expect(new Set([...(await storedDestinations()).values()].map((d) => d.sealed?.key))).toEqual(
      new Set(["key-a"]),
    );
    const res = await admin.reencryptSecrets({});
    expect([res.reencrypted, res.unchanged, res.keyId]).toEqual([3, 0, "key-b"]);
    expect(new Set([...(await storedDestinations()).values()].map((d) => d.sealed?.key))).toEqual(
      new Set(["key-b"]),
    );
    expectNowhere(await rawBucket(), SECRETS);

    // A is gone: B alone reads and signs everything.
    ({ admin } = await start(keyring(KEY_B)));
    verifyAll(await deliverOne(ALL), { legacy: true });
    expect((await admin.getDestination({ id: "sw" })).destination?.headers).toEqual({
      Authorization: `Bearer ${BEARER}`,
    });
    expect((await admin.reencryptSecrets({})).reencrypted).toBe(0);
  });

  describe("a missing or wrong key stops the service with one clear line", () => {
    const children: ServiceProcess[] = [];
    afterAll(() => {
      for (const c of children) killIfRunning(c.proc);
    });

    /** The child's one error line (fatal), checked to hold no key and no secret. */
    function fatalLine(child: ServiceProcess): string {
      const errors = child.records.filter((r) => Number(r.level) >= 50);
      expect(errors, child.output.join("\n")).toHaveLength(1);
      expect(errors[0]).toMatchObject({ level: 60 });
      expect(Object.keys(errors[0]!).filter((k) => k === "err" || k === "stack")).toEqual([]);
      const output = child.output.join("\n");
      for (const text of [...KEYS, ...SECRETS]) expect(output).not.toContain(text);
      return String(errors[0]!.msg);
    }

    const dispatcherProcess = (env: Record<string, string>) => {
      const child = spawnService("services/dispatcher/main.ts", {
        NATS_URL: nats.url,
        OPS_ADDR: "off",
        LOG_LEVEL: "info",
        ...env,
      });
      children.push(child);
      return child;
    };

    it("at start: another key under the same id, a key that is missing, no keys at all", async () => {
      await svc?.close(); // everything is sealed with B now
      const wrong = spawnIngest(nats.url, STACK_ADMIN_TOKEN, { SECRETS_KEYS: WRONG_B });
      const missing = dispatcherProcess({ SECRETS_KEYS: KEY_A });
      const none = dispatcherProcess({});
      children.push(wrong);
      expect(await wrong.exited).toBe(1);
      expect(fatalLine(wrong)).toMatch(
        /^SECRETS_KEYS key "key-b" cannot decrypt destination "(seg|sw|legacy)"'s secrets: it is not the key they were encrypted with, or the stored record was altered$/,
      );
      expect(await missing.exited).toBe(2);
      expect(fatalLine(missing)).toMatch(
        /^SECRETS_KEYS has no key "key-b", which encrypted destination "(seg|sw|legacy)"'s secrets \(it has "key-a"\): add that key$/,
      );
      expect(await none.exited).toBe(2);
      expect(fatalLine(none)).toMatch(
        /^SECRETS_KEYS is not set, but destination "(seg|sw|legacy)"'s secrets are encrypted with key "key-b": set SECRETS_KEYS \(or SECRETS_KEYS_FILE\) with that key$/,
      );
    });

    it("later: a record sealed with a key the running replica lacks", async () => {
      const running = dispatcherProcess({ SECRETS_KEYS: KEY_B });
      await running.waitFor("dispatcher started");
      // Another replica, already given key Z first, writes a destination.
      const other = await ConfigStore.open(nc, { keyring: keyring(KEY_Z, KEY_B) });
      await other.createDestination(
        destination({ id: "from-z", sourceIds: [sourceId], urls: [receiver.url()] }),
      );
      other.close();
      expect(await running.exited).toBe(2);
      expect(fatalLine(running)).toBe(
        `SECRETS_KEYS has no key "key-z", which encrypted destination "from-z"'s secrets (it has "key-b"): add that key`,
      );
    });
  });
});
