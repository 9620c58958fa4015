import { createHmac } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "../helpers/stack.js";

let stack: Stack;

beforeAll(async () => {
  stack = await Stack.start();
});

afterAll(async () => {
  await stack?.close();
});

describe("gRPC call to signed webhook, end to end", () => {
  it("delivers a track call as the exact signed body", async () => {
    const src = await stack.source("web");
    await stack.destination({ sourceIds: [src.id], sharedSecret: "s3cret" });
    const { messageId } = await src.client.track({
      userId: "u-1",
      event: "Signed Up",
      properties: { plan: "pro" },
      timestamp: timestampFromDate(new Date("2026-11-21T09:30:00.000Z")),
    });
    const [req] = await stack.receiver.waitFor(1);
    const body =
      '{"version":1,"type":"track","userId":"u-1","event":"Signed Up","properties":{"plan":"pro"},' +
      '"timestamp":"2026-11-21T09:30:00.000Z","context":{}}';
    expect(req!.body.toString()).toBe(body);
    expect(req!.headers["idempotency-key"]).toBe(messageId);
    expect(req!.headers["user-agent"]).toBe("Hookpost/1.0");
    expect(req!.headers["x-signature"]).toBe(createHmac("sha1", "s3cret").update(body).digest("hex"));
  });
});
