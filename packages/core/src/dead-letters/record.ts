/** Why one URL of a delivery failed (the proto's UrlOutcome.error). */
export type FailureKind =
  | "timeout"
  | "connection"
  | "tls"
  | "ssrf"
  | "redirect"
  | "http"
  /** The status was outside 100-599. */
  | "invalid_response"
  /** No request: it could not be prepared (signing, body, configuration). */
  | "not_sent"
  /** No request: the destination's filter refused the call at the attempt (not a failure). */
  | "filtered";

/** The last outcome of one URL (maps 1:1 onto hookpost.v1.UrlOutcome). */
export interface UrlOutcomeRecord {
  /** The URL as configured, with any password in it masked. */
  url: string;
  /** HTTP status, 0 when no response was received. */
  status: number;
  error: FailureKind;
  detail: string;
}

/**
 * A delivery the dispatcher gave up on, stored as JSON on hookpost.dead.<destinationId>.
 * Maps 1:1 onto hookpost.v1.DeadLetter (times are ISO 8601 strings here).
 */
export interface DeadLetterRecord {
  messageId: string;
  destinationId: string;
  sourceId: string;
  /** The exact webhook body, byte for byte what was (or would have been) sent; "" when `bodyOmitted`. */
  body: string;
  /** Written with DEAD_LETTER_BODIES=off: the body was not kept (a replay looks for it in the attempt log). */
  bodyOmitted?: boolean;
  /**
   * Set when no webhook body could be rendered (NOT_RENDERED_HEADER): `body` is then the stored
   * call, and a replay marks it again rather than send it to the endpoint as if it were one.
   */
  notRendered?: string;
  /** Delivery attempts made (JetStream deliveries of the message). */
  attempts: number;
  outcomes: UrlOutcomeRecord[];
  reason: string;
  /** When the delivery was stored on DELIVERIES, i.e. when the retry window started. */
  firstAttemptTime: string;
  deadTime: string;
  /**
   * The call's user (users/user-hash.ts, the delivery's USER_HASH_HEADER), also stored as that
   * header on the dead letter, for erasure. Absent in older records and deletion notices.
   */
  userHash?: string;
  /** The call's type and event (CALL_TYPE_HEADER, EVENT_HEADER), kept for replays and the attempt log. */
  callType?: string;
  event?: string;
  /** A FAN_OUT destination's URL the delivery went to (replayed to that URL again). */
  urlIndex?: number;
}

/** A stored dead letter with its DEAD stream sequence (the handle for replay). */
export interface DeadLetter extends DeadLetterRecord {
  sequence: number;
}
