import { type ConnectionOptions, connect, type NatsConnection } from "nats";
import { afterAll, beforeAll } from "vitest";
import { NatsServer } from "./nats-server.js";

export interface NatsFixture {
  readonly server: NatsServer;
  readonly nc: NatsConnection;
}

/**
 * A private nats-server and a connection to it for the whole test file: started before its tests
 * (and before the file's own beforeAll hooks registered after this call), closed and stopped
 * after them. Read `server` and `nc` inside tests and hooks.
 */
export function useNats(options: Omit<ConnectionOptions, "servers"> = {}): NatsFixture {
  let server: NatsServer | undefined;
  let nc: NatsConnection | undefined;
  beforeAll(async () => {
    server = await NatsServer.start();
    nc = await connect({ ...options, servers: server.url });
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("useNats: read server and nc inside a test or hook");
    return value;
  };
  return {
    get server() {
      return started(server);
    },
    get nc() {
      return started(nc);
    },
  };
}
