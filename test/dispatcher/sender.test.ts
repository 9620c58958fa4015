import { rmSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { AddressPolicy, createWebhookAgent, WebhookSender } from "@hookpost/dispatcher";
import type { Agent } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { quietLogger } from "../helpers/quiet-logger.js";
import { destination, makeCerts, Receiver, type TestCerts } from "./helpers.js";

/** The sender on its own, against real HTTP(S) receivers: SSRF, TLS, status handling. */

const body = new TextEncoder().encode(`{"version":1,"type":"track"}`);
const never = new AbortController().signal;

let certs: TestCerts;
let plain: Receiver;
let v6: Receiver;
const agents: Agent[] = [];

function sender(o: { allowed?: string[]; caFile?: string; timeoutMs?: number } = {}) {
  const agent = createWebhookAgent({
    policy: new AddressPolicy(o.allowed ?? []),
    connectTimeoutMs: o.timeoutMs ?? 2000,
    ...(o.caFile ? { caFile: o.caFile } : {}),
  });
  agents.push(agent);
  return new WebhookSender({ agent, timeoutMs: o.timeoutMs ?? 2000, logger: quietLogger });
}

async function send(s: WebhookSender, ...urls: string[]) {
  return s.deliver(
    destination({ id: "d", urls }),
    body,
    { messageId: "m1", sourceId: "s", destinationId: "d" },
    never,
  );
}

beforeAll(async () => {
  certs = makeCerts();
  plain = await Receiver.http();
  v6 = await Receiver.http("::1");
});

afterAll(async () => {
  await Promise.all(agents.map((a) => a.close()));
  await plain?.close();
  await v6?.close();
  rmSync(certs.dir, { recursive: true, force: true });
});

describe("SSRF guard", () => {
  it("refuses every loopback form by default, without connecting", async () => {
    const s = sender();
    const p = plain.port;
    const targets = [
      `http://127.0.0.1:${p}/`,
      `http://localhost:${p}/`,
      `http://[::1]:${v6.port}/`,
      `http://[::ffff:127.0.0.1]:${p}/`,
      `http://2130706433:${p}/`,
      `http://0x7f.1:${p}/`,
      `http://127.1:${p}/`,
      `http://0.0.0.0:${p}/`,
      `http://0177.0.0.1:${p}/`,
      // IPv4-compatible IPv6 (deprecated) and the gateway forms that embed 127.0.0.1.
      `http://[::127.0.0.1]:${p}/`,
      `http://[::7f00:1]:${p}/`,
      `http://[64:ff9b::127.0.0.1]:${p}/`,
      `http://[2002:7f00:1::1]:${p}/`,
      `http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:${p}/`,
    ];
    for (const url of targets) {
      const r = await send(s, url);
      expect(r.delivered, url).toBe(false);
      expect(r.outcomes[0], url).toMatchObject({ error: "ssrf", retryable: false, status: 0 });
    }
    expect(plain.connections).toBe(0);
    expect(v6.connections).toBe(0);
  });

  it("refuses private, link-local, CGNAT and unique-local targets before any connection attempt", async () => {
    const s = sender();
    for (const url of [
      "http://10.1.2.3/",
      "http://172.16.5.5/",
      "http://192.168.0.1/",
      "http://169.254.169.254/latest/meta-data/",
      "http://100.64.0.1/",
      "http://[fd00::1]/",
      "http://[fe80::1]/",
      "http://224.0.0.1/",
    ]) {
      const r = await send(s, url);
      expect(r.outcomes[0], url).toMatchObject({ error: "ssrf", retryable: false });
      // Unroutable here: a connection attempt would hang until the timeout, a refusal is instant.
      expect(r.outcomes[0]!.durationMs, url).toBeLessThan(200);
      expect(r.outcomes[0]!.detail, url).toMatch(/WEBHOOK_ALLOWED_CIDRS/);
    }
  });

  it("lets loopback through with WEBHOOK_ALLOWED_CIDRS", async () => {
    const s = sender({ allowed: ["127.0.0.0/8", "::1/128"] });
    const before = plain.requests.length;
    for (const url of [plain.url("/a"), plain.url("/b", "localhost"), plain.url("/c", "2130706433")]) {
      expect((await send(s, url)).delivered, url).toBe(true);
    }
    expect((await send(s, `http://[::1]:${v6.port}/d`)).delivered).toBe(true);
    expect(plain.requests.slice(before).map((r) => r.url)).toEqual(["/a", "/b", "/c"]);
    expect(v6.requests.map((r) => r.url)).toEqual(["/d"]);
    // The allow list does not open anything else.
    expect((await send(s, "http://10.0.0.1/")).outcomes[0]?.error).toBe("ssrf");
  });
});

describe("TLS", () => {
  it("sends nothing to a self-signed endpoint and does not retry it", async () => {
    const self = await Receiver.https(certs.selfSignedCert, certs.selfSignedKey);
    try {
      const r = await send(sender({ allowed: ["127.0.0.0/8"] }), self.url());
      expect(r.delivered).toBe(false);
      expect(r.outcomes[0]).toMatchObject({ error: "tls", retryable: false, status: 0 });
      expect(r.outcomes[0]!.detail).toMatch(/SELF_SIGNED/);
      expect(self.requests).toHaveLength(0);
    } finally {
      await self.close();
    }
  });

  it("refuses a certificate from an unknown CA, and delivers once WEBHOOK_CA_FILE trusts it", async () => {
    // On 0.0.0.0 so that 127.0.0.2 (not in the certificate) reaches it too.
    const https = await Receiver.https(certs.serverCert, certs.serverKey, "0.0.0.0");
    try {
      const untrusted = await send(sender({ allowed: ["127.0.0.0/8"] }), https.url("/x", "localhost"));
      expect(untrusted.outcomes[0]).toMatchObject({ error: "tls", retryable: false });
      expect(https.requests).toHaveLength(0);

      const trusted = sender({ allowed: ["127.0.0.0/8"], caFile: certs.caCert });
      expect((await send(trusted, https.url("/x", "localhost"))).delivered).toBe(true);
      expect((await send(trusted, https.url("/y"))).delivered).toBe(true);
      expect(https.requests.map((r) => r.url)).toEqual(["/x", "/y"]);
      // The default roots still count: a wrong host name is refused even with the CA trusted.
      const wrongHost = await send(trusted, `https://127.0.0.2:${https.port}/z`);
      expect(wrongHost.outcomes[0]).toMatchObject({ error: "tls", retryable: false });
      expect(wrongHost.outcomes[0]!.detail).toMatch(/ALTNAME/);
      expect(https.requests).toHaveLength(2);
    } finally {
      await https.close();
    }
  });
});

describe("responses", () => {
  it("classifies statuses: 2xx ok, 3xx redirect (not followed), 408/429/5xx retryable, other 4xx not", async () => {
    const target = await Receiver.http();
    const other = await Receiver.http();
    try {
      const s = sender({ allowed: ["127.0.0.0/8"] });
      const cases: Array<[number, string, boolean]> = [
        [204, "http", false],
        [301, "redirect", false],
        [307, "redirect", false],
        [400, "http", false],
        [404, "http", false],
        [408, "http", true],
        [429, "http", true],
        [500, "http", true],
        [503, "http", true],
      ];
      for (const [status, error, retryable] of cases) {
        target.respond = () => ({ status, headers: { location: other.url("/elsewhere") } });
        const o = (await send(s, target.url()))!.outcomes[0]!;
        expect(o, String(status)).toMatchObject({ status, error, retryable, ok: status < 300 });
      }
      expect(other.requests).toHaveLength(0);
      target.respond = () => ({ status: 429, headers: { "retry-after": "7" } });
      expect((await send(s, target.url())).outcomes[0]!.retryAfterMs).toBe(7000);
    } finally {
      await target.close();
      await other.close();
    }
  });

  it("times out a slow answer, and reads at most 64 KiB of a large body", async () => {
    const target = await Receiver.http();
    try {
      const s = sender({ allowed: ["127.0.0.0/8"], timeoutMs: 300 });
      target.respond = () => ({ hang: true });
      const slow = (await send(s, target.url())).outcomes[0]!;
      expect(slow).toMatchObject({ error: "timeout", retryable: true, status: 0 });
      expect(slow.durationMs).toBeGreaterThanOrEqual(290);
      expect(slow.durationMs).toBeLessThan(1500);

      target.respond = () => ({ status: 200, body: "x".repeat(5 * 1024 * 1024) });
      const big = await send(s, target.url());
      expect(big.delivered).toBe(true);

      const refused = await send(s, "http://127.0.0.1:1/");
      expect(refused.outcomes[0]).toMatchObject({ error: "connection", retryable: true });
    } finally {
      await target.close();
    }
  });

  it("keeps the first 4 KiB of an answer, and counts a body cut off before its end as a retryable failure", async () => {
    const s = sender({ allowed: ["127.0.0.0/8"] });
    // A raw server: a 500 with an explanation longer than the excerpt, then a 200 whose body
    // stops halfway (Content-Length promises more than comes before the socket closes).
    const raw = createServer((socket) => {
      socket.once("data", () => {
        if (cut) {
          socket.end("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly ten b");
        } else {
          const text = `${"why ".repeat(2000)}`;
          socket.end(
            `HTTP/1.1 500 Oops\r\ncontent-length: ${text.length}\r\nconnection: close\r\n\r\n${text}`,
          );
        }
      });
    });
    let cut = false;
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(raw.address() as AddressInfo).port}/hook`;
    try {
      const failed = (await send(s, url)).outcomes[0]!;
      expect(failed).toMatchObject({ ok: false, status: 500, retryable: true });
      expect(failed.responseExcerpt).toBe("why ".repeat(1024));

      cut = true;
      const r = await send(s, url);
      expect(r.delivered).toBe(false);
      expect(r.outcomes[0]).toMatchObject({ ok: false, retryable: true, status: 0 });
    } finally {
      await new Promise((resolve) => raw.close(resolve));
    }
  });

  it("tries URLs in order until the first 2xx", async () => {
    const a = await Receiver.http();
    const b = await Receiver.http();
    const c = await Receiver.http();
    try {
      a.respond = () => ({ status: 500 });
      const r = await send(sender({ allowed: ["127.0.0.0/8"] }), a.url(), b.url(), c.url());
      expect(r.delivered).toBe(true);
      expect(r.outcomes.map((o) => o.status)).toEqual([500, 200]);
      expect([a.requests.length, b.requests.length, c.requests.length]).toEqual([1, 1, 0]);
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });
});
