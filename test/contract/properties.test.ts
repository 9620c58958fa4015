/**
 * Property-based tests of the call contract across both transports (issue 10): whatever is
 * answered "stored" is delivered byte-exact under exactly the answered id (Idempotency-Key and
 * webhook-id); everything else is refused with INVALID_ARGUMENT / 400, never rewritten.
 */
import { createHmac } from "node:crypto";
import { Code, HookpostError } from "@hookpost/contract";
import { Signing } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS, settledCount } from "../e2e/helpers.js";
import { HOSTILE_MESSAGE_IDS } from "../helpers/hostile-ids.js";
import { Receiver } from "../helpers/receiver.js";
import { type IngestClient, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { post } from "../http/helpers.js";

const SECRET = `whsec_${Buffer.from("hookpost-property-key-0123456789").toString("base64")}`;
const AT = "2026-11-21T09:30:00.000Z";
const RULE = /^[\x21-\x7e]{1,100}$/;
let stack: Stack;
let base: string;
const lanes: Record<"grpc" | "http", { writeKey: string; client: IngestClient; rx: Receiver }> = {} as never;
/** A destination signed the seed's way (X-Signature, HMAC-SHA1) for the JSON values property. */
const JSON_SECRET = "hookpost-json-values-secret";
let jsonLane: { writeKey: string; rx: Receiver };

beforeAll(async () => {
  stack = await Stack.start({ ...STACK_OPTIONS, ingest: { httpAddress: "127.0.0.1:0" } });
  base = `http://${stack.ingest.httpAddress}`;
  for (const name of ["grpc", "http"] as const) {
    const src = await stack.source(name);
    const rx = await Receiver.http();
    await stack.destination({
      name,
      sourceIds: [src.id],
      urls: [rx.url()],
      sharedSecret: SECRET,
      signing: Signing.STANDARD_WEBHOOKS,
    });
    lanes[name] = { writeKey: src.writeKey, client: src.client, rx };
  }
  const src = await stack.source("json-values");
  const rx = await Receiver.http();
  await stack.destination({
    name: "json-values",
    sourceIds: [src.id],
    urls: [rx.url()],
    sharedSecret: JSON_SECRET,
    signing: Signing.SEGMENT,
  });
  jsonLane = { writeKey: src.writeKey, rx };
}, 60_000);

afterAll(async () => {
  for (const l of Object.values(lanes)) await l.rx.close();
  await jsonLane?.rx.close();
  await stack?.close();
});

/** Ids of every kind: the rule's alphabet, unicode, whitespace at either end, the hostile ones. */
const messageIds = fc.oneof(
  fc.stringMatching(/^[\x21-\x7e]{1,100}$/),
  fc.string({ unit: "binary", minLength: 1, maxLength: 110 }),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 20 }),
  fc
    .tuple(
      fc.constantFrom(" ", "\t", "\u00a0", "\u2003", "\ufeff", "\u2028", "\r\n", ""),
      fc.stringMatching(/^[\x21-\x7e]{1,20}$/),
      fc.constantFrom(" ", "\u00a0", "\u2003", "\ufeff", "\u3000", ""),
    )
    .map(([a, b, c]) => a + b + c),
  fc.constantFrom(...HOSTILE_MESSAGE_IDS),
);

const body = () =>
  JSON.stringify({
    version: 1,
    type: "track",
    userId: "u",
    event: "Property",
    properties: { k: "v" },
    timestamp: AT,
    context: {},
  });

type Outcome = { accepted: true; answered: string } | { accepted: false; field: string };

async function sendGrpc(id: string): Promise<Outcome> {
  try {
    const r = await lanes.grpc.client.track({
      messageId: id,
      userId: "u",
      event: "Property",
      properties: { k: "v" },
      timestamp: { seconds: BigInt(Date.parse(AT) / 1000), nanos: 0 },
    });
    return { accepted: true, answered: r.messageId };
  } catch (err) {
    expect(err).toBeInstanceOf(HookpostError);
    expect((err as HookpostError).code, (err as Error).message).toBe(Code.INVALID_ARGUMENT);
    return { accepted: false, field: (err as HookpostError).fieldViolations[0]!.field };
  }
}

async function sendHttp(id: string): Promise<Outcome> {
  const r = await post(
    base,
    "/v1/track",
    { messageId: id, userId: "u", event: "Property", properties: { k: "v" }, timestamp: AT },
    { writeKey: lanes.http.writeKey },
  );
  if (r.status === 200) return { accepted: true, answered: id };
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  expect(r.body.code).toBe("INVALID_ARGUMENT");
  return { accepted: false, field: r.body.violations![0]!.field };
}

describe("accepted ⇒ delivered byte-exact under the answered id", () => {
  it("message ids with arbitrary unicode and whitespace, over gRPC and HTTP", async () => {
    const expected = { grpc: new Set<string>(), http: new Set<string>() };
    await fc.assert(
      fc.asyncProperty(messageIds, async (id) => {
        const [g, h] = await Promise.all([sendGrpc(id), sendHttp(id)]);
        // One contract: both transports decide alike, and exactly by the rule.
        expect(g.accepted, JSON.stringify(id)).toBe(RULE.test(id));
        expect(h.accepted, JSON.stringify(id)).toBe(RULE.test(id));
        if (g.accepted) {
          expect(g.answered).toBe(id);
          expected.grpc.add(g.answered);
        } else expect(g.field).toBe("message_id");
        if (h.accepted) expected.http.add(h.answered);
        else expect(h.field).toBe("messageId");
      }),
      { numRuns: 120 },
    );
    expect(expected.grpc.size).toBeGreaterThan(10);
    for (const name of ["grpc", "http"] as const) {
      const { rx } = lanes[name];
      const want = expected[name];
      await rx.waitFor(want.size, 60_000);
      expect(await settledCount(rx, 1_000)).toBe(want.size);
      for (const req of rx.requests) {
        const key = String(req.headers["idempotency-key"]);
        expect(want.has(key), key).toBe(true);
        expect(req.headers["webhook-id"]).toBe(key);
        expect(req.body.toString()).toBe(body());
      }
      expect(rx.messageIds()).toEqual(want);
    }
  }, 300_000);

  it("timestamps: accepted ones render as YYYY-MM-DDTHH:mm:ss.sssZ, truncated, on both transports", async () => {
    const MIN = -62_135_596_800n;
    const MAX = 253_402_300_799n;
    const delivered = new Map<string, string>();
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.bigInt({ min: MIN - 100n, max: MIN + 100n }),
          fc.bigInt({ min: MAX - 100n, max: MAX + 100n }),
          fc.bigInt({ min: MIN, max: MAX }),
        ),
        fc.oneof(fc.constant(999_999_999), fc.integer({ min: 0, max: 999_999_999 })),
        async (seconds, nanos) => {
          const inRange = seconds >= MIN && seconds <= MAX;
          const ms = Number(seconds) * 1000 + Math.floor(nanos / 1_000_000);
          const rendered = inRange ? new Date(ms).toISOString() : undefined;
          // gRPC: answered or refused by the range rule alone.
          const id = `ts-${n++}`;
          const g = await lanes.grpc.client
            .track({ messageId: id, userId: "t", event: "T", timestamp: { seconds, nanos } })
            .then(
              () => true,
              (err: HookpostError) => {
                expect(err.code).toBe(Code.INVALID_ARGUMENT);
                expect(err.fieldViolations[0]!.field).toBe("timestamp");
                return false;
              },
            );
          expect(g).toBe(inRange);
          if (rendered) delivered.set(id, rendered);
          // HTTP: the same instant written with nine fraction digits.
          if (rendered) {
            const text = `${rendered.slice(0, 19)}.${String(nanos).padStart(9, "0")}Z`;
            const r = await post(
              base,
              "/v1/track",
              { userId: "t", event: "T", timestamp: text },
              { writeKey: lanes.http.writeKey },
            );
            expect(r.status, text).toBe(200);
          }
        },
      ),
      { numRuns: 60 },
    );
    // Each accepted one arrives with the truncated time, in the body's one format.
    const { rx } = lanes.grpc;
    const ours = () => rx.requests.filter((r) => delivered.has(String(r.headers["idempotency-key"])));
    await until(() => ours().length >= delivered.size, {
      timeout: 60_000,
      interval: 100,
      message: `${delivered.size} deliveries`,
    }).catch(() => undefined); // the count is asserted next, with the diff
    expect(ours()).toHaveLength(delivered.size);
    for (const req of ours()) {
      const ts = (JSON.parse(req.body.toString()) as { timestamp: string }).timestamp;
      expect(ts).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(ts).toBe(delivered.get(String(req.headers["idempotency-key"])));
    }
  }, 300_000);
});

/*
 * JSON values as clients write them (issue 22 finding 7), generated as a tree so the oracle knows,
 * independently of the contract's code, which ones cannot arrive unchanged: an integer literal
 * beyond ±(2^53 - 1), a number that overflows, a key repeated in one object.
 */
type Node =
  | { t: "num"; lit: string }
  | { t: "str"; v: string }
  | { t: "lit"; v: "true" | "false" | "null" }
  | { t: "arr"; items: Node[] }
  | { t: "obj"; entries: Array<[string, Node]> };

const SAFE = 2n ** 53n - 1n;
const numberLiteral = fc.oneof(
  fc.integer().map(String),
  fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map(String),
  fc.bigInt({ min: SAFE - 3n, max: SAFE + 3n }).map(String),
  fc.bigInt({ min: SAFE - 3n, max: SAFE + 3n }).map((n) => `-${n}`),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
  fc.constantFrom("1.0", "-0", "-0.0", "1e-7", "1E2", "2.50", "1e21", "1.5e300", "1e400", "-1e309", "0.1"),
);
const keyName = fc.oneof(
  fc.constantFrom("a", "b", "1", "10", "0", "01", "-1", "4294967294", "4294967295", "é", "😀", " "),
  fc.string({ unit: "grapheme", maxLength: 6 }),
);
const { node } = fc.letrec<{ node: Node; obj: Node; arr: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    numberLiteral.map((lit): Node => ({ t: "num", lit })),
    fc
      .oneof(
        fc.string({ unit: "grapheme", maxLength: 8 }),
        fc.string({ unit: "binary", maxLength: 4 }),
        // Lone surrogates: sent as \u escapes, delivered as JSON.stringify escapes them.
        fc.constantFrom("\ud800", "x\udc00", "\ud83d!", "\u2028"),
      )
      .map((v): Node => ({ t: "str", v })),
    fc.constantFrom("true", "false", "null").map((v): Node => ({ t: "lit", v: v as "true" })),
    tie("obj"),
    tie("arr"),
  ),
  obj: fc
    .array(fc.tuple(keyName, tie("node")), { maxLength: 5 })
    .map((entries): Node => ({ t: "obj", entries })),
  arr: fc.array(tie("node"), { maxLength: 5 }).map((items): Node => ({ t: "arr", items })),
}));
const properties = fc
  .array(fc.tuple(keyName, node), { maxLength: 6 })
  .map((entries): Node => ({ t: "obj", entries }));

function text(n: Node): string {
  switch (n.t) {
    case "num":
      return n.lit;
    case "str":
      return JSON.stringify(n.v);
    case "lit":
      return n.v;
    case "arr":
      return `[${n.items.map(text).join(", ")}]`;
    case "obj":
      return `{${n.entries.map(([k, v]) => `${JSON.stringify(k)}: ${text(v)}`).join(",")}}`;
  }
}

/** The path of the first value that cannot arrive unchanged, in document order. */
function firstChange(n: Node, path: string): string | undefined {
  switch (n.t) {
    case "num": {
      if (/^-?\d+$/.test(n.lit)) {
        const v = BigInt(n.lit);
        return v > SAFE || v < -SAFE ? path : undefined;
      }
      return Number.isFinite(Number(n.lit)) ? undefined : path;
    }
    case "arr":
      for (let i = 0; i < n.items.length; i++) {
        const p = firstChange(n.items[i]!, `${path}[${i}]`);
        if (p) return p;
      }
      return undefined;
    case "obj": {
      const seen = new Set<string>();
      for (const [k, v] of n.entries) {
        if (seen.has(k)) return `${path}.${k}`;
        seen.add(k);
        const p = firstChange(v, `${path}.${k}`);
        if (p) return p;
      }
      return undefined;
    }
    default:
      return undefined;
  }
}

describe("no value changes silently (issue 22 finding 7)", () => {
  it("arbitrary JSON over HTTP is refused with its path, or delivered canonical, verifiable and equal", async () => {
    const sent = new Map<string, unknown>();
    let n = 0;
    await fc.assert(
      fc.asyncProperty(properties, async (props) => {
        const id = `json-${n++}`;
        const propsText = text(props);
        const body = `{"userId":"u","event":"Values","messageId":"${id}","properties":${propsText}}`;
        const r = await post(base, "/v1/track", body, { writeKey: jsonLane.writeKey });
        const change = firstChange(props, "properties");
        if (change === undefined) {
          expect(r.status, `${propsText} -> ${JSON.stringify(r.body)}`).toBe(200);
          sent.set(id, JSON.parse(propsText));
        } else {
          expect(r.status, propsText).toBe(400);
          expect(r.body.violations?.[0]?.field, propsText).toBe(change);
        }
      }),
      { numRuns: 150 },
    );
    expect(sent.size).toBeGreaterThan(30);
    const { rx } = jsonLane;
    await rx.waitFor(sent.size, 60_000);
    expect(await settledCount(rx, 1_000)).toBe(sent.size);
    for (const req of rx.requests) {
      const raw = req.body.toString("utf8");
      const canonical = JSON.stringify(JSON.parse(raw));
      // The seed's verification: HMAC-SHA1 of the re-stringified body equals X-Signature ...
      expect(req.headers["x-signature"]).toBe(
        createHmac("sha1", JSON_SECRET).update(canonical).digest("hex"),
      );
      // ... which holds because the body is already in that form,
      expect(raw).toBe(canonical);
      // and the values are what the sender's JSON.parse gives (-0 is written 0, as JSON.stringify does).
      const id = String(req.headers["idempotency-key"]);
      expect(sent.has(id), id).toBe(true);
      const want = JSON.parse(JSON.stringify(sent.get(id)));
      expect((JSON.parse(raw) as { properties: unknown }).properties, id).toEqual(want);
    }
  }, 300_000);
});
