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
 * unique-local, multicast, unspecified, broadcast, reserved, NAT64/6to4/Teredo (which embed an
 * IPv4 address) and the rest, and anything but "unicast" is refused unless an allowed CIDR covers
 * it. IPv6 forms that embed an IPv4 address are also judged by that address.
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
    // An IPv6 form that carries an IPv4 address (NAT64, 6to4, Teredo) may reach that address
    // through a gateway: it is refused whenever the IPv4 address would be, allow list or not.
    for (const v4 of ip.kind() === "ipv6" ? embeddedIPv4((ip as ipaddr.IPv6).parts) : []) {
      const why = this.refusal(v4.toString());
      if (why !== undefined) return `${ip.toString()} embeds an IPv4 address: ${why}`;
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

/**
 * ::ffff:a.b.c.d (IPv4-mapped) is a.b.c.d on the wire, and ::a.b.c.d (IPv4-compatible,
 * deprecated; ipaddr.js calls it unicast) may be too: judge both as IPv4. `::` and `::1` stay
 * IPv6 (unspecified, loopback).
 */
function normalize(ip: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  if (ip.kind() !== "ipv6") return ip;
  const v6 = ip as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  const p = v6.parts;
  const compatible = p.slice(0, 6).every((x) => x === 0) && (p[6] !== 0 || p[7]! > 1);
  return compatible ? v4From(p[6]!, p[7]!) : ip;
}

/**
 * The IPv4 addresses an IPv6 address hands traffic to: NAT64 (64:ff9b::/96 and the local-use
 * 64:ff9b:1::/48, RFC 6052/8215: the last 32 bits), 6to4 (2002::/16: bits 16-47) and Teredo
 * (2001::/32: the server at bits 32-63, the client at the last 32 bits inverted).
 */
function embeddedIPv4(p: readonly number[]): ipaddr.IPv4[] {
  const [a, b] = p;
  if (a === 0x64 && b === 0xff9b) return [v4From(p[6]!, p[7]!)];
  if (a === 0x2002) return [v4From(b!, p[2]!)];
  if (a === 0x2001 && b === 0) return [v4From(p[2]!, p[3]!), v4From(p[6]! ^ 0xffff, p[7]! ^ 0xffff)];
  return [];
}

function v4From(hi: number, lo: number): ipaddr.IPv4 {
  return new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
}
