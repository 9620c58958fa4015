import { clientKey } from "@hookpost/api";
import { describe, expect, it } from "vitest";

describe("the address a per-client connection cap counts", () => {
  it("is the IPv4 address, mapped or not, and an IPv6 /64 (one host's usual share)", () => {
    expect(clientKey("127.0.0.2")).toBe("127.0.0.2");
    expect(clientKey("::ffff:127.0.0.2")).toBe("127.0.0.2");
    expect(clientKey("2001:db8:1:2::1")).toBe(clientKey("2001:db8:1:2:ffff:ffff:ffff:ffff"));
    expect(clientKey("2001:db8:1:2::1")).not.toBe(clientKey("2001:db8:1:3::1"));
    expect(clientKey("::1")).toBe("0:0:0:0::/64");
  });
});
