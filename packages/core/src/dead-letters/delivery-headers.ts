import { withoutLoneSurrogates } from "@hookpost/contract";
/**
 * Headers every message on DELIVERIES carries. The router writes them, the dispatcher reads them,
 * and a dead-letter replay writes them again, so they live in one place.
 */
export const MESSAGE_ID_HEADER = "Hookpost-Message-Id";
export const SOURCE_ID_HEADER = "Hookpost-Source-Id";
/**
 * Set by the router when the call's webhook body could not be rendered (the message then holds
 * the stored call): the dispatcher records a not-sent attempt with this reason, retries within
 * the retry window like any failure before sending, and dead-letters it at the window.
 */
export const NOT_RENDERED_HEADER = "Hookpost-Not-Rendered";
/**
 * On a parked delivery (its destination's lane): when the delivery was first stored, in ms since
 * the epoch; the retry window runs from there, and health's oldest waiting call is read from it.
 */
export const FIRST_TIME_HEADER = "Hookpost-First-Time";

/**
 * The call's user (users/user-hash.ts), set by the router on every delivery of a call that names
 * a user, except deletion notices, and carried on to parked deliveries and dead letters: erasure
 * finds a user's pending deliveries and dead letters by it without reading bodies. Absent on
 * messages stored before erasure existed (erasure then reads the body).
 */
export const USER_HASH_HEADER = "Hookpost-User-Hash";
/** `{ userHash }` from a delivery's headers, for the records made of it; `{}` when it has none. */
export function userHashField(h: { get(name: string): string } | undefined): { userHash?: string } {
  const v = h?.get(USER_HASH_HEADER);
  return v ? { userHash: v } : {};
}

/**
 * The call's type and, for a track call, its event name, set by the router on every delivery and
 * carried on like the user hash: the dispatcher writes them into attempt and dead records, which
 * the attempt log is searched by (docs/design/attempt-search.md). The event is percent-encoded
 * (a header is one line) and cut to MAX_LOGGED_EVENT_CHARS.
 */
export const CALL_TYPE_HEADER = "Hookpost-Call-Type";
export const EVENT_HEADER = "Hookpost-Event";
/** Longest event name a record keeps; search hashes names cut the same way. */
export const MAX_LOGGED_EVENT_CHARS = 256;

/**
 * The event name as records and headers keep it: cut to MAX_LOGGED_EVENT_CHARS, never inside a
 * surrogate pair, and lone surrogates (JSON may carry them) as U+FFFD: the header's percent-encoding
 * refuses them, and a call whose header could not be written was never routed.
 */
export function loggedEvent(event: string): string {
  let cut = event;
  if (event.length > MAX_LOGGED_EVENT_CHARS) {
    const last = event.charCodeAt(MAX_LOGGED_EVENT_CHARS - 1);
    cut = event.slice(
      0,
      last >= 0xd800 && last <= 0xdbff ? MAX_LOGGED_EVENT_CHARS - 1 : MAX_LOGGED_EVENT_CHARS,
    );
  }
  return withoutLoneSurrogates(cut);
}

/** Sets CALL_TYPE_HEADER and EVENT_HEADER for a call (or a record made of one). */
export function setCallHeaders(
  h: { set(name: string, value: string): void },
  call: { type?: string | undefined; callType?: string | undefined; event?: string | undefined },
): void {
  const type = call.callType ?? call.type;
  if (type) h.set(CALL_TYPE_HEADER, type);
  if (call.event) h.set(EVENT_HEADER, encodeURIComponent(loggedEvent(call.event)));
}

/** `{ callType, event }` from a delivery's headers; `{}` for deliveries stored before issue 28. */
export function callFields(h: { get(name: string): string } | undefined): {
  callType?: string;
  event?: string;
} {
  const type = h?.get(CALL_TYPE_HEADER);
  const encoded = h?.get(EVENT_HEADER);
  let event: string | undefined;
  if (encoded) {
    try {
      event = decodeURIComponent(encoded);
    } catch {
      // Not ours: a record without its event rather than none at all.
    }
  }
  return { ...(type ? { callType: type } : {}), ...(event !== undefined ? { event } : {}) };
}

/** What a record made of a delivery (attempt, dead letter) takes from the call: user, type, event. */
export interface RecordFields {
  userHash?: string;
  callType?: string;
  event?: string;
}

/** RecordFields from a delivery's headers. */
export function recordFields(h: { get(name: string): string } | undefined): RecordFields {
  return { ...userHashField(h), ...callFields(h) };
}

/**
 * RecordFields of a call as the router heads its deliveries (user hash, setCallHeaders): what
 * recordFields reads back from them, without the headers (a direct attempt's, direct.ts).
 */
export function callRecordFields(
  call: { type?: string | undefined; event?: string | undefined },
  userHash: string | undefined,
): RecordFields {
  const f: RecordFields = {};
  if (userHash) f.userHash = userHash;
  if (call.type) f.callType = call.type;
  if (call.event) f.event = loggedEvent(call.event);
  return f;
}

/**
 * On HOOKPOST_ORDERED only: the call's sequence on EVENTS (the order it was accepted in). Routers
 * may store a user's calls out of that order (two replicas, a retried publish); the ordered worker
 * sends by it (services/dispatcher/ordered/).
 */
export const EVENT_SEQ_HEADER = "Hookpost-Event-Seq";

/**
 * Nats-Msg-Id of the delivery of one call to one destination. A redelivered router message
 * publishes the same id again, and JetStream stores it once.
 */
export function deliveryMsgId(sourceId: string, messageId: string, destinationId: string): string {
  return `${sourceId}:${messageId}:${destinationId}`;
}
