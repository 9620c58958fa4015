import { FIRST_TIME_HEADER, USER_HASH_HEADER } from "../dead-letters/delivery-headers.js";
import { userHash } from "../users/user-hash.js";

/** What erasure looks at of a stored message. */
export interface RawMessage {
  data: Uint8Array;
  headers?: { get(name: string): string } | undefined;
}

const decoder = new TextDecoder();
/** Written by JSON.stringify, so always in this form: found without parsing the record. */
const USER_HASH_FIELD = /"userHash":"([0-9a-f]{32})"/;

/**
 * The user (users/user-hash.ts) of a call, a webhook body or the stored call in it, as long as it
 * names a userId and is not a deletion notice (that one must survive). Deletions are by userId,
 * so calls that carry only an anonymousId are not the deleted user's. The seed's alias body
 * writes the id as "User ID".
 */
export function userOfCallJson(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  if (o.type === "delete") return undefined;
  const id = typeof o.userId === "string" ? o.userId : o["User ID"];
  return typeof id === "string" && id !== "" ? userHash({ userId: id }) : undefined;
}

/**
 * The user of a message of EVENTS, DELIVERIES or ORDERED: the router's USER_HASH_HEADER, else
 * (stored before erasure existed, or an EVENTS call, which the router has not seen) its body.
 */
export function userOfDelivery(m: RawMessage): string | undefined {
  return m.headers?.get(USER_HASH_HEADER) || userOfCallJson(decoder.decode(m.data));
}

/** The user of a dead letter: its header, else (an older record) the body it holds. */
export function userOfDeadLetter(m: RawMessage): string | undefined {
  const h = m.headers?.get(USER_HASH_HEADER);
  if (h) return h;
  try {
    return userOfCallJson((JSON.parse(decoder.decode(m.data)) as { body?: string }).body);
  } catch {
    return undefined;
  }
}

/**
 * The user of an attempt-log record: its `userHash` field, else (older records) the call in the
 * routed record's body or an old attempt record's request body.
 */
export function userOfLogRecord(m: RawMessage): string | undefined {
  const text = decoder.decode(m.data);
  const field = USER_HASH_FIELD.exec(text);
  if (field) return field[1];
  try {
    const r = JSON.parse(text) as { body?: string; requestBody?: string };
    return userOfCallJson(r.body ?? r.requestBody);
  } catch {
    return undefined;
  }
}

/*
 * When the call of a message was first stored on DELIVERIES (ms), for the messages that are copies
 * made later: a delivery parked on its lane at a retry (or stored again, restore.ts), a dead letter,
 * the records of an attempt made after the delivery waited. Erasure takes the earlier of this and
 * the message's own stored time: a copy made after the request's settle time is still the call
 * accepted before it, not new data. Undefined when the message says nothing (then its stored time
 * is the call's). Read only for messages of a user being erased.
 */

/** A delivery's FIRST_TIME_HEADER (set on every parked copy). */
export function firstTimeOfDelivery(m: RawMessage): number | undefined {
  return validTime(Number(m.headers?.get(FIRST_TIME_HEADER)));
}

/** A dead letter's `firstAttemptTime`: when its delivery was first stored. */
export function firstTimeOfDeadLetter(m: RawMessage): number | undefined {
  return timeField(m, "firstAttemptTime");
}

/** An attempt or dead record's `firstTime` (attempts/record.ts). */
export function firstTimeOfLogRecord(m: RawMessage): number | undefined {
  return timeField(m, "firstTime");
}

function timeField(m: RawMessage, field: string): number | undefined {
  try {
    const v = (JSON.parse(decoder.decode(m.data)) as Record<string, unknown>)[field];
    return typeof v === "string" ? validTime(Date.parse(v)) : undefined;
  } catch {
    return undefined;
  }
}

const validTime = (ms: number) => (Number.isFinite(ms) && ms > 0 ? ms : undefined);
