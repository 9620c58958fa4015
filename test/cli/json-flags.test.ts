import { jsonObject } from "@hookpost/cli";
import { InvalidArgumentError } from "commander";
import { describe, expect, it } from "vitest";

describe("JSON object flags (--properties, --traits, --context)", () => {
  it("refuse what JSON.parse would change silently, naming the path (issue 22)", () => {
    const refused = (text: string) => {
      try {
        jsonObject(text);
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidArgumentError);
        return (err as Error).message;
      }
      throw new Error(`accepted ${text}`);
    };
    expect(refused('{"id":9007199254740993}')).toMatch(/^id: .*would arrive as 9007199254740992/);
    expect(refused('{"a":{"k":1,"\\u006b":2}}')).toMatch(/^a\.k: the key "k" appears more than once/);
    expect(refused('{"n":[1e400]}')).toMatch(/^n\[0\]: .*overflows/);
    expect(jsonObject('{"id":9007199254740991,"f":1.0}')).toEqual({ id: 9007199254740991, f: 1 });
  });
});
