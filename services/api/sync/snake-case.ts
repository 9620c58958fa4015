/**
 * The trait key of an audience or computed trait name (SPEC section 7): its snake_case form.
 * "High Value Users", "highValueUsers", "HighValueUsers", "high-value users" and
 * "HIGH_VALUE_USERS" all become `high_value_users`.
 *
 * Rules, in order:
 * 1. Unicode NFKC normalization (composed accents, full-width letters become ASCII ones,
 *    ligatures are split), so visually identical names give the same key.
 * 2. Apostrophes are dropped ("Men's Shoes" -> `mens_shoes`).
 * 3. Words are the runs of letters, combining marks and digits; everything else (spaces,
 *    punctuation, symbols, emoji, `_`, `-`) separates words.
 * 4. Inside a run, a new word starts at an upper-case letter that follows a lower-case or
 *    uncased letter or a digit (`highValue` -> high|Value, `top10Users` -> top10|Users), and at
 *    the last capital of an acronym followed by a lower-case letter (`VIPUsers` -> VIP|Users,
 *    `HTML5Parser` -> HTML5|Parser). Letters followed by digits stay one word (`top10`, `mp3`),
 *    so "Top 10 Users" is `top_10_users` while "top10Users" is `top10_users`.
 * 5. Words are lower-cased (locale-independent) and joined with `_`.
 *
 * The result is empty when the name has no letter or digit. snakeCase is idempotent.
 */
export function snakeCase(name: string): string {
  const text = name.normalize("NFKC").replace(/['\u2019\u02BC]/gu, "");
  const words: string[] = [];
  for (const run of text.match(/[\p{L}\p{M}\p{N}]+/gu) ?? []) {
    const split = run
      .replace(/([\p{Ll}\p{Lo}\p{Lm}\p{M}\p{N}])(?=[\p{Lu}\p{Lt}])/gu, "$1\u0000")
      .replace(/([\p{Lu}\p{Lt}])(?=[\p{Lu}\p{Lt}][\p{Ll}])/gu, "$1\u0000");
    for (const w of split.split("\u0000")) if (w !== "") words.push(w.toLowerCase());
  }
  return words.join("_");
}
