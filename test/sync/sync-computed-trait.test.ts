import { canonicalJson, syncComputedTrait, type TraitChunk } from "@hookpost/api";
import { Code, HookpostError } from "@hookpost/contract";
import { membershipObjectName } from "@hookpost/core";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { chunks, type Env, purgeEvents, readEvents, startEnv, traitValues, v } from "./helpers.js";

let env: Env;

beforeAll(async () => {
  env = await startEnv({ runEntries: 40 });
});
afterAll(async () => {
  await env?.close();
});
beforeEach(async () => {
  await purgeEvents(env.jsm);
});

function messages(name: string, values: Record<string, unknown>, size = 25): TraitChunk[] {
  const entries = Object.entries(values);
  const out: TraitChunk[] = [];
  for (let i = 0; i < entries.length || i === 0; i += size) {
    const part = entries.slice(i, i + size);
    out.push({
      traitName: i === 0 ? name : "",
      values: Object.fromEntries(part.map(([k, x]) => [k, v(x as never)])),
    });
  }
  return out;
}

const sync = (name: string, values: Record<string, unknown>) =>
  syncComputedTrait(env.deps, "web", chunks(messages(name, values)));

describe("syncComputedTrait", () => {
  it("first sync sends every user's value; later syncs only changes (new value) and leaves (null)", async () => {
    const first: Record<string, unknown> = {};
    for (let i = 0; i < 200; i++) first[`u${i}`] = i % 3 === 0 ? { tier: "gold", score: i } : i;
    const res = await sync("Lifetime Value", first);
    expect(res).toEqual({ users: 200, changed: 200, left: 0 });
    let events = await readEvents(env.jsm);
    const sent = traitValues(events, "lifetime_value");
    expect(sent.size).toBe(200);
    expect(sent.get("u3")).toEqual({ tier: "gold", score: 3 });
    expect(sent.get("u4")).toBe(4);
    expect(events[0]!.call.context).toEqual({
      computedTrait: { name: "Lifetime Value", key: "lifetime_value" },
    });

    await purgeEvents(env.jsm);
    const second: Record<string, unknown> = {};
    for (let i = 0; i < 200; i++) {
      if (i % 50 === 7) continue; // 4 users leave
      // object values compare by content, whatever the key order
      second[`u${i}`] = i % 3 === 0 ? { score: i, tier: "gold" } : i;
    }
    second.u10 = "ten"; // changed
    second.u11 = 11; // unchanged
    second.u12 = { tier: "silver", score: 12 }; // changed
    second.u13 = null; // null: no value any more -> leaves
    second.newcomer = [1, "two", true, null]; // joins
    const res2 = await syncComputedTrait(env.deps, "web", chunks(messages("lifetimeValue", second)));
    expect(res2).toEqual({ users: 196, changed: 3, left: 5 });
    events = await readEvents(env.jsm);
    expect(Object.fromEntries(traitValues(events, "lifetime_value"))).toEqual({
      u7: null,
      u57: null,
      u107: null,
      u157: null,
      u13: null,
      u10: "ten",
      u12: { score: 12, tier: "silver" },
      newcomer: [1, "two", true, null],
    });

    await purgeEvents(env.jsm);
    const res3 = await sync("LIFETIME_VALUE", second);
    expect(res3).toEqual({ users: 196, changed: 0, left: 0 });
    expect(await readEvents(env.jsm)).toHaveLength(0);
  });

  it("a user repeated across messages keeps the last value; a later null removes it", async () => {
    const res = await syncComputedTrait(
      env.deps,
      "web",
      chunks<TraitChunk>([
        { traitName: "Plan", values: { a: v("free"), b: v("free") } },
        { traitName: "", values: { a: v("pro"), c: v("pro") } },
        { traitName: "", values: { c: v(null) } },
      ]),
    );
    expect(res).toEqual({ users: 2, changed: 2, left: 0 });
    expect(Object.fromEntries(traitValues(await readEvents(env.jsm), "plan"))).toEqual({
      a: "pro",
      b: "free",
    });
  });

  it("rejects bad values with the field named", async () => {
    const bad: TraitChunk[][] = [
      [{ traitName: "", values: {} }],
      [{ traitName: "Score", values: { a: v(Number.NaN) } }],
      [{ traitName: "Score", values: { "": v(1) } }],
      [{ traitName: "Score", values: { a: v("x".repeat(20_000)) } }],
      [
        {
          traitName: "Score",
          values: { a: { $typeName: "google.protobuf.Value", kind: { case: undefined } } },
        },
      ],
    ];
    const fields = ["trait_name", 'values["a"]', 'values[""]', 'values["a"]', 'values["a"]'];
    for (let i = 0; i < bad.length; i++) {
      const err = await syncComputedTrait(env.deps, "web", chunks(bad[i]!)).catch((e) => e);
      expect(err).toBeInstanceOf(HookpostError);
      expect(err.code).toBe(Code.INVALID_ARGUMENT);
      expect(err.fieldViolations[0].field).toBe(fields[i]);
    }
    expect(await env.memberships.info(membershipObjectName("web", "trait", "score"))).toBeUndefined();
    expect(await readEvents(env.jsm)).toHaveLength(0);
  });

  it("canonical JSON sorts object keys", () => {
    expect(canonicalJson(v({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: null } }))).toBe(
      '{"a":{"c":null,"d":[1,{"y":2,"z":1}]},"b":1}',
    );
  });
});
