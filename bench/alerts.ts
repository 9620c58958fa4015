/**
 * Operational webhooks benchmark: what the replica that watches destinations costs per check
 * (hookpost_dispatcher_alert_check_seconds) with many destinations and 10 operator webhooks,
 * first with every destination idle, then with some failing (503, their calls parked in lanes,
 * so each check looks up every lane). One dispatcher, nats-server and the receivers on this machine.
 *
 *   npm run bench -- alerts [destinations] [failing]
 */

import { ConfigStore, type DestinationRecord, eventSubject } from "@hookpost/core";
import { generateStandardWebhookSecret } from "@hookpost/receiver";
import { Receiver } from "../test/helpers/receiver.js";
import { Stack } from "../test/helpers/stack.js";
import { until } from "../test/helpers/until.js";
import { type Figure, printIfMain } from "./table.js";

const WEBHOOKS = 10;
const CHECK_MS = 1000;
/** Checks measured in each state. */
const CHECKS = 10;

export async function benchAlerts(params: string[] = []): Promise<Figure[]> {
  const destinations = Number(params[0] ?? 10_000);
  const failing = Number(params[1] ?? 200);
  const stack = await Stack.start({ dispatchers: 0 });
  const down = await Receiver.http();
  down.respond = () => ({ status: 503 });
  try {
    const store = await ConfigStore.open(stack.nc);
    const now = new Date().toISOString();
    for (let i = 0; i < destinations; i += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, destinations - i) }, (_, j): Promise<number> => {
          const n = i + j;
          const d: DestinationRecord = {
            id: `d${n}`,
            name: "bench",
            sourceIds: [n < failing ? "failing" : "s"],
            urls: [n < failing ? down.url() : stack.receiver.url()],
            headers: {},
            signing: "segment",
            enabled: true,
            createdAt: now,
            updatedAt: now,
          };
          return store.putDestination(d);
        }),
      );
    }
    for (let w = 0; w < WEBHOOKS; w++) {
      await store.createOperatorWebhook({
        id: `w${w}`,
        name: "bench",
        url: stack.receiver.url(`/ops/${w}`),
        secret: generateStandardWebhookSecret(),
        eventTypes: [],
        enabled: true,
        behindAfterMs: 5000,
        createdAt: now,
        updatedAt: now,
      });
    }
    store.close();
    const dispatcher = await stack.addDispatcher({
      alerts: {
        checkMs: CHECK_MS,
        healthWindowMs: 60_000,
        minAttempts: 5,
        minIntervalMs: 60_000,
        deadLetterWindowMs: 60_000,
        behindLookups: 500,
      },
    });
    const checks = async () => {
      const h = (await dispatcher.metrics.alertCheckSeconds.get()).values;
      const count = h.find((v) => v.metricName?.endsWith("_count"))?.value ?? 0;
      const sum = h.find((v) => v.metricName?.endsWith("_sum"))?.value ?? 0;
      return { count, sum };
    };
    /** Mean duration of the next CHECKS checks (ms). */
    const measure = async () => {
      const before = await checks();
      const after = await until(
        async () => {
          const c = await checks();
          return c.count >= before.count + CHECKS && c;
        },
        { timeout: 120_000, interval: 200, message: `${CHECKS} checks` },
      );
      return ((after.sum - before.sum) / (after.count - before.count)) * 1000;
    };
    const idle = await measure();

    // Each failing destination gets calls; 503s park them in its lane and its breaker opens.
    const js = stack.nc.jetstream();
    for (let i = 0; i < failing * 5; i++) {
      const call = {
        type: "track",
        messageId: `m${i}`,
        sourceId: "failing",
        userId: "u",
        event: "E",
        receivedAt: now,
        timestamp: now,
      };
      await js.publish(eventSubject("failing", "track"), JSON.stringify(call), { msgID: call.messageId });
    }
    const jsm = await stack.nc.jetstreamManager();
    await until(
      async () =>
        Object.keys(
          (await jsm.streams.info("HOOKPOST_DELIVERIES", { subjects_filter: "hookpost.lanes.>" })).state
            .subjects ?? {},
        ).length >= failing,
      { timeout: 120_000, interval: 500, message: `${failing} lanes holding parked calls` },
    );
    // Each failing destination's calls wait in its lane: announced behind to every webhook (and
    // failing to those where its breaker let enough attempts through): the storm.
    const counts = async () => {
      const values = (await dispatcher.metrics.operatorEvents.get()).values;
      const of = (type: string) => values.find((v) => v.labels.type === type)?.value ?? 0;
      return { behind: of("destination.behind"), failing: of("destination.failing") };
    };
    const stormStart = performance.now();
    const expected = failing * WEBHOOKS;
    await until(async () => (await counts()).behind >= expected, {
      timeout: 300_000,
      interval: 200,
      message: `${expected} destination.behind events`,
    });
    const storm = (performance.now() - stormStart) / 1000;
    const busy = await measure();
    return [
      {
        name: `one check, ${destinations} destinations × ${WEBHOOKS} operator webhooks, all idle (mean of ${CHECKS})`,
        value: Math.round(idle * 10) / 10,
        unit: "ms",
      },
      {
        name: `${failing} destinations falling behind at once: all announced to ${WEBHOOKS} webhooks`,
        value: Math.round(storm * 10) / 10,
        unit: "s",
        note: `${expected} destination.behind events (and ${(await counts()).failing} destination.failing), counted from when every lane held calls`,
      },
      {
        name: `one check afterwards, ${failing} lanes with parked calls looked up (mean of ${CHECKS})`,
        value: Math.round(busy * 10) / 10,
        unit: "ms",
      },
    ];
  } finally {
    await stack.close();
    await down.close();
  }
}

await printIfMain(import.meta.url, () => benchAlerts(process.argv.slice(2)));
