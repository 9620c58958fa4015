/** A request body as received: the exact bytes, or their UTF-8 text. */
export type RawBody = string | Uint8Array;

/** The bytes signatures are computed over; strings are taken as UTF-8, as they are sent. */
export function bodyBytes(body: RawBody): Uint8Array {
  return typeof body === "string" ? Buffer.from(body, "utf8") : body;
}
