import { randomBytes } from "node:crypto";
import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Client } from "@grpc/grpc-js";
import { adminMetadata } from "@hookpost/client";
import { Code } from "@hookpost/contract";
import {
  ConsentMissing,
  type DestinationSchema,
  GetDestinationRequestSchema,
  ListDestinationsRequestSchema,
  Ordering,
  Signing,
} from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { ConfigStore, type DestinationRecord } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";
import { ADMIN_TOKEN, failure, fields, rawCall, rawClient, useHarness } from "./harness.js";

type DestInit = MessageInitShape<typeof DestinationSchema>;

const h = useHarness();
let raw: Client;
let s1: string;
let s2: string;

beforeAll(async () => {
  raw = rawClient(h.address);
  s1 = (await h.admin.createSource({ name: "one", id: "s1" })).source!.id;
  s2 = (await h.admin.createSource({ name: "two", id: "s2" })).source!.id;
});

afterAll(async () => {
  raw?.close();
});

const whsec = (bytes: number) => `whsec_${randomBytes(bytes).toString("base64")}`;
const valid = (over: DestInit = {}): DestInit => ({
  name: "Orders hook",
  sourceIds: [s1],
  urls: ["https://hooks.example.com/in"],
  enabled: true,
  ...over,
});

/** Expects INVALID_ARGUMENT naming exactly these fields, and no destination created. */
async function refused(d: DestInit | undefined, expected: string[]) {
  const count = (await h.admin.listDestinations({})).destinations.length;
  const err = await failure(h.admin.createDestination(d === undefined ? {} : { destination: d }));
  expect(err.code, `${JSON.stringify(d)}: ${err.message}`).toBe(Code.INVALID_ARGUMENT);
  expect(fields(err), err.message).toEqual(expected);
  expect((await h.admin.listDestinations({})).destinations).toHaveLength(count);
  return err;
}

/** Runs `body` with a reader of a destination as the config store holds it (once it is there). */
async function withStored(body: (stored: (id: string) => Promise<DestinationRecord>) => Promise<void>) {
  const store = await ConfigStore.open(h.nc);
  try {
    await body((id) => until(() => store.destination(id), { message: `destination ${id} in the store` }));
  } finally {
    store.close();
  }
}

/** The raw bytes of Get and List answers, to prove a secret is not in them. */
async function readBytes(id: string): Promise<string> {
  const get = await rawCall(
    raw,
    "/hookpost.v1.AdminService/GetDestination",
    toBinary(GetDestinationRequestSchema, create(GetDestinationRequestSchema, { id })),
    adminMetadata(ADMIN_TOKEN),
  );
  const list = await rawCall(
    raw,
    "/hookpost.v1.AdminService/ListDestinations",
    toBinary(ListDestinationsRequestSchema, create(ListDestinationsRequestSchema)),
    adminMetadata(ADMIN_TOKEN),
  );
  expect(get.code).toBe(Code.OK);
  expect(list.code).toBe(Code.OK);
  return get.bytes!.toString("latin1") + list.bytes!.toString("latin1");
}

describe("CreateDestination", () => {
  it("creates a destination; the secret is write-only", async () => {
    const secret = "my-very-secret-value-123";
    const res = await h.admin.createDestination({
      destination: valid({
        sourceIds: [s1, s2],
        urls: ["https://a.example.com/hook?x=1", "http://b.example.com:8080/"],
        headers: { "X-Api-Key": "abc", Authorization: "Bearer customer-token" },
        sharedSecret: secret,
      }),
    });
    const d = res.destination!;
    expect(d.id).toMatch(/^dst_[0-9a-f]{16}$/);
    expect(d).toMatchObject({
      name: "Orders hook",
      sourceIds: [s1, s2],
      urls: ["https://a.example.com/hook?x=1", "http://b.example.com:8080/"],
      headers: { "X-Api-Key": "abc", Authorization: "Bearer customer-token" },
      sharedSecret: "",
      sharedSecretSet: true,
      signing: Signing.SEGMENT,
      enabled: true,
    });
    expect(d.createTime).toEqual(d.updateTime);
    expect((await h.admin.getDestination({ id: d.id })).destination).toEqual(d);
    expect((await h.admin.listDestinations({})).destinations.find((x) => x.id === d.id)?.sharedSecret).toBe(
      "",
    );
    expect(await readBytes(d.id)).not.toContain(secret);
  });

  it("keeps a chosen id (duplicate: ALREADY_EXISTS); stores the enabled flag as given", async () => {
    const d = (await h.admin.createDestination({ destination: valid({ id: "my-hook", enabled: false }) }))
      .destination!;
    expect(d.id).toBe("my-hook");
    expect(d.enabled).toBe(false);
    expect(d.sharedSecretSet).toBe(false);
    const err = await failure(h.admin.createDestination({ destination: valid({ id: "my-hook" }) }));
    expect(err.code).toBe(Code.ALREADY_EXISTS);
  });

  it("creates a destination enabled when enabled is not set", async () => {
    const { enabled: _unset, ...rest } = valid();
    const d = (await h.admin.createDestination({ destination: rest })).destination!;
    expect(d.enabled).toBe(true);
  });

  it("requires the destination, a name and a valid id", async () => {
    await refused(undefined, ["destination"]);
    await refused(valid({ name: "" }), ["destination.name"]);
    await refused(valid({ name: "a\u0000b" }), ["destination.name"]);
    await refused(valid({ id: "no spaces please" }), ["destination.id"]);
  });

  it("source_ids: at least one, each existing, no repeats", async () => {
    await refused(valid({ sourceIds: [] }), ["destination.source_ids"]);
    const err = await refused(valid({ sourceIds: [s1, "ghost"] }), ["destination.source_ids[1]"]);
    expect(err.message).toContain('source "ghost" does not exist');
    await refused(valid({ sourceIds: [s1, s1] }), ["destination.source_ids[1]"]);
    await refused(valid({ sourceIds: [""] }), ["destination.source_ids[0]"]);
  });

  it("urls: 1 to 5 absolute http(s) URLs without credentials or fragments", async () => {
    const ok = "https://example.com/";
    await refused(valid({ urls: [] }), ["destination.urls"]);
    await refused(valid({ urls: Array.from({ length: 6 }, (_, i) => `https://e.com/${i}`) }), [
      "destination.urls",
    ]);
    await h.admin.createDestination({
      destination: valid({ urls: Array.from({ length: 5 }, (_, i) => `https://e.com/${i}`) }),
    });
    const bad = [
      "ftp://example.com/",
      "/relative/path",
      "example.com/hook",
      "https://user:pass@example.com/",
      "https://token@example.com/",
      "https://example.com/#frag",
      "https://example.com/a b",
      " https://example.com/",
      "https://exa\nmple.com/",
      "javascript:alert(1)",
      "http:example.com",
      `https://example.com/${"x".repeat(2100)}`,
      "",
    ];
    for (const url of bad) {
      const err = await refused(valid({ urls: [ok, url] }), ["destination.urls[1]"]);
      expect(err.message).not.toContain("pass@");
    }
    await refused(valid({ urls: [ok, ok] }), ["destination.urls[1]"]);
  });

  it("headers: at most 5, token names, single-line values, not reserved, no case duplicates", async () => {
    const five = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`X-H${i}`, "v"]));
    await h.admin.createDestination({ destination: valid({ headers: five }) });
    await refused(valid({ headers: { ...five, "X-H5": "v" } }), ["destination.headers"]);
    await refused(valid({ headers: { "X Bad": "v" } }), ['destination.headers["X Bad"]']);
    await refused(valid({ headers: { "X-Bad:": "v" } }), ['destination.headers["X-Bad:"]']);
    await refused(valid({ headers: { "": "v" } }), ['destination.headers[""]']);
    await refused(valid({ headers: { "X-A": "line\r\nInjected: yes" } }), ['destination.headers["X-A"]']);
    await refused(valid({ headers: { "X-A": "nul\u0000" } }), ['destination.headers["X-A"]']);
    await refused(valid({ headers: { "X-A": "x".repeat(5000) } }), ['destination.headers["X-A"]']);
    await refused(valid({ headers: { "X-A": "emoji 🎉" } }), ['destination.headers["X-A"]']);
    const dup = await refused(valid({ headers: { "X-Token": "a", "x-token": "b" } }), [
      'destination.headers["x-token"]',
    ]);
    expect(dup.message).toContain("case-insensitive");
    const reserved = [
      "Content-Type",
      "content-length",
      "HOST",
      "User-Agent",
      "x-signature",
      "Idempotency-Key",
      "Transfer-Encoding",
      "connection",
      "webhook-id",
      "Webhook-Signature",
      "WEBHOOK-TIMESTAMP",
      "webhook-anything",
    ];
    for (const name of reserved) {
      const err = await refused(valid({ headers: { [name]: "v" } }), [
        `destination.headers[${JSON.stringify(name)}]`,
      ]);
      expect(err.message).toContain("cannot be configured");
    }
  });

  it("signing: unspecified means segment; standard-webhooks needs a whsec_ secret of 24 to 64 bytes", async () => {
    const seg = await h.admin.createDestination({ destination: valid({ signing: Signing.SEGMENT }) });
    expect(seg.destination!.signing).toBe(Signing.SEGMENT);
    const std = await h.admin.createDestination({
      destination: valid({ signing: Signing.STANDARD_WEBHOOKS, sharedSecret: whsec(32) }),
    });
    expect(std.destination!.signing).toBe(Signing.STANDARD_WEBHOOKS);
    expect(std.destination!.sharedSecretSet).toBe(true);
    await h.admin.createDestination({
      destination: valid({ signing: Signing.STANDARD_WEBHOOKS, sharedSecret: whsec(24) }),
    });
    await h.admin.createDestination({
      destination: valid({ signing: Signing.STANDARD_WEBHOOKS, sharedSecret: whsec(64) }),
    });

    const sw = (sharedSecret: string) => valid({ signing: Signing.STANDARD_WEBHOOKS, sharedSecret });
    const missing = await refused(sw(""), ["destination.shared_secret"]);
    expect(missing.message).toContain("needs a shared secret");
    for (const secret of [
      "plain-secret-without-prefix",
      whsec(16),
      whsec(65),
      "whsec_",
      "whsec_not base64!",
      `whsec_${randomBytes(32).toString("base64url").replace(/=+$/, "")}-_`,
    ]) {
      const err = await refused(sw(secret), ["destination.shared_secret"]);
      expect(err.message).not.toContain(secret.slice(6) || "\u0000");
    }
    await refused(valid({ signing: 7 as Signing }), ["destination.signing"]);
    await refused(valid({ sharedSecret: "x".repeat(1025) }), ["destination.shared_secret"]);
  });

  it("reports every problem of a request at once", async () => {
    await refused({ name: "", sourceIds: [], urls: ["nope"], headers: { Host: "x" } }, [
      "destination.name",
      "destination.source_ids",
      "destination.urls[0]",
      'destination.headers["Host"]',
    ]);
  });
});

describe("Get/List/Delete", () => {
  it("lists by source; gets and deletes by id; unknown ids are NOT_FOUND", async () => {
    const d = (await h.admin.createDestination({ destination: valid({ sourceIds: [s2], name: "only s2" }) }))
      .destination!;
    const forS2 = (await h.admin.listDestinations({ sourceId: s2 })).destinations.map((x) => x.id);
    expect(forS2).toContain(d.id);
    expect((await h.admin.listDestinations({ sourceId: "nobody" })).destinations).toEqual([]);
    expect((await failure(h.admin.getDestination({ id: "nope" }))).code).toBe(Code.NOT_FOUND);
    expect(fields(await failure(h.admin.getDestination({ id: "" })))).toEqual(["id"]);
    await h.admin.deleteDestination({ id: d.id });
    expect((await failure(h.admin.getDestination({ id: d.id }))).code).toBe(Code.NOT_FOUND);
    expect((await failure(h.admin.deleteDestination({ id: d.id }))).code).toBe(Code.NOT_FOUND);
  });
});

describe("UpdateDestination", () => {
  const secret = "segment-secret-0001";
  async function fresh(over: DestInit = {}) {
    return (await h.admin.createDestination({ destination: valid({ sharedSecret: secret, ...over }) }))
      .destination!;
  }

  it("with a mask changes only the named fields (a secret in the request is ignored)", async () => {
    const d = await fresh({ headers: { "X-A": "1" } });
    // The clock moved on from the creation, so that the update time can differ.
    await until(() => Date.now() > timestampDate(d.updateTime!).getTime(), {
      message: "the clock to move on",
    });
    const res = await h.admin.updateDestination({
      destination: {
        id: d.id,
        name: "Renamed",
        urls: ["https://ignored.example.com/"],
        sharedSecret: "ignored",
      },
      updateMask: { paths: ["name"] },
    });
    const u = res.destination!;
    expect(u).toMatchObject({
      name: "Renamed",
      urls: d.urls,
      headers: { "X-A": "1" },
      sharedSecretSet: true,
    });
    expect(u.createTime).toEqual(d.createTime);
    expect(timestampDate(u.updateTime!).getTime()).toBeGreaterThan(timestampDate(d.updateTime!).getTime());
    expect((await h.admin.getDestination({ id: d.id })).destination).toEqual(u);
  });

  it("with an empty mask replaces every field but keeps the secret when none is given", async () => {
    const d = await fresh({ headers: { "X-A": "1" }, sourceIds: [s1, s2] });
    const u = (
      await h.admin.updateDestination({
        destination: { id: d.id, name: "Replaced", sourceIds: [s2], urls: ["https://new.example.com/"] },
      })
    ).destination!;
    expect(u).toMatchObject({
      name: "Replaced",
      sourceIds: [s2],
      urls: ["https://new.example.com/"],
      headers: {},
      // enabled was not set in the request: kept.
      enabled: true,
      signing: Signing.SEGMENT,
      sharedSecretSet: true,
    });
    // Full replace validates like a create.
    const err = await failure(h.admin.updateDestination({ destination: { id: d.id } }));
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(fields(err)).toEqual(["destination.name", "destination.source_ids", "destination.urls"]);
  });

  it("the shared_secret path with an empty value clears the secret; with a value replaces it", async () => {
    const d = await fresh();
    const cleared = await h.admin.updateDestination({
      destination: { id: d.id },
      updateMask: { paths: ["shared_secret"] },
    });
    expect(cleared.destination!.sharedSecretSet).toBe(false);
    const newSecret = "a-new-secret-value";
    const set = await h.admin.updateDestination({
      destination: { id: d.id, sharedSecret: newSecret },
      updateMask: { paths: ["shared_secret"] },
    });
    expect(set.destination!.sharedSecretSet).toBe(true);
    expect(await readBytes(d.id)).not.toContain(newSecret);
  });

  it("checks signing against the secret it ends up with", async () => {
    const d = await fresh();
    // The kept secret is not a Standard Webhooks secret.
    const err = await failure(
      h.admin.updateDestination({
        destination: { id: d.id, signing: Signing.STANDARD_WEBHOOKS },
        updateMask: { paths: ["signing"] },
      }),
    );
    expect(fields(err)).toEqual(["destination.shared_secret"]);
    expect(err.message).toContain("the current shared secret is not a Standard Webhooks secret");
    const ok = await h.admin.updateDestination({
      destination: { id: d.id, signing: Signing.STANDARD_WEBHOOKS, sharedSecret: whsec(32) },
      updateMask: { paths: ["signing", "shared_secret"] },
    });
    expect(ok.destination!.signing).toBe(Signing.STANDARD_WEBHOOKS);
    // Clearing the secret of a standard-webhooks destination is refused.
    const clear = await failure(
      h.admin.updateDestination({ destination: { id: d.id }, updateMask: { paths: ["shared_secret"] } }),
    );
    expect(fields(clear)).toEqual(["destination.shared_secret"]);
  });

  it("validates the fields it changes and refuses unknown or read-only mask paths", async () => {
    const d = await fresh();
    const bad = await failure(
      h.admin.updateDestination({
        destination: { id: d.id, urls: ["ftp://x"], headers: { "webhook-id": "x" } },
        updateMask: { paths: ["urls", "headers"] },
      }),
    );
    expect(fields(bad)).toEqual(["destination.urls[0]", 'destination.headers["webhook-id"]']);
    const unknown = await failure(
      h.admin.updateDestination({
        destination: { id: d.id },
        updateMask: { paths: ["name", "colour", "id", "create_time"] },
      }),
    );
    expect(fields(unknown)).toEqual(["update_mask.paths[1]", "update_mask.paths[2]", "update_mask.paths[3]"]);
    expect(unknown.message).toContain('unknown field "colour"');
    const ghostSource = await failure(
      h.admin.updateDestination({
        destination: { id: d.id, sourceIds: [s1, "ghost"] },
        updateMask: { paths: ["source_ids"] },
      }),
    );
    expect(fields(ghostSource)).toEqual(["destination.source_ids[1]"]);
    // Nothing of the refused updates was applied.
    expect((await h.admin.getDestination({ id: d.id })).destination).toEqual(d);
  });

  it("unknown id is NOT_FOUND; a missing id or destination is INVALID_ARGUMENT", async () => {
    const nf = await failure(
      h.admin.updateDestination({ destination: { id: "ghost", name: "x" }, updateMask: { paths: ["name"] } }),
    );
    expect(nf.code).toBe(Code.NOT_FOUND);
    expect(fields(await failure(h.admin.updateDestination({ destination: { name: "x" } })))).toEqual([
      "destination.id",
    ]);
    expect(fields(await failure(h.admin.updateDestination({})))).toEqual(["destination"]);
  });

  it("enabled can be switched alone", async () => {
    const d = await fresh({ enabled: true });
    const off = await h.admin.updateDestination({
      destination: { id: d.id, enabled: false },
      updateMask: { paths: ["enabled"] },
    });
    expect(off.destination).toMatchObject({
      enabled: false,
      name: d.name,
      urls: d.urls,
      sharedSecretSet: true,
    });
  });

  it("an update with an empty mask keeps enabled when it is not set", async () => {
    const d = await fresh({ enabled: false });
    const { enabled: _unset, ...rest } = valid({ name: "renamed" });
    const r = await h.admin.updateDestination({ destination: { ...rest, id: d.id } });
    expect(r.destination).toMatchObject({ name: "renamed", enabled: false });
  });
});

describe("ordering", () => {
  it("PER_USER is set, stored, read back, kept by an unmasked update, cleared by a masked UNORDERED; a bad value names the field", async () => {
    await withStored(async (record) => {
      const stored = async (id: string) => (await record(id)).ordering;
      const plain = (await h.admin.createDestination({ destination: valid() })).destination!;
      expect(plain.ordering).toBe(Ordering.UNORDERED);
      expect(await stored(plain.id)).toBeUndefined();

      const d = (await h.admin.createDestination({ destination: valid({ ordering: Ordering.PER_USER }) }))
        .destination!;
      expect(d.ordering).toBe(Ordering.PER_USER);
      expect((await h.admin.getDestination({ id: d.id })).destination!.ordering).toBe(Ordering.PER_USER);
      expect(await stored(d.id)).toBe("PER_USER");

      // An update without a mask and without ordering keeps it.
      const kept = await h.admin.updateDestination({
        destination: { id: d.id, name: "Renamed", sourceIds: [s1], urls: ["https://hooks.example.com/in"] },
      });
      expect(kept.destination!.ordering).toBe(Ordering.PER_USER);
      // Named in the mask: UNORDERED (or unset) switches back; stored as absent.
      const back = await h.admin.updateDestination({
        destination: { id: d.id },
        updateMask: { paths: ["ordering"] },
      });
      expect(back.destination!.ordering).toBe(Ordering.UNORDERED);
      await until(async () => (await stored(d.id)) === undefined, {
        message: "ordering removed in the store",
      });

      await refused(valid({ ordering: 7 as Ordering }), ["destination.ordering"]);
      const err = await failure(
        h.admin.updateDestination({
          destination: { id: d.id, ordering: 9 as Ordering },
          updateMask: { paths: ["ordering"] },
        }),
      );
      expect(err.code).toBe(Code.INVALID_ARGUMENT);
      expect(fields(err)).toEqual(["destination.ordering"]);
      expect((await h.admin.getDestination({ id: d.id })).destination!.ordering).toBe(Ordering.UNORDERED);
    });
  });
});

describe("consent", () => {
  it("consent_categories and consent_missing: set, stored, read back, kept or replaced like ordering and the lists", async () => {
    await withStored(async (record) => {
      const stored = async (id: string) => {
        const r = await record(id);
        return { categories: r.consentCategories, missing: r.consentMissing };
      };
      // Default: no requirement, DELIVER; nothing stored.
      const plain = (await h.admin.createDestination({ destination: valid() })).destination!;
      expect(plain).toMatchObject({ consentCategories: [], consentMissing: ConsentMissing.DELIVER });
      expect(await stored(plain.id)).toEqual({ categories: undefined, missing: undefined });

      const d = (
        await h.admin.createDestination({
          destination: valid({
            consentCategories: ["Analytics", "Advertising"],
            consentMissing: ConsentMissing.FILTER,
          }),
        })
      ).destination!;
      expect(d).toMatchObject({
        consentCategories: ["Analytics", "Advertising"],
        consentMissing: ConsentMissing.FILTER,
      });
      expect((await h.admin.getDestination({ id: d.id })).destination).toEqual(d);
      expect((await h.admin.listDestinations({})).destinations.find((x) => x.id === d.id)).toEqual(d);
      expect(await stored(d.id)).toEqual({ categories: ["Analytics", "Advertising"], missing: "FILTER" });

      // Empty mask: the list is replaced like urls; consent_missing UNSPECIFIED keeps FILTER.
      const replaced = await h.admin.updateDestination({
        destination: {
          id: d.id,
          name: "Renamed",
          sourceIds: [s1],
          urls: ["https://hooks.example.com/in"],
          consentCategories: ["Analytics"],
        },
      });
      expect(replaced.destination).toMatchObject({
        consentCategories: ["Analytics"],
        consentMissing: ConsentMissing.FILTER,
      });
      // A mask naming one field changes only that one.
      const masked = await h.admin.updateDestination({
        destination: { id: d.id, consentCategories: ["Functional"], consentMissing: ConsentMissing.DELIVER },
        updateMask: { paths: ["consent_categories"] },
      });
      expect(masked.destination).toMatchObject({
        name: "Renamed",
        consentCategories: ["Functional"],
        consentMissing: ConsentMissing.FILTER,
      });
      // Named in the mask: UNSPECIFIED means DELIVER (stored as absent); an empty list removes the requirement.
      const cleared = await h.admin.updateDestination({
        destination: { id: d.id },
        updateMask: { paths: ["consent_missing", "consent_categories"] },
      });
      expect(cleared.destination).toMatchObject({
        consentCategories: [],
        consentMissing: ConsentMissing.DELIVER,
      });
      await until(
        async () => {
          const s = await stored(d.id);
          return s.categories === undefined && s.missing === undefined;
        },
        { message: "consent settings removed in the store" },
      );
      // An empty mask without categories removes them too (a list is replaced), and sets FILTER when given.
      await h.admin.updateDestination({
        destination: { id: d.id, consentCategories: ["Analytics"] },
        updateMask: { paths: ["consent_categories"] },
      });
      const unmasked = await h.admin.updateDestination({
        destination: {
          id: d.id,
          name: "Renamed",
          sourceIds: [s1],
          urls: ["https://hooks.example.com/in"],
          consentMissing: ConsentMissing.FILTER,
        },
      });
      expect(unmasked.destination).toMatchObject({
        consentCategories: [],
        consentMissing: ConsentMissing.FILTER,
      });
    });
  });

  it("refuses more than 20 categories, empty, too long, control characters, duplicates and unknown consent_missing, naming each field", async () => {
    const many = Array.from({ length: 21 }, (_, i) => `C${i}`);
    const tooMany = await refused(valid({ consentCategories: many }), ["destination.consent_categories"]);
    expect(tooMany.message).toContain("at most 20 consent categories, got 21");
    const bad = await refused(
      valid({
        consentCategories: ["", "x".repeat(101), "tab\there", "Analytics", "Analytics", "analytics"],
        consentMissing: 5 as ConsentMissing,
      }),
      [
        "destination.consent_categories[0]",
        "destination.consent_categories[1]",
        "destination.consent_categories[2]",
        "destination.consent_categories[4]",
        "destination.consent_missing",
      ],
    );
    expect(bad.message).toContain('"Analytics" is listed twice');
    expect(bad.message).toContain("CONSENT_MISSING_FILTER");
    // 20 categories of 100 characters are fine.
    const max = Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(100, "x"));
    const ok = (await h.admin.createDestination({ destination: valid({ consentCategories: max }) }))
      .destination!;
    expect(ok.consentCategories).toEqual(max);

    // An update is refused the same way and changes nothing.
    const err = await failure(
      h.admin.updateDestination({
        destination: { id: ok.id, consentCategories: ["ok", "ok"], consentMissing: 9 as ConsentMissing },
        updateMask: { paths: ["consent_categories", "consent_missing"] },
      }),
    );
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    expect(fields(err)).toEqual(["destination.consent_categories[1]", "destination.consent_missing"]);
    expect((await h.admin.getDestination({ id: ok.id })).destination!.consentCategories).toEqual(max);
  });
});
