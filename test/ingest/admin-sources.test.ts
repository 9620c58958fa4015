import { create, toBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Client } from "@grpc/grpc-js";
import { adminMetadata, writeKeyMetadata } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import {
  GetSourceRequestSchema,
  ListSourcesRequestSchema,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { hashWriteKey } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, failure, fields, rawCall, rawClient, useHarness } from "./harness.js";

const h = useHarness();
let raw: Client;

beforeAll(async () => {
  raw = rawClient(h.address);
});

afterAll(async () => {
  raw?.close();
});

describe("CreateSource", () => {
  it("creates a source with a generated id and shows the write key once", async () => {
    const before = Date.now();
    const res = await h.admin.createSource({ name: "  Website  " });
    const s = res.source!;
    expect(s.id).toMatch(/^src_[0-9a-f]{16}$/);
    expect(s.name).toBe("Website");
    expect(res.writeKey).toMatch(/^hpk_[A-Za-z0-9_-]{32}$/);
    expect(s.writeKeyPrefix).toBe(res.writeKey.slice(0, 8));
    expect(timestampDate(s.createTime!).getTime()).toBeGreaterThanOrEqual(before - 1000);
    // Read back: the key is not shown again, anywhere in the bytes.
    for (const [path, req] of [
      [
        "/hookpost.v1.AdminService/GetSource",
        toBinary(GetSourceRequestSchema, create(GetSourceRequestSchema, { id: s.id })),
      ],
      [
        "/hookpost.v1.AdminService/ListSources",
        toBinary(ListSourcesRequestSchema, create(ListSourcesRequestSchema)),
      ],
    ] as const) {
      const r = await rawCall(raw, path, req, adminMetadata(ADMIN_TOKEN));
      expect(r.code).toBe(Code.OK);
      const text = r.bytes!.toString("latin1");
      expect(text).toContain(s.id);
      expect(text).not.toContain(res.writeKey);
      expect(text).not.toContain(hashWriteKey(res.writeKey));
    }
  });

  it("keeps a chosen id; a taken id is ALREADY_EXISTS, also when two creates race", async () => {
    const res = await h.admin.createSource({ name: "Mobile", id: "mobile-app_1" });
    expect(res.source!.id).toBe("mobile-app_1");
    const err = await failure(h.admin.createSource({ name: "again", id: "mobile-app_1" }));
    expect(err.code).toBe(Code.ALREADY_EXISTS);
    expect(err.message).toContain('"mobile-app_1" already exists');

    const results = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) => h.admin.createSource({ name: `racer ${i}`, id: "race" })),
    );
    const won = results.filter((r) => r.status === "fulfilled");
    expect(won).toHaveLength(1);
    for (const r of results) {
      if (r.status === "rejected") expect(r.reason.code).toBe(Code.ALREADY_EXISTS);
    }
    // The winner's key is the one that works.
    const winner = (won[0] as PromiseFulfilledResult<{ writeKey: string }>).value;
    await h.client(writeKeyMetadata(winner.writeKey)).track({ userId: "u", event: "e" });
  });

  it("validates the name and the id", async () => {
    const cases: [Parameters<typeof h.admin.createSource>[0], string[]][] = [
      [{}, ["name"]],
      [{ name: "   " }, ["name"]],
      [{ name: "x".repeat(201) }, ["name"]],
      [{ name: "line\nbreak" }, ["name"]],
      [{ name: "ok", id: "has space" }, ["id"]],
      [{ name: "ok", id: "dots.are.subject.separators" }, ["id"]],
      [{ name: "ok", id: "x".repeat(65) }, ["id"]],
      [{ name: "", id: "*" }, ["name", "id"]],
    ];
    const count = (await h.admin.listSources({})).sources.length;
    for (const [req, expected] of cases) {
      const err = await failure(h.admin.createSource(req));
      expect(err.code, JSON.stringify(req)).toBe(Code.INVALID_ARGUMENT);
      expect(fields(err)).toEqual(expected);
    }
    expect((await h.admin.listSources({})).sources).toHaveLength(count);
  });
});

describe("GetSource, ListSources", () => {
  it("gets by id; unknown is NOT_FOUND, empty is INVALID_ARGUMENT", async () => {
    const { source } = await h.admin.createSource({ name: "Get me" });
    expect((await h.admin.getSource({ id: source!.id })).source).toEqual(source);
    const err = await failure(h.admin.getSource({ id: "nope" }));
    expect(err.code).toBe(Code.NOT_FOUND);
    expect(err.message).toBe('source "nope" does not exist');
    expect(fields(await failure(h.admin.getSource({ id: "" })))).toEqual(["id"]);
  });

  it("lists every source, oldest first", async () => {
    const a = await h.admin.createSource({ name: "list-a" });
    const b = await h.admin.createSource({ name: "list-b" });
    const ids = (await h.admin.listSources({})).sources.map((s) => s.id);
    expect(ids).toContain(a.source!.id);
    expect(ids.indexOf(a.source!.id)).toBeLessThan(ids.indexOf(b.source!.id));
  });
});

describe("DeleteSource, RotateWriteKey", () => {
  it("deletes a source and disconnects it from its destinations, which are kept", async () => {
    const a = (await h.admin.createSource({ name: "a" })).source!.id;
    const b = (await h.admin.createSource({ name: "b" })).source!.id;
    const both = await h.admin.createDestination({
      destination: { name: "both", sourceIds: [a, b], urls: ["https://example.com/hook"], enabled: true },
    });
    const onlyA = await h.admin.createDestination({
      destination: { name: "only a", sourceIds: [a], urls: ["https://example.com/hook"], enabled: true },
    });
    await h.admin.deleteSource({ id: a });
    expect((await failure(h.admin.getSource({ id: a }))).code).toBe(Code.NOT_FOUND);
    expect((await h.admin.getDestination({ id: both.destination!.id })).destination!.sourceIds).toEqual([b]);
    const orphan = (await h.admin.getDestination({ id: onlyA.destination!.id })).destination!;
    expect(orphan.sourceIds).toEqual([]);
    expect(orphan.name).toBe("only a");
    expect((await h.admin.listDestinations({ sourceId: a })).destinations).toEqual([]);
    // Deleting again: NOT_FOUND.
    expect((await failure(h.admin.deleteSource({ id: a }))).code).toBe(Code.NOT_FOUND);
  });

  it("rotating an unknown source is NOT_FOUND", async () => {
    expect((await failure(h.admin.rotateWriteKey({ id: "ghost" }))).code).toBe(Code.NOT_FOUND);
    expect((await failure(h.admin.rotateWriteKey({ id: "" }))).code).toBe(Code.INVALID_ARGUMENT);
  });

  it("a rotated source keeps its id, name and creation time", async () => {
    const { source } = await h.admin.createSource({ name: "rotate me" });
    const rotated = await h.admin.rotateWriteKey({ id: source!.id });
    expect(rotated.source!.id).toBe(source!.id);
    expect(rotated.source!.name).toBe("rotate me");
    expect(rotated.source!.createTime).toEqual(source!.createTime);
    expect(rotated.source!.writeKeyPrefix).not.toBe(source!.writeKeyPrefix);
  });
});
