import { randomBytes } from "node:crypto";
import type { IngestHandle } from "@hookpost/api";
import { adminMetadata, createClient } from "@hookpost/client";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { DeadLetters, DeletionStore } from "@hookpost/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STACK_OPTIONS } from "../e2e/helpers.js";
import { startTestIngest } from "../helpers/ingest.js";
import { Receiver } from "../helpers/receiver.js";
import { adminClient, type IngestClient, STACK_ADMIN_TOKEN, Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";

/*
 * Erasure across a restart: the API that took a deletion request stops before it erased anything;
 * another API process started later (here in-process, on the same NATS) finds the request in the
 * deletions bucket, erases, and GetDeletion on it says done.
 */

let stack: Stack;
let src: { id: string; client: IngestClient };
let receiver: Receiver;
let later: IngestHandle | undefined;
const MARKER = `restart-marker-${randomBytes(6).toString("hex")}`;

beforeAll(async () => {
  // This ingest's worker would look only in an hour: it never erases within the test.
  stack = await Stack.start({
    ...STACK_OPTIONS,
    ingest: { erasure: { intervalMs: 3_600_000, settleMs: 500, statusMaxAgeMs: 86_400_000 } },
  });
  receiver = await Receiver.http();
  receiver.respond = () => ({ status: 400 });
  src = await stack.source("restart");
  await stack.destination({ id: "refusing", sourceIds: [src.id], urls: [receiver.url()] });
});

afterAll(async () => {
  await later?.close();
  await stack?.close();
  await receiver?.close();
});

describe("erasure across a restart", () => {
  it("a request taken by an API that stopped is erased by the next one", async () => {
    await src.client.track({ userId: "restart-user", event: "E", properties: { note: MARKER } });
    const dead = await DeadLetters.open(stack.nc);
    await until(async () => (await dead.list("refusing")).length === 1, { message: "the dead letter" });

    const admin = createClient(IngestService, stack.ingest.address, {
      metadata: adminMetadata(STACK_ADMIN_TOKEN),
    });
    const { requestId } = await admin.delete({ userId: "restart-user" });
    admin.close();
    // Stopped before its worker's next look (a second after the request at the earliest).
    await stack.ingest.close();
    const deletions = await DeletionStore.open(stack.nc, { maxAgeMs: 86_400_000 });
    expect((await deletions.get(requestId))?.doneTime).toBeUndefined();
    expect((await dead.list("refusing"))[0]?.body).toContain(MARKER);

    later = await startTestIngest(stack.nats.url, STACK_ADMIN_TOKEN, {
      erasure: { intervalMs: 200, settleMs: 500, statusMaxAgeMs: 86_400_000 },
    });
    const laterAdmin = adminClient(later.address);
    try {
      const status = await until(
        async () => {
          const s = await laterAdmin.getDeletion({ requestId });
          return s.doneTime ? s : undefined;
        },
        { timeout: 30_000, interval: 200, message: "done after the restart" },
      );
      expect(status.erasedDeadLetters).toBe(1n);
      expect(status.notifiedSourceIds).toEqual([src.id]);
    } finally {
      laterAdmin.close();
    }
    // Left: the deletion notice, which the refusing receiver dead-lettered too.
    const left = await until(async () => {
      const l = await dead.list("refusing");
      return l.length > 0 ? l : undefined;
    });
    expect(left.map((l) => JSON.parse(l.body).type)).toEqual(["delete"]);
    expect(JSON.stringify(left)).not.toContain(MARKER);
  });
});
