/**
 * The raw gRPC limit: IngestService served by the same grpc-js server code as ingest (requests
 * decoded the same way), with handlers that do nothing. Prints `{ address }` on stdout.
 */
import { Server, ServerCredentials } from "@grpc/grpc-js";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import { addService } from "@hookpost/core";

const server = new Server();
addService(server, IngestService, {
  track: async () => ({ messageId: "" }),
  batch: async (req) => ({ messageIds: req.calls.map(() => "") }),
  syncAudience: async (reqs) => {
    let members = 0;
    for await (const r of reqs) members += r.userIds.length;
    return { members: BigInt(members) };
  },
});
server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stdout.write(`${JSON.stringify({ address: `127.0.0.1:${port}` })}\n`);
});
process.on("SIGTERM", () => server.forceShutdown());
