import { MAX_MESSAGE_ID_CHARS } from "./limits.js";

/**
 * THE message-id rule, for every transport and the client library: 1 to 100 characters, each
 * printable ASCII from `!` (0x21) to `~` (0x7E): letters, digits and punctuation, no spaces.
 *
 * Why so strict: the id travels unchanged as the JetStream dedup key (`Nats-Msg-Id`), the
 * webhook `Idempotency-Key` and `webhook-id` headers. Header values cannot carry characters above
 * U+00FF, and clients, proxies and the NATS client trim surrounding whitespace (a BOM is stripped
 * by decoders), so any other id could be answered "stored" and then be delivered under another
 * id, collide with one, or never be deliverable. Such ids are refused, never rewritten.
 * An empty id means "none": ingest assigns a UUID.
 */
export const MESSAGE_ID_RULE = `printable ASCII from "!" to "~" (letters, digits, punctuation; no spaces), 1 to ${MAX_MESSAGE_ID_CHARS} characters`;

/** Why a (non-empty) message id breaks the rule, or undefined when it is fine. */
export function messageIdProblem(id: string): string | undefined {
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) {
      const at = [...id.slice(0, i)].length + 1;
      return `contains ${describe(id.codePointAt(i)!)} at character ${at}; a message id is ${MESSAGE_ID_RULE}`;
    }
  }
  // Only ASCII is left, so UTF-16 units, code points and bytes all count the same.
  if (id.length > MAX_MESSAGE_ID_CHARS) {
    return `is ${id.length} characters long; a message id is ${MESSAGE_ID_RULE}`;
  }
  return undefined;
}

function describe(cp: number): string {
  const hex = `U+${cp.toString(16).toUpperCase().padStart(4, "0")}`;
  if (cp === 0x20) return "a space";
  if (cp === 0xfeff) return `a byte order mark (${hex})`;
  if (cp < 0x20 || cp === 0x7f) return `a control character (${hex})`;
  if (/\s/u.test(String.fromCodePoint(cp))) return `whitespace (${hex})`;
  return `"${String.fromCodePoint(cp)}" (${hex})`;
}
