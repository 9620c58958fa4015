import { identifyJsonRenderer, type SyncSubject } from "@hookpost/api";
import { EncodedHeaders, msgIdHeaders } from "@hookpost/core";
import { MsgHdrsImpl } from "nats";
import { describe, expect, it } from "vitest";

describe("identify call JSON of a sync", () => {
  const subjects: SyncSubject[] = [
    { kind: "audience", sourceId: "src_1", name: 'V"I\\P 😀', key: "v_i_p" },
    { kind: "trait", sourceId: "src_2", name: "LTV", key: "ünïcode" },
  ];
  const users = [
    "u1",
    'quote"and\\\\n',
    "tab\tnew\nline\r",
    "emoji 😀 and \u2028",
    "lone \ud800",
    "<\u0000>",
  ];
  const values = [
    "true",
    "false",
    "null",
    '{"a":"\\"x","b":[1,2.5,-3e+21]}',
    '"\\ud800 😀"',
    '{"9":1,"10":2}',
  ];

  it("renders byte for byte what JSON.stringify renders for the call", () => {
    const at = "2026-11-23T10:00:00.000Z";
    for (const s of subjects) {
      const context = { audience: { name: s.name, key: s.key } };
      const render = identifyJsonRenderer(s, at, context);
      for (const userId of users) {
        for (const v of values) {
          const call = {
            type: "identify",
            messageId: "aud_0123456789abcdefABCDEF-_",
            sourceId: s.sourceId,
            receivedAt: at,
            timestamp: at,
            userId,
            context,
            traits: { [s.key]: JSON.parse(v) },
          };
          expect(render(call.messageId, userId, v)).toBe(JSON.stringify(call));
        }
      }
    }
  });
});

describe("prerendered NATS headers", () => {
  it("msgIdHeaders encodes as headers().set does, for plain and other ids", () => {
    for (const id of ["src_1:aud_AbC-_09", " padded ", "with space", "ünï"]) {
      const reference = new MsgHdrsImpl();
      reference.set("Nats-Msg-Id", id);
      const h = msgIdHeaders(id);
      expect(Buffer.from(h.encode()).toString()).toBe(Buffer.from(reference.encode()).toString());
      expect(h.get("Nats-Msg-Id")).toBe(reference.get("Nats-Msg-Id"));
    }
    expect(() => msgIdHeaders("a\r\nb")).toThrow();
  });

  it("EncodedHeaders renders again after a change", () => {
    const h = new EncodedHeaders();
    h.set("A", "1");
    const first = Buffer.from(h.encode()).toString();
    expect(h.encode()).toBe(h.encode());
    h.set("A", "2");
    h.append("B", "3");
    const ref = new MsgHdrsImpl();
    ref.set("A", "2");
    ref.append("B", "3");
    expect(first).toContain("A: 1");
    expect(Buffer.from(h.encode()).toString()).toBe(Buffer.from(ref.encode()).toString());
  });
});
