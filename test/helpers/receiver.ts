import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { until } from "./until.js";

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: Buffer;
  /** Date.now() when the request was complete. */
  at: number;
  /** 1-based index of this request at this receiver. */
  n: number;
}

/**
 * What the receiver answers; `hang` never answers; `delayMs` waits before answering; `after`
 * answers once that promise settles (the test holds the answer until it did something).
 */
export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  delayMs?: number;
  after?: Promise<unknown>;
  hang?: boolean;
}

type Responder = (req: ReceivedRequest) => Reply;

/** A real HTTP(S) server on loopback that records every request it receives. */
export class Receiver {
  readonly requests: ReceivedRequest[] = [];
  respond: Responder = () => ({ status: 200 });
  /** TCP connections accepted (a TLS handshake failure still counts one). */
  connections = 0;
  readonly #server: ReturnType<typeof createHttpServer>;
  readonly #sockets = new Set<Socket>();
  readonly #protocol: string;

  private constructor(server: ReturnType<typeof createHttpServer>, protocol: string) {
    this.#server = server;
    this.#protocol = protocol;
    server.on("connection", (s: Socket) => {
      this.connections++;
      this.#sockets.add(s);
      s.on("close", () => this.#sockets.delete(s));
    });
    server.on("request", (req: IncomingMessage, res: ServerResponse) => this.#onRequest(req, res));
  }
  /**
   * Answers the requests to `path` with `answer` (undefined: as before) until the returned
   * function gives back the previous answers.
   */
  answerAt(path: string, answer: (req: ReceivedRequest) => Reply | undefined): () => void {
    const previous = this.respond;
    this.respond = (req) => (req.url === path ? (answer(req) ?? previous(req)) : previous(req));
    return () => {
      this.respond = previous;
    };
  }

  static async http(host = "127.0.0.1"): Promise<Receiver> {
    return Receiver.#listen(new Receiver(createHttpServer(), "http"), host);
  }

  static async https(certFile: string, keyFile: string, host = "127.0.0.1"): Promise<Receiver> {
    const server = createHttpsServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) });
    return Receiver.#listen(new Receiver(server as never, "https"), host);
  }

  static async #listen(r: Receiver, host: string): Promise<Receiver> {
    await new Promise<void>((resolve) => r.#server.listen(0, host, () => resolve()));
    return r;
  }

  /** TCP connections open now. */
  get openSockets(): number {
    return this.#sockets.size;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  url(path = "/hook", host = "127.0.0.1"): string {
    return `${this.#protocol}://${host}:${this.port}${path}`;
  }

  #onRequest(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const r: ReceivedRequest = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks),
        at: Date.now(),
        n: this.requests.length + 1,
      };
      this.requests.push(r);
      const reply = this.respond(r);
      if (reply.hang) return;
      const answer = () => {
        if (res.destroyed) return;
        res.writeHead(reply.status ?? 200, reply.headers ?? {});
        res.end(reply.body ?? "");
      };
      if (reply.after) void reply.after.then(answer, answer);
      else if (reply.delayMs)
        setTimeout(answer, reply.delayMs); // not a wait: a slow endpoint answers late
      else answer();
    });
  }

  /** Resolves once `count` requests arrived (throws after `timeoutMs`). */
  async waitFor(count: number, timeoutMs = 10_000): Promise<ReceivedRequest[]> {
    return until(() => this.requests.length >= count && this.requests, {
      timeout: timeoutMs,
      interval: 10,
      message: `${count} requests at the receiver`,
    }).catch((err: Error) => {
      throw new Error(`${err.message}; it got ${this.requests.length}`);
    });
  }

  /** Unique Idempotency-Key values received. */
  messageIds(): Set<string> {
    return new Set(this.requests.map((r) => String(r.headers["idempotency-key"])));
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
