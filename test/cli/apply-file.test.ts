import type { DestinationView } from "@hookpost/cli";
import { diff, InputError, parseApplyFile } from "@hookpost/cli";
import { describe, expect, it } from "vitest";

function problems(text: string, name = "f.yaml", env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseApplyFile(text, name, env);
  } catch (err) {
    if (err instanceof InputError)
      return [err.message, ...err.problems.map((p) => `${p.path}: ${p.message}`)];
    throw err;
  }
  return [];
}

/** The problems of the file f.yaml, once its first line, the summary, has counted them. */
function counted(text: string, env: NodeJS.ProcessEnv = {}): string[] {
  const [summary, ...rest] = problems(text, "f.yaml", env);
  const n = rest.length;
  expect(summary).toBe(`f.yaml has ${n} ${n === 1 ? "problem" : "problems"}; nothing was changed`);
  return rest;
}

/** The problem of a file that has exactly one. */
function oneProblem(text: string, env: NodeJS.ProcessEnv = {}): string {
  const rest = counted(text, env);
  expect(rest).toHaveLength(1);
  return rest[0]!;
}

/** A file with source web and destination d1 to it; `more` are d1's further lines (from line 8). */
const oneDestination = (more: string) => `
sources: [{ id: web, name: Web }]
destinations:
  - id: d1
    name: D1
    sources: [web]
    urls: [https://a.example.com/h]
${more}
`;

/** The first destination of `text`, parsed as the file f.yaml with environment `env`. */
const firstDestination = (text: string, env: NodeJS.ProcessEnv = {}) =>
  parseApplyFile(text, "f.yaml", env).destinations[0]!;

/** d1 with the further lines `good` reads as `read`; with the lines `bad`, the file's problems are `problems`. */
function readsAndRefuses(good: string, read: Record<string, unknown>, bad: string, problems: string[]): void {
  expect(firstDestination(oneDestination(good))).toMatchObject(read);
  expect(counted(oneDestination(bad))).toEqual(problems);
}

/** What a file's destination is where it says nothing: the server's defaults. */
const DEFAULTS = {
  signing: "segment",
  ordering: "unordered",
  consentCategories: [],
  consentMissing: "deliver",
  filter: null,
  mapping: "",
  method: "POST",
  retry: null,
  batching: null,
  deliveryMode: "failover",
  enabled: true,
} as const;

describe("apply file", () => {
  it("parses a full file with defaults", () => {
    const file = parseApplyFile(
      oneDestination("    headers: { X-Version: 2 }\n    secretEnv: D1_SECRET"),
      "f.yaml",
      { D1_SECRET: "abc" },
    );
    expect(file.sources).toEqual([{ id: "web", name: "Web", allowedOrigins: [], path: "sources[0]" }]);
    expect(file.destinations).toEqual([
      {
        id: "d1",
        name: "D1",
        sourceIds: ["web"],
        urls: ["https://a.example.com/h"],
        headers: { "X-Version": "2" },
        secret: "abc",
        ...DEFAULTS,
        path: "destinations[0]",
      },
    ]);
  });

  it("reads a source's allowedOrigins as the server stores them; bad ones are problems at their paths", () => {
    const file = (origins: string) => `sources: [{ id: web, name: Web, allowedOrigins: ${origins} }]`;
    expect(
      parseApplyFile(file("[HTTPS://Shop.Example.com:443/, 'https://*.example.org']"), "f.yaml", {})
        .sources[0]!.allowedOrigins,
    ).toEqual(["https://shop.example.com", "https://*.example.org"]);
    expect(counted(file("[shop.example.com, 'https://a.com/path', https://a.com, https://a.com]"))).toEqual([
      "sources[0].allowedOrigins[0]: must start with http:// or https:// (for example https://shop.example.com) (line 1)",
      "sources[0].allowedOrigins[1]: must be an origin only (scheme://host[:port]), without a path, query or fragment (line 1)",
      "sources[0].allowedOrigins[3]: is listed twice (line 1)",
    ]);
    expect(oneProblem(file("https://a.com"))).toBe(
      "sources[0].allowedOrigins: must be a list of origins such as https://shop.example.com (line 1)",
    );
  });

  it("reads ordering: per-user or unordered, anything else is a problem at its line", () => {
    const file = (ordering: string) => oneDestination(`    ordering: ${ordering}`);
    expect(firstDestination(file("per-user")).ordering).toBe("per-user");
    expect(firstDestination(file("unordered")).ordering).toBe("unordered");
    expect(oneProblem(file("PER_USER"))).toBe(
      "destinations[0].ordering: must be one of unordered, per-user (line 8)",
    );
  });

  it("reads filter, mapping, method and retry; wrong ones are problems at their paths", () => {
    // Empty parts are left out and durations normalised, as the server shows them: re-applies compare equal.
    readsAndRefuses(
      "    filter: { types: [track], events: [], expression: 'event = \"A\"' }\n    mapping: '{\"a\": 1}'\n    method: PATCH\n    retry: { window: 7200s, delays: [60s] }",
      {
        filter: { types: ["track"], expression: 'event = "A"' },
        mapping: '{"a": 1}',
        method: "PATCH",
        retry: { window: "2h", delays: ["1m"] },
      },
      "    filter: { types: [purchase], event: [x] }\n    mapping: 3\n    method: DELETE\n    retry: { delays: [soon] }",
      [
        "destinations[0].method: must be one of POST, PUT, PATCH (line 10)",
        'destinations[0].filter.event: unknown key (did you mean "events"?); expected types, events, expression (line 8)',
        'destinations[0].filter.types[0]: unknown call type "purchase": use identify, track, page, screen, group, alias, delete (line 8)',
        "destinations[0].mapping: must be text (a JSONata expression) (line 9)",
        'destinations[0].retry.delays[0]: not a duration: "soon" (use e.g. 30s, 10m, 4h) (line 11)',
      ],
    );
  });

  it("reads batching and deliveryMode; wrong ones are problems at their paths", () => {
    readsAndRefuses(
      "    batching: { maxCalls: 50, maxWait: 1000ms }\n    deliveryMode: fan-out",
      { batching: { maxCalls: 50, maxWait: "1s" }, deliveryMode: "fan-out" },
      "    batching: { maxCalls: 5000, maxBytes: 10, maxWait: 2m, calls: 3 }\n    deliveryMode: FAN_OUT",
      [
        "destinations[0].batching.calls: unknown key; expected maxCalls, maxBytes, maxWait (line 8)",
        "destinations[0].batching.maxCalls: must be 1 to 1000 calls, got 5000 (line 8)",
        "destinations[0].batching.maxBytes: must be 1024 to 1048576 bytes (1 KiB to 1 MiB), got 10 (line 8)",
        "destinations[0].batching.maxWait: must be 0s to 1m, got 2m (line 8)",
        "destinations[0].deliveryMode: must be one of failover, fan-out (line 9)",
      ],
    );
    expect(firstDestination(oneDestination("    batching: {}")).batching).toEqual({});
  });

  it("reads consentCategories and consentMissing; the server's limits are problems at their paths", () => {
    expect(oneProblem(oneDestination("    consentCategories: Analytics"))).toBe(
      "destinations[0].consentCategories: must be a list of consent category names (line 8)",
    );
    readsAndRefuses(
      "    consentCategories: [Analytics, Advertising]\n    consentMissing: filter",
      { consentCategories: ["Analytics", "Advertising"], consentMissing: "filter" },
      "    consentCategories: [Analytics, Analytics, '']\n    consentMissing: drop",
      [
        "destinations[0].consentMissing: must be one of deliver, filter (line 9)",
        'destinations[0].consentCategories[1]: "Analytics" is listed twice (line 8)',
        "destinations[0].consentCategories[2]: is empty: a consent category is 1 to 100 characters (line 8)",
      ],
    );
  });

  it("names every problem by path", () => {
    expect(
      counted(`
sources:
  - { id: "bad id", name: "" }
  - { id: web, name: Web }
  - { id: web, name: Again }
destinations:
  - name: No id
    sources: []
    urls: [https://a, https://b, https://c, https://d, https://e, https://f]
  - id: d2
    name: D2
    sources: [web, web]
    urls: "https://a.example.com"
    headers: { "bad name": x, Webhook-Id: y, X-A: "a\\nb" }
    secret: plain
    secretEnv: ALSO
  - id: d3
    name: D3
    sources: [web]
    urls: [https://a.example.com]
    signing: standard-webhooks
    secret: not-whsec
    enabled: "yes"
`),
    ).toEqual([
      "sources[0].id: must be 1 to 64 letters, digits, '-' or '_' (line 3)",
      "sources[0].name: must be a non-empty string (line 3)",
      "destinations[0].id: is required (re-applies find things by id) (line 7)",
      "destinations[0].sources: must be a non-empty list of source ids (line 8)",
      "destinations[0].urls: at most 5 URLs, got 6 (line 9)",
      'destinations[1].sources[1]: "web" is listed twice (line 12)',
      "destinations[1].urls: must be a list of URLs (line 13)",
      'destinations[1].headers["bad name"]: name must be an HTTP token (letters, digits and !#$%&\'*+-.^_`|~) (line 14)',
      'destinations[1].headers["Webhook-Id"]: "Webhook-Id" is set by Hookpost and cannot be configured (line 14)',
      'destinations[1].headers["X-A"]: value must not contain CR, LF or NUL (line 14)',
      "destinations[1].secretEnv: give either `secret` or `secretEnv`, not both (line 16)",
      "destinations[2].enabled: must be true or false (line 23)",
      "destinations[2].secret: the shared secret is not a Standard Webhooks secret: it must start with whsec_ (line 22)",
      'sources[2].id: "web" is also the id of sources[1]',
    ]);
  });

  it("applies the server's rules: standard-webhooks needs a whsec_ secret, also from secretEnv", () => {
    const file = (extra: string) => `
destinations:
  - id: d1
    name: D1
    sources: [web]
    urls: [https://a.example.com]
    signing: standard-webhooks
${extra}`;
    expect(problems(file(""))[1]).toBe(
      "destinations[0].secret: standard-webhooks signing needs a shared secret (whsec_ + base64 of 24 to 64 random bytes) (line 3)",
    );
    expect(problems(file("    secretEnv: SW"), "f.yaml", { SW: "whsec_c2hvcnQ=" })[1]).toBe(
      "destinations[0].secretEnv: the shared secret is not a Standard Webhooks secret: it decodes to 5 bytes; use 24 to 64 (line 8)",
    );
    const ok = parseApplyFile(file("    secretEnv: SW"), "f.yaml", {
      SW: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    });
    expect(ok.destinations[0]!.secret).toBe("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  });

  it("standard-webhooks-ed25519: a key is optional (the server generates one); a given one must be whsk_", () => {
    const file = (extra: string) => oneDestination(`    signing: standard-webhooks-ed25519\n${extra}`);
    const generated = firstDestination(file(""));
    expect(generated.signing).toBe("standard-webhooks-ed25519");
    expect(generated.secret).toBeUndefined();
    const key = `whsk_${Buffer.alloc(32, 1).toString("base64")}`;
    expect(firstDestination(file("    secretEnv: KEY"), { KEY: key }).secret).toBe(key);
    expect(oneProblem(file("    secretEnv: KEY"), { KEY: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" })).toBe(
      "destinations[0].secretEnv: the shared secret is not an Ed25519 secret key (whsk_): it must start with whsk_ (line 9)",
    );
    expect(problems(file("    secret: whsk_AAAA"))[1]).toBe(
      "destinations[0].secret: the shared secret is not an Ed25519 secret key (whsk_): it decodes to 3 bytes; an Ed25519 private key is 32 (or 64: private then public key) (line 9)",
    );
    expect(problems(oneDestination("    signing: ed25519"))[1]).toBe(
      "destinations[0].signing: must be one of segment, standard-webhooks, standard-webhooks-ed25519 (line 8)",
    );
  });

  it("refuses empty files, non-mappings, unknown top-level keys and bad syntax", () => {
    expect(oneProblem("")).toBe(
      "(file): the file is empty: expected `sources:`, `destinations:` and/or `operatorWebhooks:`",
    );
    expect(problems("- a\n- b\n")[1]).toBe(
      "(file): expected a mapping with `sources:`, `destinations:` and/or `operatorWebhooks:`",
    );
    expect(problems("source: []\n")[1]).toBe(
      'source: unknown key (did you mean "sources"?); expected sources, destinations, operatorWebhooks (line 1)',
    );
    expect(problems("sources: {id: x}\n")[1]).toBe("sources: expected a list (line 1)");
    expect(problems("a: [\n")[0]).toMatch(/^f\.yaml is not valid YAML \(line \d+, column \d+\): /);
    expect(problems('{"sources": [,]}', "f.json")[0]).toMatch(/^f\.json is not valid JSON: /);
  });
});

describe("apply diff", () => {
  const current: DestinationView = {
    id: "d1",
    name: "D1",
    sourceIds: ["a", "b"],
    urls: ["https://a.example.com"],
    headers: { "x-team": "growth" },
    sharedSecretSet: true,
    ...DEFAULTS,
    consentCategories: ["Analytics"],
    createTime: null,
    updateTime: null,
    signingPublicKeys: [],
  };
  const want = {
    id: "d1",
    name: "D1",
    sourceIds: ["b", "a"],
    urls: ["https://a.example.com/"],
    headers: { "X-Team": "growth" },
    secret: "s",
    ...DEFAULTS,
    consentCategories: ["Analytics"],
    path: "destinations[0]",
  };

  it("ignores source order, URL normalisation and header-name case; secrets compare by presence", () => {
    expect(diff(current, want, false)).toEqual([]);
    expect(diff(current, want, true)).toEqual(["shared_secret"]);
    const { secret: _secret, ...noSecret } = want;
    expect(diff(current, noSecret, false)).toEqual(["shared_secret"]);
    expect(diff({ ...current, sharedSecretSet: false }, noSecret, false)).toEqual([]);
  });

  it("leaves a server-generated Ed25519 key alone when the file gives none", () => {
    const { secret: _secret, ...noSecret } = want;
    const ed = { ...noSecret, signing: "standard-webhooks-ed25519" as const };
    const edCurrent = {
      ...current,
      signing: "standard-webhooks-ed25519" as const,
      signingPublicKeys: ["whpk_k"],
    };
    // Re-applying does not clear (and so replace) the key.
    expect(diff(edCurrent, ed, false)).toEqual([]);
    // Switching to it changes only the signing: the server then makes the key.
    expect(diff(current, ed, false)).toEqual(["signing"]);
    // A key in the file is a secret like any other: sent on a switch, or with --update-secrets.
    expect(diff(current, { ...ed, secret: "whsk_x" }, false)).toEqual(["shared_secret", "signing"]);
    expect(diff(edCurrent, { ...ed, secret: "whsk_x" }, true)).toEqual(["shared_secret"]);
  });

  it("names every changed field as an update-mask path", () => {
    expect(
      diff(
        current,
        {
          ...want,
          name: "New",
          sourceIds: ["a"],
          urls: ["https://b.example.com"],
          headers: {},
          signing: "standard-webhooks",
          ordering: "per-user",
          enabled: false,
        },
        false,
      ),
    ).toEqual(["name", "source_ids", "urls", "headers", "shared_secret", "signing", "ordering", "enabled"]);
  });

  it("compares consent categories in order (case-sensitive) and what calls without consent get", () => {
    const consent = (c: string[], m: "deliver" | "filter" = "deliver") =>
      diff(current, { ...want, consentCategories: c, consentMissing: m }, false);
    expect(consent(["Analytics"])).toEqual([]);
    expect(consent(["Analytics", "Advertising"])).toEqual(["consent_categories"]);
    expect(consent([])).toEqual(["consent_categories"]);
    expect(consent(["analytics"], "filter")).toEqual(["consent_categories", "consent_missing"]);
    expect(consent(["Analytics"], "filter")).toEqual(["consent_missing"]);
  });
});
