import { connect } from "node:net";
import { gzipSync } from "node:zlib";

export interface Answer {
  status: number;
  headers: Headers;
  body: {
    success?: boolean;
    code?: string;
    message?: string;
    violations?: { field: string; description: string }[];
  };
}

export interface PostOptions {
  /** Write key sent as `Authorization: Basic base64(key:)`. */
  writeKey?: string;
  gzip?: boolean;
  headers?: Record<string, string>;
}

export const basic = (writeKey: string) => `Basic ${Buffer.from(`${writeKey}:`).toString("base64")}`;

/** POSTs a JSON body (an object is serialised; a string or Buffer is sent as is) to the HTTP API. */
export async function post(
  base: string,
  path: string,
  body: unknown,
  options: PostOptions = {},
): Promise<Answer> {
  let bytes: Buffer =
    typeof body === "string"
      ? Buffer.from(body)
      : Buffer.isBuffer(body)
        ? body
        : Buffer.from(JSON.stringify(body));
  const headers: Record<string, string> = { "Content-Type": "application/json", ...options.headers };
  if (options.writeKey !== undefined) headers.Authorization = basic(options.writeKey);
  if (options.gzip) {
    bytes = gzipSync(bytes);
    headers["Content-Encoding"] = "gzip";
  }
  const res = await fetch(`${base}${path}`, { method: "POST", headers, body: bytes });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: text === "" ? {} : (JSON.parse(text) as Answer["body"]),
  };
}

/**
 * Sends raw bytes over a fresh TCP connection and resolves with everything the server sent
 * back until it closed the connection (or `timeoutMs` passed), and whether it closed it.
 */
export function rawExchange(
  address: string,
  chunks: readonly (Buffer | string)[],
  options: { gapMs?: number; timeoutMs?: number } = {},
): Promise<{ text: string; closedByServer: boolean }> {
  const [host, port] = [
    address.slice(0, address.lastIndexOf(":")),
    Number(address.slice(address.lastIndexOf(":") + 1)),
  ];
  return new Promise((resolve) => {
    const socket = connect(port, host);
    let text = "";
    let done = false;
    const finish = (closedByServer: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closedByServer });
    };
    const timer = setTimeout(() => finish(false), options.timeoutMs ?? 30_000); // not a wait: gives up on a silent server
    socket.on("data", (d) => {
      text += d.toString("latin1");
    });
    socket.on("close", () => finish(true));
    socket.on("error", () => finish(true));
    socket.on("connect", async () => {
      for (const c of chunks) {
        if (done || socket.destroyed) return;
        socket.write(c);
        // not a wait: a slow client writes its chunks this far apart (the behaviour under test)
        if (options.gapMs) await new Promise((r) => setTimeout(r, options.gapMs));
      }
    });
  });
}
