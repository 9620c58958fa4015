import { snakeCase } from "@hookpost/api";
import { describe, expect, it } from "vitest";

describe("snakeCase", () => {
  it.each([
    ["High Value Users", "high_value_users"],
    ["highValueUsers", "high_value_users"],
    ["HighValueUsers", "high_value_users"],
    ["high-value users", "high_value_users"],
    ["HIGH_VALUE_USERS", "high_value_users"],
    ["  high   value\tusers  ", "high_value_users"],
    ["high.value/users!", "high_value_users"],
    // acronyms
    ["VIPUsers", "vip_users"],
    ["VIP Users", "vip_users"],
    ["HTMLParser", "html_parser"],
    ["userID", "user_id"],
    ["iOSUsers", "i_os_users"],
    ["ABC", "abc"],
    // digits stay with the letters before them; a capital after digits starts a word
    ["top10Users", "top10_users"],
    ["Top 10 Users", "top_10_users"],
    ["HTML5Parser", "html5_parser"],
    ["mp3 buyers", "mp3_buyers"],
    ["2024 Buyers", "2024_buyers"],
    ["10XGenomics", "10_x_genomics"],
    // punctuation, apostrophes, emoji, symbols
    ["Men's Shoes", "mens_shoes"],
    ["Men’s Shoes", "mens_shoes"],
    ["🔥 Hot Leads 🔥", "hot_leads"],
    ["$$$ spenders (30d)", "spenders_30d"],
    ["a--b__c", "a_b_c"],
    // unicode
    ["Kunden München", "kunden_münchen"],
    ["ÄrgerlicheKunden", "ärgerliche_kunden"],
    ["Cafe\u0301 Lovers", "café_lovers"], // decomposed accent: NFKC composes it
    ["ＶＩＰ　Ｕｓｅｒｓ", "vip_users"], // full-width letters and space
    ["ﬁnance team", "finance_team"], // ligature
    ["日本 ユーザー", "日本_ユーザー"],
    ["日本Users", "日本_users"],
    ["ΜεγάλοιΠελάτες", "μεγάλοι_πελάτες"],
    // nothing usable
    ["!!!", ""],
    ["", ""],
  ])("%j -> %j", (input, expected) => {
    expect(snakeCase(input)).toBe(expected);
  });

  it("is idempotent", () => {
    for (const s of [
      "High Value Users",
      "VIPUsers",
      "top10Users",
      "Kunden München",
      "10XGenomics",
      "日本Users",
    ]) {
      expect(snakeCase(snakeCase(s))).toBe(snakeCase(s));
    }
  });
});
