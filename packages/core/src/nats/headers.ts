import { type Match, MsgHdrsImpl } from "nats";

/*
 * NATS headers for the hot paths. nats.js's MsgHdrsImpl lists and filters every key on each get,
 * has and set, and canonicalises and validates the key on each set: about a dozen array
 * allocations per delivery in the dispatcher's profile. These keep its map, wire form and errors.
 */

/** A key nats.js accepts as it is: printable ASCII without ':' (else its own check throws). */
const PLAIN_KEY = /^[\x21-\x39\x3b-\x7e]+$/;
/** Printable ASCII without spaces: stored as given by `set` (which trims and refuses CR/LF). */
const PLAIN_VALUE = /^[\x21-\x7e]+$/;

const plainValue = (v: string) => (PLAIN_VALUE.test(v) ? v : MsgHdrsImpl.validHeaderValue(v));

/**
 * MsgHdrs whose exact-name lookups go straight to the map (the only kind Hookpost makes); other
 * match modes, and keys nats.js would refuse, take nats.js's own path.
 */
export class MapHeaders extends MsgHdrsImpl {
  override get(k: string, match?: Match): string {
    if (match) return super.get(k, match);
    return this.headers.get(k)?.[0] ?? "";
  }

  override last(k: string, match?: Match): string {
    if (match) return super.last(k, match);
    return this.headers.get(k)?.at(-1) ?? "";
  }

  override has(k: string, match?: Match): boolean {
    if (match) return super.has(k, match);
    return this.headers.has(k);
  }

  override values(k: string, match?: Match): string[] {
    if (match) return super.values(k, match);
    return [...(this.headers.get(k) ?? [])];
  }

  override set(k: string, v: string, match?: Match): void {
    if (match || !PLAIN_KEY.test(k)) {
      super.set(k, v, match);
      return;
    }
    // Deleted first, as nats.js does: a key set again moves to the end of the wire form, and a
    // refused value leaves the key unset.
    this.headers.delete(k);
    this.headers.set(k, [plainValue(v)]);
  }

  override append(k: string, v: string, match?: Match): void {
    if (match || !PLAIN_KEY.test(k)) {
      super.append(k, v, match);
      return;
    }
    const value = plainValue(v);
    const a = this.headers.get(k);
    if (a) a.push(value);
    else this.headers.set(k, [value]);
  }

  override delete(k: string, match?: Match): void {
    if (match) super.delete(k, match);
    else this.headers.delete(k);
  }
}

/**
 * Headers whose wire form is rendered once: nats.js renders and encodes a MsgHdrs again on every
 * publish (about 1 µs each, measured on the audience sync). For headers shared by many publishes
 * and for the per-message `Nats-Msg-Id` of the hot paths (`msgIdHeaders`). Changing one
 * renders it again.
 */
export class EncodedHeaders extends MapHeaders {
  #wire: Uint8Array | undefined;

  override encode(): Uint8Array {
    this.#wire ??= Buffer.from(this.toString());
    return this.#wire;
  }

  override append(k: string, v: string, match?: Match): void {
    this.#wire = undefined;
    super.append(k, v, match);
  }

  override set(k: string, v: string, match?: Match): void {
    this.#wire = undefined;
    super.set(k, v, match);
  }

  override delete(k: string, match?: Match): void {
    this.#wire = undefined;
    super.delete(k, match);
  }
}

/** Headers holding only `Nats-Msg-Id: <id>`, the same as `headers().set("Nats-Msg-Id", id)`. */
export function msgIdHeaders(id: string): EncodedHeaders {
  const h = new EncodedHeaders();
  h.set("Nats-Msg-Id", id);
  return h;
}
