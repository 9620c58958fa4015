import { adminMetadata, createClient } from "@hookpost/client";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { startTestIngest } from "../test/helpers/ingest.js";
import { NatsServer } from "../test/helpers/nats-server.js";

const TOKEN = "bench-admin-token";

/** What the HTTP benchmarks run against: a private nats-server, an in-process ingest, one source. */
export interface HttpBenchStack {
  /** host:port of the gRPC and of the HTTP listener. */
  address: string;
  httpAddress: string;
  writeKey: string;
  stop(): Promise<void>;
}

export async function startHttpBenchStack(): Promise<HttpBenchStack> {
  const nats = await NatsServer.start();
  const ingest = await startTestIngest(nats.url, TOKEN, {
    httpAddress: "127.0.0.1:0",
    publishTimeoutMs: 10_000,
  });
  const stop = async () => {
    await ingest.close();
    await nats.stop();
  };
  try {
    const admin = createClient(AdminService, ingest.address, { metadata: adminMetadata(TOKEN) });
    const { writeKey } = await admin.createSource({ name: "bench" });
    admin.close();
    return { address: ingest.address, httpAddress: ingest.httpAddress!, writeKey, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
