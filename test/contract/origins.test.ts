import {
  allowedOriginsViolations,
  MAX_ALLOWED_ORIGINS,
  normalizeOrigin,
  originAllowed,
} from "@hookpost/contract";
import { describe, expect, it } from "vitest";

/** The problem normalizeOrigin names for `text` (undefined when it is an origin). */
const problem = (text: string) => {
  const r = normalizeOrigin(text);
  return "problem" in r ? r.problem : undefined;
};

describe("a source's allowed_origins (issue 29)", () => {
  it("normalises what people type to what browsers send", () => {
    const cases: Record<string, string> = {
      "HTTPS://Shop.Example.com": "https://shop.example.com",
      "https://shop.example.com/": "https://shop.example.com",
      "https://shop.example.com:443": "https://shop.example.com",
      "http://localhost:80": "http://localhost",
      "http://localhost:3000": "http://localhost:3000",
      "http://127.0.0.1:8080": "http://127.0.0.1:8080",
      "http://[::1]:8080": "http://[::1]:8080",
      "https://bücher.example": "https://xn--bcher-kva.example",
      "https://*.Example.org": "https://*.example.org",
      "https://*.example.org:8443/": "https://*.example.org:8443",
      "  https://a.com  ": "https://a.com",
    };
    for (const [typed, stored] of Object.entries(cases))
      expect(normalizeOrigin(typed), typed).toEqual({ origin: stored });
  });

  it("refuses what is no origin, saying why", () => {
    expect(problem("")).toBe("is empty");
    expect(problem("*")).toMatch(/leave allowed_origins empty/);
    expect(problem("null")).toMatch(/leave allowed_origins empty/);
    expect(problem("shop.example.com")).toMatch(/http:\/\/ or https:\/\//);
    expect(problem("ftp://x.com")).toBe("must use http or https");
    expect(problem("https://u:p@x.com")).toMatch(/user name/);
    for (const t of ["https://a.com/x", "https://a.com?q", "https://a.com#f", "https://a.com/?q=1"]) {
      expect(problem(t), t).toMatch(/origin only/);
    }
    expect(problem("https://a.*.com")).toMatch(/first label/);
    expect(problem("https://**.a.com")).toMatch(/first label/);
    expect(problem(`https://${"a".repeat(300)}.com`)).toMatch(/longer than/);
    expect(problem("https://exa mple.com")).toMatch(/not a valid origin/);
  });

  it("lists: problems at their index, repeats after normalising, at most 100", () => {
    expect(allowedOriginsViolations([], "o")).toEqual([]);
    expect(allowedOriginsViolations(["https://a.com", "x", "HTTPS://A.com/"], "o")).toEqual([
      { field: "o[1]", description: expect.stringContaining("https://") },
      { field: "o[2]", description: "is listed twice" },
    ]);
    const many = Array.from({ length: MAX_ALLOWED_ORIGINS + 1 }, (_, i) => `https://s${i}.example.com`);
    expect(allowedOriginsViolations(many, "o")).toEqual([
      { field: "o", description: "at most 100 origins, got 101" },
    ]);
  });

  it("matches a browser's Origin: exactly, or a subdomain at any depth of a wildcard, same scheme and port", () => {
    const allowed = ["https://shop.example.com", "https://*.example.org", "http://*.local.test:8080"];
    const yes = [
      "https://shop.example.com",
      "https://a.example.org",
      "https://a.b.example.org",
      "http://x.local.test:8080",
    ];
    const no = [
      "http://shop.example.com",
      "https://shop.example.com:8443",
      "https://example.org",
      "https://aexample.org",
      "https://a.example.org:444",
      "http://a.example.org",
      "https://a.example.org.evil.com",
      "https://evil.com/.example.org",
      "http://x.local.test",
      "http://x.local.test:80800",
      "null",
      "",
    ];
    for (const o of yes) expect(originAllowed(o, allowed), o).toBe(true);
    for (const o of no) expect(originAllowed(o, allowed), o).toBe(false);
    expect(originAllowed("https://anything.example", [])).toBe(true);
    expect(originAllowed("null", undefined)).toBe(true);
  });
});
