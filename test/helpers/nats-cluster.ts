import { createServer } from "node:net";
import { connect, type NatsConnection } from "nats";
import { NatsServer } from "./nats-server.js";
import { until } from "./until.js";

/** A free loopback TCP port (bound to port 0, then released). Routes need ports known up front. */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/** One member of the cluster: its NATS server and the name JetStream reports it by. */
export interface ClusterNode {
  name: string;
  server: NatsServer;
  /** Killed (kill -9) or stopped (SIGSTOP) right now. */
  down: boolean;
}

/**
 * Three real nats-server processes on loopback forming a JetStream cluster (random client
 * ports, free route ports, a store directory each), private to one test file. Members can be
 * killed -9, restarted on the same port and store, or frozen with SIGSTOP.
 */
export class NatsCluster {
  readonly nodes: ClusterNode[];
  readonly #nc: NatsConnection[] = [];

  private constructor(nodes: ClusterNode[]) {
    this.nodes = nodes;
  }

  static async start(size = 3): Promise<NatsCluster> {
    const name = `hookpost-${process.pid}`;
    const routePorts = await Promise.all(Array.from({ length: size }, freePort));
    const routes = routePorts.map((p) => `nats://127.0.0.1:${p}`);
    const nodes: ClusterNode[] = [];
    try {
      for (let i = 0; i < size; i++) {
        const serverName = `n${i + 1}`;
        const server = await NatsServer.start([
          "--server_name",
          serverName,
          "--cluster_name",
          name,
          "--cluster",
          routes[i]!,
          "--routes",
          routes.filter((_, j) => j !== i).join(","),
        ]);
        nodes.push({ name: serverName, server, down: false });
      }
    } catch (err) {
      await Promise.all(nodes.map((n) => n.server.stop()));
      throw err;
    }
    const cluster = new NatsCluster(nodes);
    try {
      await cluster.ready();
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /** Every URL, comma-separated: what services are given as NATS_URL. */
  get urls(): string {
    return this.nodes.map((n) => n.server.url).join(",");
  }

  node(name: string): ClusterNode {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no cluster node named ${name}`);
    return n;
  }

  /** A client connection to the cluster (closed by stop()). */
  async connect(): Promise<NatsConnection> {
    const nc = await connect({
      servers: this.urls.split(","),
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    this.#nc.push(nc);
    return nc;
  }

  /** Resolves once every running member answers the JetStream API (a meta leader is elected). */
  async ready(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (const n of this.nodes.filter((x) => !x.down)) {
      const nc = await connect({ servers: n.server.url, noRandomize: true });
      try {
        await until(async () => (await nc.jetstreamManager({ timeout: 2000 })).getAccountInfo(), {
          timeout: Math.max(1, deadline - Date.now()),
          interval: 200,
          message: `JetStream on ${n.name} to answer`,
        });
      } finally {
        await nc.close();
      }
    }
  }

  /** The server name leading a stream (waits while an election is going on). */
  async streamLeader(stream: string, timeoutMs = 30_000): Promise<string> {
    return this.#leader(`stream ${stream}`, timeoutMs, async (nc) => {
      const info = await (await nc.jetstreamManager()).streams.info(stream);
      return info.cluster?.leader;
    });
  }

  /** The server name leading a consumer. */
  async consumerLeader(stream: string, consumer: string, timeoutMs = 30_000): Promise<string> {
    return this.#leader(`consumer ${stream}/${consumer}`, timeoutMs, async (nc) => {
      const info = await (await nc.jetstreamManager()).consumers.info(stream, consumer);
      return info.cluster?.leader;
    });
  }

  /** The server name leading a KV bucket (its stream is KV_<bucket>). */
  kvLeader(bucket: string, timeoutMs = 30_000): Promise<string> {
    return this.streamLeader(`KV_${bucket}`, timeoutMs);
  }

  async #leader(
    what: string,
    timeoutMs: number,
    lookup: (nc: NatsConnection) => Promise<string | undefined>,
  ): Promise<string> {
    const nc = this.#nc[0] ?? (await this.connect());
    return until(
      async () => {
        const leader = await lookup(nc);
        // A leader that is down is a stale answer from a follower that has not noticed yet.
        return leader && !this.nodes.find((n) => n.name === leader)?.down ? leader : undefined;
      },
      { timeout: timeoutMs, interval: 100, message: `a leader for ${what}` },
    );
  }

  /** kill -9: an outage, not a shutdown. */
  async kill(name: string): Promise<void> {
    const n = this.node(name);
    n.down = true;
    await n.server.kill("SIGKILL");
  }

  /** Starts a killed member again on the same ports and store, and waits for its JetStream. */
  async restart(name: string): Promise<void> {
    const n = this.node(name);
    await n.server.restart();
    n.down = false;
    await this.ready();
  }

  /** Freezes a member (SIGSTOP): to its peers and clients it is a partitioned, silent node. */
  freeze(name: string): void {
    const n = this.node(name);
    n.down = true;
    n.server.signal("SIGSTOP");
  }

  thaw(name: string): void {
    const n = this.node(name);
    n.server.signal("SIGCONT");
    n.down = false;
  }

  async stop(): Promise<void> {
    await Promise.all(this.#nc.map((nc) => nc.close().catch(() => {})));
    // A frozen server ignores SIGTERM until thawed.
    for (const n of this.nodes) n.server.signal("SIGCONT");
    await Promise.all(this.nodes.map((n) => n.server.stop()));
  }
}
