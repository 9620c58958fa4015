/**
 * Destination health benchmark: what ListDestinationHealth costs once the backlog is counted on
 * every subject a destination's calls are stored on (shared-lane partitions, its lane, the legacy
 * subject, its users' ORDERED subjects): 4 subject-filtered stream lookups per destination, plus
 * a first-message lookup where something waits.
 *
 *   npm run bench -- health
 */

import { ConfigStore, laneSubject, orderedSubject, partitionSubject } from "@hookpost/core";
import { Stack } from "../test/helpers/stack.js";
import { until } from "../test/helpers/until.js";
import { medianMs, putDestinations } from "./fill.js";
import { type Figure, printIfMain } from "./table.js";

const DESTINATIONS = 2_000;
/** Destinations with calls waiting on every partition and in their lane. */
const BACKLOGGED = 200;
const PARTITIONS = 8;
/** PER_USER destinations with calls waiting, and users each. */
const ORDERED = 20;
const USERS = 500;
const RUNS = 5;
const SINGLE_RUNS = 50;

export async function benchHealth(): Promise<Figure[]> {
  const stack = await Stack.start({ dispatchers: 0 });
  try {
    const store = await ConfigStore.open(stack.nc);
    await putDestinations(store, DESTINATIONS, { sourceOf: () => "s", enabled: false });
    store.close();
    await until(
      async () =>
        (await stack.admin.listDestinations({ pageSize: 1 })).nextPageToken !== "" &&
        (await allHealth(stack)) === DESTINATIONS,
      { timeout: 60_000, message: "ingest sees every destination" },
    );
    const idleList = await medianMs(RUNS, () => allHealth(stack));
    const idleOne = await medianMs(SINGLE_RUNS, () => one(stack, "d1"));

    const js = stack.nc.jetstream();
    const body = "x".repeat(512);
    for (let i = 0; i < BACKLOGGED; i++) {
      const id = `d${i}`;
      await Promise.all([
        ...Array.from({ length: PARTITIONS }, (_, p) => js.publish(partitionSubject(p, id), body)),
        js.publish(laneSubject(id), body),
      ]);
    }
    for (let i = 0; i < ORDERED; i++) {
      const id = `d${BACKLOGGED + i}`;
      await Promise.all(
        Array.from({ length: USERS }, (_, u) => js.publish(orderedSubject(i, id, `user${u}`), body)),
      );
    }
    const busyList = await medianMs(RUNS, () => allHealth(stack));
    const busyOne = await medianMs(SINGLE_RUNS, () => one(stack, "d1"));
    const quietOne = await medianMs(SINGLE_RUNS, () => one(stack, `d${DESTINATIONS - 1}`));
    const orderedOne = await medianMs(SINGLE_RUNS, () => one(stack, `d${BACKLOGGED}`));
    const pending = `${BACKLOGGED} destinations × ${PARTITIONS + 1} subjects, ${ORDERED} PER_USER × ${USERS} users`;
    return [
      {
        name: `list all, ${DESTINATIONS} destinations, nothing pending (median of ${RUNS})`,
        value: idleList,
        unit: "ms",
      },
      { name: "one destination, nothing pending", value: idleOne, unit: "ms" },
      {
        name: `list all, ${DESTINATIONS} destinations, backlog (median of ${RUNS})`,
        value: busyList,
        unit: "ms",
        note: pending,
      },
      { name: "one destination with a backlog on every partition and its lane", value: busyOne, unit: "ms" },
      { name: "one destination with nothing pending, others backlogged", value: quietOne, unit: "ms" },
      { name: `one PER_USER destination, ${USERS} users waiting`, value: orderedOne, unit: "ms" },
    ];
  } finally {
    await stack.close();
  }
}

/** Every page of ListDestinationHealth; the number of destinations answered. */
async function allHealth(stack: Stack): Promise<number> {
  let n = 0;
  let pageToken = "";
  do {
    const r = await stack.admin.listDestinationHealth({ pageToken, pageSize: 1000 });
    n += r.destinations.length;
    pageToken = r.nextPageToken;
  } while (pageToken !== "");
  return n;
}

async function one(stack: Stack, id: string): Promise<void> {
  await stack.admin.listDestinationHealth({ destinationId: id });
}

await printIfMain(import.meta.url, benchHealth, true);
