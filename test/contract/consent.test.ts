import {
  CALL_TYPES,
  consentCategoriesViolations,
  consentDecision,
  consentMissingViolations,
  filteredText,
  MAX_CONSENT_CATEGORIES,
} from "@hookpost/contract";
import { ConsentMissing } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import fc from "fast-check";
import { describe, expect, it } from "vitest";

/** Consent per destination (issue 26): the rule and the limits of the contract, as pure functions. */

const withConsent = (categoryPreferences: unknown, type = "track") => ({
  type,
  context: { consent: { categoryPreferences } },
});

describe("the consent rule", () => {
  it("no categories: every call is delivered, with or without consent", () => {
    for (const settings of [
      {},
      { consentCategories: [] },
      { consentCategories: [], consentMissing: "FILTER" as const },
    ]) {
      expect(consentDecision({ type: "track" }, settings)).toEqual({ deliver: true });
      expect(consentDecision(withConsent({ Analytics: false }), settings)).toEqual({ deliver: true });
    }
  });

  it("delivers only when every category is true; names the ones not granted", () => {
    const dest = { consentCategories: ["Analytics", "Advertising"] };
    expect(consentDecision(withConsent({ Analytics: true, Advertising: true, Other: false }), dest)).toEqual({
      deliver: true,
    });
    expect(consentDecision(withConsent({ Analytics: true }), dest)).toEqual({
      deliver: false,
      reason: 'consent: "Advertising" not granted',
    });
    expect(consentDecision(withConsent({ Analytics: "true", Advertising: 1 }), dest)).toEqual({
      deliver: false,
      reason: 'consent: "Analytics", "Advertising" not granted',
    });
    // Case-sensitive names; an empty preferences object is a consent object that grants nothing.
    expect(consentDecision(withConsent({ analytics: true, advertising: true }), dest).deliver).toBe(false);
    expect(consentDecision(withConsent({}), { ...dest, consentMissing: undefined })).toEqual({
      deliver: false,
      reason: 'consent: "Analytics", "Advertising" not granted',
    });
    // Inherited properties are not preferences.
    expect(consentDecision(withConsent({}), { consentCategories: ["toString"] }).deliver).toBe(false);
    expect(
      consentDecision(withConsent(JSON.parse('{"__proto__": true}')), { consentCategories: ["__proto__"] }),
    ).toEqual({ deliver: true });
  });

  it("a call without a consent object follows consent_missing: delivered by default, filtered with FILTER", () => {
    const deliver = { consentCategories: ["Analytics"] };
    const filter = { consentCategories: ["Analytics"], consentMissing: "FILTER" as const };
    const without = [
      { type: "track" },
      { type: "track", context: {} },
      { type: "track", context: { consent: {} } },
      { type: "track", context: { consent: "yes" } },
      withConsent(null),
      withConsent(["Analytics"]),
      withConsent("Analytics"),
      { type: "track", context: "not an object" },
    ];
    for (const call of without) {
      expect(consentDecision(call, deliver), JSON.stringify(call)).toEqual({ deliver: true });
      expect(consentDecision(call, filter), JSON.stringify(call)).toEqual({
        deliver: false,
        reason: "consent: no consent object",
      });
    }
  });

  it("applies to every call type; a deletion notice is never filtered", () => {
    const dest = { consentCategories: ["Analytics"], consentMissing: "FILTER" as const };
    for (const type of CALL_TYPES) {
      expect(consentDecision(withConsent({ Analytics: false }, type), dest).deliver, type).toBe(false);
      expect(consentDecision(withConsent({ Analytics: true }, type), dest).deliver, type).toBe(true);
    }
    expect(consentDecision({ type: "delete" }, dest)).toEqual({ deliver: true });
    expect(consentDecision(withConsent({ Analytics: false }, "delete"), dest)).toEqual({ deliver: true });
  });

  it("property: for any categories and preferences, delivered iff every category is true", () => {
    const name = fc.oneof(
      fc.constantFrom("Analytics", "Advertising", "Functional", "analytics"),
      fc.string(),
    );
    const value = fc.oneof(fc.boolean(), fc.constant(null), fc.integer(), fc.string(), fc.constant("true"));
    fc.assert(
      fc.property(
        fc.uniqueArray(name, { maxLength: 6 }),
        fc.dictionary(name, value),
        fc.boolean(),
        (categories, preferences, filterMissing) => {
          const settings = {
            consentCategories: categories,
            ...(filterMissing ? { consentMissing: "FILTER" as const } : {}),
          };
          const d = consentDecision(withConsent(preferences), settings);
          const granted = categories.every((c) => Object.hasOwn(preferences, c) && preferences[c] === true);
          expect(d.deliver).toBe(granted);
          if (granted) expect(d.reason).toBeUndefined();
          else expect(d.reason).toMatch(/^consent: ".*" not granted$/s);
          // Without a consent object: consent_missing alone decides (when there are categories).
          const missing = consentDecision({ type: "identify" }, settings);
          expect(missing.deliver).toBe(categories.length === 0 || !filterMissing);
        },
      ),
    );
  });
});

describe("filtered text", () => {
  it("shows the filter and its detail", () => {
    expect(filteredText('consent: "Advertising" not granted')).toBe(
      'filtered: consent ("Advertising" not granted)',
    );
    expect(filteredText("consent: no consent object")).toBe("filtered: consent (no consent object)");
    expect(filteredText("integrations: webhooks turned off")).toBe(
      "filtered: integrations (webhooks turned off)",
    );
    expect(filteredText("")).toBe("filtered");
    expect(filteredText(undefined)).toBe("filtered");
  });
});

describe("consent limits", () => {
  const F = "destination.consent_categories";
  it("accepts up to 20 distinct categories of 1..100 characters of text", () => {
    expect(consentCategoriesViolations([], F)).toEqual([]);
    expect(
      consentCategoriesViolations(["Analytics", "analytics", "Données personnelles", "x".repeat(100)], F),
    ).toEqual([]);
    expect(consentCategoriesViolations(["😀".repeat(100)], F)).toEqual([]);
    const twenty = Array.from({ length: MAX_CONSENT_CATEGORIES }, (_, i) => `C${i}`);
    expect(consentCategoriesViolations(twenty, F)).toEqual([]);
  });

  it("names the field of each problem", () => {
    expect(
      consentCategoriesViolations(
        Array.from({ length: 21 }, (_, i) => `C${i}`),
        F,
      ),
    ).toEqual([{ field: F, description: "at most 20 consent categories, got 21" }]);
    expect(
      consentCategoriesViolations(["", "  ", "x".repeat(101), "a\nb", "a\u0085b", "Ads", "Ads"], F),
    ).toEqual([
      { field: `${F}[0]`, description: "is empty: a consent category is 1 to 100 characters" },
      { field: `${F}[1]`, description: "is empty: a consent category is 1 to 100 characters" },
      { field: `${F}[2]`, description: "is too long: at most 100 characters, got 101" },
      { field: `${F}[3]`, description: "must not contain control characters" },
      { field: `${F}[4]`, description: "must not contain control characters" },
      { field: `${F}[6]`, description: '"Ads" is listed twice' },
    ]);
  });

  it("consent_missing: the enum's values, anything else is refused", () => {
    for (const v of [ConsentMissing.UNSPECIFIED, ConsentMissing.DELIVER, ConsentMissing.FILTER]) {
      expect(consentMissingViolations(v, "destination.consent_missing")).toEqual([]);
    }
    expect(consentMissingViolations(7, "destination.consent_missing")).toEqual([
      {
        field: "destination.consent_missing",
        description: "unknown consent_missing 7: use CONSENT_MISSING_DELIVER or CONSENT_MISSING_FILTER",
      },
    ]);
  });
});
