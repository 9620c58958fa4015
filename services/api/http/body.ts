import type { IncomingMessage } from "node:http";
import { createGunzip } from "node:zlib";
import { Code } from "@hookpost/contract";
import { HttpStatusError } from "./http-error.js";

/**
 * Reads a request body of at most `maxBytes`, both as sent and once gunzipped
 * (`Content-Encoding: gzip`). Refuses while the body streams in: an announced Content-Length over
 * the limit is refused before reading, and reading stops at the first byte past the limit, so a
 * 10 MB body or a gzip bomb never costs more than `maxBytes` (plus one zlib chunk) of memory.
 */
export async function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const tooLarge = (what: string) =>
    new HttpStatusError(
      413,
      Code.INVALID_ARGUMENT,
      `the request body is larger than ${maxBytes} bytes${what}; send smaller batches`,
      "body",
    );
  const announced = Number(req.headers["content-length"]);
  if (Number.isFinite(announced) && announced > maxBytes) throw tooLarge("");

  const encoding = (req.headers["content-encoding"] ?? "identity").trim().toLowerCase();
  if (encoding !== "identity" && encoding !== "gzip") {
    throw new HttpStatusError(
      415,
      Code.INVALID_ARGUMENT,
      `Content-Encoding "${encoding}" is not supported: send gzip or no encoding`,
      "Content-Encoding",
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const keep = (chunk: Buffer, what: string) => {
    size += chunk.length;
    if (size > maxBytes) throw tooLarge(what);
    chunks.push(chunk);
  };
  if (encoding === "identity") {
    for await (const chunk of req as AsyncIterable<Buffer>) keep(chunk, "");
    return Buffer.concat(chunks, size);
  }
  const gunzip = createGunzip();
  let sent = 0;
  const feed = (async () => {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      sent += chunk.length;
      if (sent > maxBytes) throw tooLarge(" (compressed)");
      if (!gunzip.write(chunk)) await new Promise((r) => gunzip.once("drain", r));
    }
    gunzip.end();
  })();
  feed.catch((err) => gunzip.destroy(err as Error));
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) keep(chunk, " once decompressed");
    await feed;
  } catch (err) {
    gunzip.destroy();
    if (err instanceof HttpStatusError) throw err;
    throw new HttpStatusError(
      400,
      Code.INVALID_ARGUMENT,
      `the gzip body cannot be decompressed: ${(err as Error).message}`,
      "body",
    );
  }
  return Buffer.concat(chunks, size);
}
