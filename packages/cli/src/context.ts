import { readFileSync } from "node:fs";
import { type ChannelCredentials, credentials } from "@grpc/grpc-js";
import { adminMetadata, type CallOptions, createClient, writeKeyMetadata } from "@hookpost/client";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { IngestService } from "@hookpost/contract/gen/hookpost/v1/ingest_pb";
import type { Command } from "commander";
import { type ErrorScene, UsageError } from "./errors.js";
import type { Output } from "./output.js";

export const DEFAULT_ENDPOINT = "127.0.0.1:50051";
export const DEFAULT_TIMEOUT_MS = 15_000;

/** The options every command understands (set before or after the command name). */
export interface GlobalOptions {
  endpoint: string;
  token?: string;
  json?: boolean;
  tls?: boolean;
  caFile?: string;
  timeout: number;
}

function adminClient(target: string, creds: ChannelCredentials, token: string) {
  return createClient(AdminService, target, { credentials: creds, metadata: adminMetadata(token) });
}
function ingestClient(target: string, creds: ChannelCredentials, metadata: Record<string, string>) {
  return createClient(IngestService, target, { credentials: creds, metadata });
}
export type AdminClient = ReturnType<typeof adminClient>;
export type IngestClient = ReturnType<typeof ingestClient>;

/**
 * One invocation: the resolved endpoint and credentials, the output, and the gRPC clients
 * (created on first use, closed at the end). It remembers which credential it handed out so
 * that an UNAUTHENTICATED answer gets the right hint.
 */
export class Context implements ErrorScene {
  readonly out: Output;
  readonly endpoint: string;
  auth: ErrorScene["auth"];
  readonly tls: boolean;
  readonly #opts: GlobalOptions;
  readonly #target: string;
  readonly #closers: (() => void)[] = [];
  #credentials: ChannelCredentials | undefined;

  constructor(opts: GlobalOptions, out: Output) {
    this.#opts = opts;
    this.out = out;
    out.hide(opts.token);
    const { target, tls } = parseEndpoint(opts.endpoint);
    this.#target = target;
    this.tls = tls || Boolean(opts.tls) || opts.caFile !== undefined;
    this.endpoint = target;
  }

  /** AdminService with the admin token. */
  admin(): AdminClient {
    const client = adminClient(this.#target, this.#creds(), this.#token());
    this.#closers.push(() => client.close());
    return withDefaults(client, { timeoutMs: this.#opts.timeout });
  }

  /** IngestService with the admin token (Delete). */
  ingestAdmin(): IngestClient {
    const client = ingestClient(this.#target, this.#creds(), adminMetadata(this.#token()));
    this.#closers.push(() => client.close());
    return withDefaults(client, { timeoutMs: this.#opts.timeout });
  }

  /** IngestService with a source's write key (the call RPCs). */
  ingest(writeKey: string): IngestClient {
    this.auth = "write-key";
    const client = ingestClient(this.#target, this.#creds(), writeKeyMetadata(writeKey));
    this.#closers.push(() => client.close());
    return withDefaults(client, { timeoutMs: this.#opts.timeout });
  }

  close(): void {
    for (const close of this.#closers.splice(0)) close();
  }

  #token(): string {
    this.auth = "admin";
    const token = this.#opts.token;
    if (!token) throw new UsageError("no admin token: set ADMIN_TOKEN or pass --token");
    // grpc-js would refuse it with an error quoting the whole header, token included.
    if (!/^[ -~]*$/.test(token)) {
      throw new UsageError(
        "the admin token (ADMIN_TOKEN or --token) has characters a gRPC header cannot carry (a line break, a carriage return from a CRLF file, or a non-ASCII character); it is not shown",
      );
    }
    return token;
  }

  #creds(): ChannelCredentials {
    if (this.#credentials) return this.#credentials;
    if (!this.tls) {
      this.#credentials = credentials.createInsecure();
      return this.#credentials;
    }
    let ca: Buffer | null = null;
    if (this.#opts.caFile !== undefined) {
      try {
        ca = readFileSync(this.#opts.caFile);
      } catch (err) {
        throw new UsageError(`--ca-file: cannot read ${this.#opts.caFile}: ${(err as Error).message}`);
      }
    }
    this.#credentials = credentials.createSsl(ca);
    return this.#credentials;
  }
}

/**
 * Accepts `host:port`, `dns:///host:port`, `http://host:port` and `https://host:port`
 * (the last one turns TLS on). A missing port means 50051.
 */
export function parseEndpoint(endpoint: string): { target: string; tls: boolean } {
  const text = endpoint.trim();
  if (text === "") throw new UsageError("--endpoint is empty");
  const scheme = /^(https?):\/\/(.*)$/i.exec(text);
  if (scheme) {
    const rest = scheme[2]!.replace(/\/+$/, "");
    if (rest === "" || rest.includes("/")) throw new UsageError(`--endpoint: not a host:port: ${endpoint}`);
    return { target: withPort(rest), tls: scheme[1]!.toLowerCase() === "https" };
  }
  if (/^[a-z]+:\/\//i.test(text) || /^(dns|unix|ipv4|ipv6):/i.test(text)) return { target: text, tls: false };
  return { target: withPort(text), tls: false };
}

function withPort(hostPort: string): string {
  if (hostPort.startsWith("[")) {
    if (/^\[[^\]]+\]:\d+$/.test(hostPort)) return hostPort;
    if (/^\[[^\]]+\]$/.test(hostPort)) return `${hostPort}:50051`;
    throw new UsageError(`--endpoint: not a host:port: ${hostPort}`);
  }
  const colons = hostPort.split(":").length - 1;
  if (colons === 0) return `${hostPort}:50051`;
  if (colons > 1) return `[${hostPort}]:50051`; // a bare IPv6 address
  if (/^[^:]+:\d{1,5}$/.test(hostPort)) return hostPort;
  throw new UsageError(`--endpoint: not a host:port: ${hostPort}`);
}

/** Every unary call of the client gets these call options unless it passes its own. */
function withDefaults<T extends object>(client: T, defaults: CallOptions): T {
  return new Proxy(client, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== "function" || prop === "close") return value;
      return (req: unknown, options?: CallOptions) =>
        (value as (r: unknown, o: CallOptions) => unknown)(req, { ...defaults, ...options });
    },
  });
}

/** Hands each command the invocation's context, built from the global options on first use. */
export interface Session {
  context(command: Command): Context;
}
