import dns, { type LookupAddress } from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";

/** A target refused by the SSRF guard. Never retried: the address will not become public. */
export class SsrfRefusedError extends Error {
  override readonly name = "SsrfRefusedError";
  readonly code = "HOOKPOST_SSRF_REFUSED";
}

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/**
 * Which addresses webhooks may connect to. Only globally routable unicast addresses pass by
 * default: ipaddr.js classifies loopback, private, link-local (cloud metadata), CGNAT,
 * unique-local, multicast, unspecified, broadcast, reserved, NAT64/6to4 (which embed an IPv4
 * address) and the rest, and anything but "unicast" is refused unless an allowed CIDR covers it.
 */
export class AddressPolicy {
  readonly #allowed: Cidr[];

  /** Throws on a malformed CIDR. */
  constructor(allowedCidrs: readonly string[] = []) {
    this.#allowed = allowedCidrs.map((c) => {
      const [addr, bits] = ipaddr.parseCIDR(c);
      return [
        normalize(addr),
        addr.kind() === "ipv6" && normalize(addr).kind() === "ipv4" ? bits - 96 : bits,
      ];
    });
  }

  /** Why `address` (an IP literal) is refused, or undefined when it may be connected to. */
  refusal(address: string): string | undefined {
    let ip: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      ip = normalize(ipaddr.parse(address));
    } catch {
      return `not an IP address: ${address}`;
    }
    if (this.#allowed.some(([net, bits]) => net.kind() === ip.kind() && ip.match(net, bits)))
      return undefined;
    const range = ip.range();
    if (range === "unicast") return undefined;
    return `${ip.toString()} is a ${range} address (allow it with WEBHOOK_ALLOWED_CIDRS)`;
  }

  /**
   * A `lookup` for net/tls connect: resolves, then hands the socket only addresses that pass,
   * so the check applies to the address actually connected to (no DNS-rebinding window).
   */
  lookup(): LookupFunction {
    return (hostname, options, callback) => {
      dns.lookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
        if (err) return callback(err, "", 0);
        const allowed = addresses.filter((a) => this.refusal(a.address) === undefined);
        if (allowed.length === 0) {
          const why = addresses.length > 0 ? this.refusal(addresses[0]!.address) : "no addresses";
          return callback(new SsrfRefusedError(`${hostname} refused: ${why}`), "", 0);
        }
        if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, allowed);
        return callback(null, allowed[0]!.address, allowed[0]!.family);
      });
    };
  }

  /** For hosts that are IP literals already (net.connect skips lookup for those). */
  checkLiteral(host: string): SsrfRefusedError | undefined {
    if (isIP(host) === 0) return undefined;
    const why = this.refusal(host);
    return why === undefined ? undefined : new SsrfRefusedError(`${host} refused: ${why}`);
  }
}

/** ::ffff:a.b.c.d is a.b.c.d on the wire: judge it as IPv4. */
function normalize(ip: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return ip.kind() === "ipv6" && (ip as ipaddr.IPv6).isIPv4MappedAddress()
    ? (ip as ipaddr.IPv6).toIPv4Address()
    : ip;
}
