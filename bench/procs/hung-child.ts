/**
 * Hung webhook endpoints for the isolation bench, in their own process (their sockets must not
 * count against the bench's open-file limit): `count` TCP listeners on 127.0.0.1 (one origin
 * each, as distinct customers' hosts would be) that accept every connection, read and drop what
 * arrives, and never answer. Sends `{ ports }` once listening, then every 100 ms
 * `{ open, peak, accepted }`: connections open now, the most open at once (exact: updated on every
 * accept), and connections accepted so far (one per attempt: a timed-out request closes its socket).
 */

import type { AddressInfo } from "node:net";
import { createServer, type Server } from "node:net";

const count = Number(process.argv[2] ?? 1000);
let open = 0;
let peak = 0;
let accepted = 0;
const servers: Server[] = [];

for (let i = 0; i < count; i++) {
  const server = createServer((socket) => {
    open++;
    accepted++;
    if (open > peak) peak = open;
    socket.on("error", () => {});
    socket.once("close", () => open--);
    socket.resume();
  });
  servers.push(server);
}
await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve))));
process.send!({ ports: servers.map((s) => (s.address() as AddressInfo).port) });
setInterval(() => process.send!({ open, peak, accepted }), 100);
process.on("disconnect", () => process.exit(0));
