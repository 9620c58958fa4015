import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import { Agent, buildConnector } from "undici";
import type { AddressPolicy } from "./ssrf.js";

export interface AgentOptions {
  policy: AddressPolicy;
  /** PEM file of extra trusted CAs, trusted in addition to Node's default roots. */
  caFile?: string;
  connectTimeoutMs: number;
}

/**
 * One undici Agent for all webhooks: it keeps a keep-alive pool per origin. Every new socket
 * goes through the SSRF guard (IP literals directly, names through a guarded DNS lookup), and
 * TLS always verifies certificates.
 */
export function createWebhookAgent(o: AgentOptions): Agent {
  const ca = o.caFile === undefined ? undefined : [...rootCertificates, readFileSync(o.caFile, "utf8")];
  const base = buildConnector({
    lookup: o.policy.lookup(),
    rejectUnauthorized: true,
    timeout: o.connectTimeoutMs,
    ...(ca === undefined ? {} : { ca }),
  });
  const connect: buildConnector.connector = (options, callback) => {
    // undici hands IPv6 literals without brackets; WHATWG URL parsing already turned
    // 2130706433, 0x7f.1 and 127.1 into 127.0.0.1.
    const refused = o.policy.checkLiteral(options.hostname);
    if (refused) {
      callback(refused, null);
      return;
    }
    base(options, callback);
  };
  return new Agent({
    connect,
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 60_000,
    // Responses are small and bounded; a pool per origin, one request per connection at a time.
    pipelining: 1,
  });
}
