import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parser } from "@prometheus-io/lezer-promql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { publishCall, track } from "../dispatcher/helpers.js";
import { Receiver } from "../helpers/receiver.js";
import { Stack } from "../helpers/stack.js";
import { until } from "../helpers/until.js";
import { parseMetrics, ROOT, type Sample } from "./helpers.js";

// The Prometheus rules and the Grafana dashboard under deploy/ only name what the services
// export: each expression parses as PromQL (the Prometheus project's own grammar), every metric
// it selects is a family on a running ingest's or dispatcher's /metrics, and every label it
// matches or groups by is one those series carry.

const RULES = join(ROOT, "deploy/prometheus/hookpost-alerts.yml");
const DASHBOARD = join(ROOT, "deploy/grafana/hookpost-dashboard.json");

interface Selector {
  metric: string;
  labels: string[];
}

interface Expression {
  where: string;
  expr: string;
  selectors: Selector[];
  /** Labels of `by (…)` / `without (…)`. */
  grouping: string[];
}

/** Parses one PromQL expression; fails the test on a syntax error. */
function analyse(where: string, expr: string): Expression {
  const tree = parser.parse(expr);
  const selectors: Selector[] = [];
  const grouping: string[] = [];
  const text = (from: number, to: number) => expr.slice(from, to);
  const c = tree.cursor();
  do {
    if (c.type.isError) throw new Error(`${where}: PromQL syntax error at ${c.from}: ${expr}`);
    if (c.name === "VectorSelector") {
      const node = c.node;
      const id = node.getChild("Identifier");
      const labels = node
        .getChild("LabelMatchers")
        ?.getChildren("UnquotedLabelMatcher")
        .map((m) => text(m.getChild("LabelName")!.from, m.getChild("LabelName")!.to));
      if (id) selectors.push({ metric: text(id.from, id.to), labels: labels ?? [] });
    }
    if (c.name === "GroupingLabels") {
      for (const l of c.node.getChildren("LabelName")) grouping.push(text(l.from, l.to));
    }
  } while (c.next());
  return { where, expr, selectors, grouping };
}

async function expressions(): Promise<Expression[]> {
  const out: Expression[] = [];
  const rules = parseYaml(await readFile(RULES, "utf8")) as {
    groups: { name: string; rules: { alert: string; expr: string }[] }[];
  };
  for (const g of rules.groups) for (const r of g.rules) out.push(analyse(`rule ${r.alert}`, r.expr));
  const dashboard = JSON.parse(await readFile(DASHBOARD, "utf8")) as {
    panels: { title: string; targets?: { expr: string }[]; panels?: unknown[] }[];
    templating: { list: { name: string; query: { query: string } }[] };
  };
  for (const p of dashboard.panels)
    for (const t of p.targets ?? []) out.push(analyse(`panel "${p.title}"`, t.expr));
  for (const v of dashboard.templating.list) {
    // Grafana's label_values(metric, label) is not PromQL: its metric and label are checked alike.
    const m = /^label_values\((\w+), *(\w+)\)$/.exec(v.query.query);
    if (!m) throw new Error(`variable ${v.name}: unexpected query ${v.query.query}`);
    out.push({
      where: `variable ${v.name}`,
      expr: v.query.query,
      selectors: [{ metric: m[1]!, labels: [m[2]!] }],
      grouping: [],
    });
  }
  return out;
}

/** Families (`# TYPE name kind`) on a /metrics page, with the names their samples take. */
function families(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [name, kind] = [m[1]!, m[2]!];
    out.set(name, name);
    if (kind === "histogram" || kind === "summary")
      for (const suffix of ["_bucket", "_count", "_sum"]) out.set(`${name}${suffix}`, name);
  }
  return out;
}

let stack: Stack;
let failing: Receiver;

beforeAll(async () => {
  stack = await Stack.start({
    ingest: { opsAddress: "127.0.0.1:0", streamCheckMs: 200 },
    dispatcher: {
      opsAddr: "127.0.0.1:0",
      alerts: {
        checkMs: 200,
        healthWindowMs: 2000,
        minAttempts: 3,
        minIntervalMs: 1000,
        deadLetterWindowMs: 2000,
        behindLookups: 500,
      },
    },
  });
  failing = await Receiver.http();
  failing.respond = (req) => (req.url === "/refuse" ? { status: 400 } : { status: 503 });
});

afterAll(async () => {
  await stack?.close();
  await failing?.close();
});

describe("alert rules and dashboard", () => {
  it("name only metrics and labels the running services export", async () => {
    const list = await expressions();
    expect(list.length).toBeGreaterThanOrEqual(10);

    // Traffic, so that the labelled series exist: a delivery, a dead letter, a call parked for
    // a retry (its lane is looked at: the oldest-pending series), a destination paused by Hookpost.
    const src = await stack.source();
    const ok = await stack.destination({ name: "ok", sourceIds: [src.id] });
    const refused = await stack.destination({
      name: "refused",
      sourceIds: [src.id],
      urls: [failing.url("/refuse")],
    });
    const retried = await stack.destination({
      name: "retried",
      sourceIds: [src.id],
      urls: [failing.url("/retry")],
    });
    await stack.admin.createOperatorWebhook({
      operatorWebhook: { name: "ops", url: stack.receiver.url("/ops") },
    });
    await publishCall(stack.nc.jetstream(), track({ sourceId: src.id }));
    await src.client.track({ userId: "u1", event: "Metrics" });

    const pages = async () => {
      const ingest = await (await fetch(`http://${stack.ingest.opsAddress}/metrics`)).text();
      const dispatcher = await (
        await fetch(`http://127.0.0.1:${stack.dispatchers[0]!.opsPort}/metrics`)
      ).text();
      return {
        text: `${ingest}\n${dispatcher}`,
        samples: [...parseMetrics(ingest), ...parseMetrics(dispatcher)],
      };
    };
    const has = (samples: Sample[], name: string, labels: Record<string, string>) =>
      samples.some((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
    const { text, samples } = await until(
      async () => {
        const p = await pages();
        return (
          has(p.samples, "hookpost_dispatcher_deliveries_total", {
            destination: ok.id,
            outcome: "delivered",
          }) &&
          has(p.samples, "hookpost_dispatcher_deliveries_total", {
            destination: refused.id,
            outcome: "dead_letter",
          }) &&
          has(p.samples, "hookpost_dispatcher_oldest_pending_seconds", { destination: retried.id }) &&
          has(p.samples, "hookpost_stream_bytes", {}) &&
          has(p.samples, "hookpost_dispatcher_operator_events_total", { type: "dead_letter.created" }) &&
          p
        );
      },
      {
        timeout: 30_000,
        message: "deliveries, a dead letter and its event, a parked call and stream sizes in /metrics",
      },
    );

    const exported = families(text);
    for (const e of list) {
      for (const s of e.selectors) {
        expect(exported.has(s.metric), `${e.where} names ${s.metric}, which no service exports`).toBe(true);
        const series = samples.filter((x) => x.name === s.metric);
        for (const label of s.labels) {
          expect(
            series.some((x) => label in x.labels),
            `${e.where} matches ${s.metric} on "${label}", which its series do not carry`,
          ).toBe(true);
        }
      }
      for (const label of e.grouping) {
        const carried = e.selectors.some((s) =>
          samples.some((x) => x.name === s.metric && label in x.labels),
        );
        expect(carried, `${e.where} groups by "${label}", which none of its series carry`).toBe(true);
      }
    }
  });
});
