import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export const DEMO_SECRET = "demo-secret";

/**
 * A webhook receiver for trying Hookpost locally: prints every delivery and whether its
 * X-Signature verifies with the demo secret.
 */
export async function startDemoReceiver(
  host: string,
  port: number,
  print: (line: string) => void,
): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const sig = req.headers["x-signature"];
      const expected = createHmac("sha1", DEMO_SECRET).update(body).digest("hex");
      const verdict =
        typeof sig !== "string"
          ? "unsigned"
          : sig.length === expected.length && timingSafeEqual(Buffer.from(sig), Buffer.from(expected))
            ? "signature ok"
            : "signature MISMATCH";
      print(`${req.method} ${req.url} (${verdict}) ${body.toString("utf8")}`);
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const a = server.address() as AddressInfo;
  return { url: `http://${host}:${a.port}/webhook`, server };
}
