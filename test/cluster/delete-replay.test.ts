import { deleteMessages } from "@hookpost/core";
import { type JetStreamManager, type NatsConnection, RetentionPolicy, StorageType } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsCluster } from "../helpers/nats-cluster.js";
import { until } from "../helpers/until.js";

/**
 * Removing one destination's (or one user's) messages from a replicated stream must leave every
 * other message on every replica, also on a replica that restarts afterwards. nats-server 2.9.10
 * replays a filtered purge on a recovering replica as a purge of the whole stream up to that point
 * (nats-server issue #4196): a node restarted after a destination was deleted, once it leads,
 * would have lost every other destination's pending deliveries. Hookpost deletes one by one
 * (core's deleteMessages); this test kills a replica -9 after such a removal, restarts it, makes
 * it the stream's leader, and counts what it holds.
 */

const STREAM = "REPLAY_TEST";
const KEPT = 200;
const REMOVED = 100;

let cluster: NatsCluster;
let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  cluster = await NatsCluster.start(3);
  nc = await cluster.connect();
  jsm = await nc.jetstreamManager();
});

afterAll(async () => {
  await nc?.close();
  await cluster?.stop();
});

/** Asks the stream's leader to step down until `name` leads it. */
async function makeLeader(name: string): Promise<void> {
  await until(
    async () => {
      const leader = await cluster.streamLeader(STREAM);
      if (leader === name) return true;
      await nc
        .request(`$JS.API.STREAM.LEADER.STEPDOWN.${STREAM}`, undefined, { timeout: 5000 })
        .catch(() => {});
      return false;
    },
    { timeout: 90_000, interval: 500, message: `${name} leading ${STREAM}` },
  );
}

describe("removing one subject's messages from a replicated stream", () => {
  it("leaves every other message on a replica killed -9 and restarted afterwards", async () => {
    // Right after start the meta leader may not know every peer yet ("no suitable peers").
    await until(
      () =>
        jsm.streams
          .add({
            name: STREAM,
            subjects: ["replay.>"],
            retention: RetentionPolicy.Workqueue,
            storage: StorageType.File,
            num_replicas: 3,
          })
          .then(
            () => true,
            () => false,
          ),
      { timeout: 60_000, interval: 500, message: `${STREAM} created with 3 replicas` },
    );
    const js = nc.jetstream();
    // Interleaved, as different destinations' deliveries are.
    for (let i = 0; i < KEPT; i++) {
      await js.publish("replay.kept", `k${i}`);
      if (i < REMOVED) await js.publish("replay.gone", `g${i}`);
    }
    const removed = await deleteMessages(jsm, STREAM, "replay.gone");
    expect(removed).toBe(REMOVED);
    // A few stored after the removal, as new calls would be.
    for (let i = 0; i < 10; i++) await js.publish("replay.kept", `after${i}`);
    const leader = await cluster.streamLeader(STREAM);
    const follower = cluster.nodes.find((n) => n.name !== leader)!.name;
    await cluster.kill(follower);
    await cluster.restart(follower);
    await makeLeader(follower);
    const info = await jsm.streams.info(STREAM, { subjects_filter: "replay.>" });
    expect(info.cluster?.leader).toBe(follower);
    expect(info.state.subjects ?? {}).toEqual({ "replay.kept": KEPT + 10 });
  });
});
