import { describe, expect, it } from "vitest";
import { hookpost } from "./run-cli.js";

// An admin token that a gRPC header cannot carry (a CR left by a CRLF env file, a non-ASCII
// character): grpc-js refuses it with an error that quotes the whole header value. The CLI must
// say what is wrong without printing the token, in text and in --json. Nothing is sent, so no
// server is needed.

const TOKEN = "crlf-admin-token-0123456789";

describe("an admin token a header cannot carry", () => {
  it.each([
    ["a carriage return", `${TOKEN}\r`],
    ["a non-ASCII character", `${TOKEN}é`],
  ])("with %s: a usage error naming the token's problem, never the token", async (_what, token) => {
    for (const json of [false, true]) {
      const r = await hookpost([...(json ? ["--json"] : []), "sources", "list"], {
        HOOKPOST_ENDPOINT: "127.0.0.1:1",
        ADMIN_TOKEN: token,
      });
      expect(r.stdout + r.stderr).not.toContain(TOKEN);
      expect(r.code).toBe(2);
      const message = json ? JSON.parse(r.stderr).error.message : r.stderr;
      expect(message).toMatch(/admin token .*cannot carry/);
    }
  });
});
