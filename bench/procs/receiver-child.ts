/**
 * The bench webhook receiver, as its own process (as a customer's receiver would be): node:http,
 * answers 200 at once. Reports arrivals to the parent over IPC every 20 ms as
 * `[idempotencyKey, epochMs]` pairs, and `{ port }` once listening.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

let pending: Array<[string, number]> = [];
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    pending.push([String(req.headers["idempotency-key"] ?? ""), performance.timeOrigin + performance.now()]);
    res.writeHead(200).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  process.send!({ port: (server.address() as AddressInfo).port });
});
setInterval(() => {
  if (pending.length === 0) return;
  process.send!({ arrivals: pending });
  pending = [];
}, 20);
process.on("disconnect", () => process.exit(0));
