/** Free-form data (traits, properties, context); it must survive JSON.stringify. */
export type Payload = Record<string, unknown>;

/** Fields every call may carry. `| undefined` everywhere so callers can spread optional values. */
export interface CommonFields {
  /** At most 100 characters; a uuid v4 is assigned when absent. Reusing an id makes the server drop the copy. */
  messageId?: string | undefined;
  userId?: string | undefined;
  anonymousId?: string | undefined;
  /** When the call happened (historical import). Defaults to the time of the call to the client. */
  timestamp?: Date | string | undefined;
  context?: Payload | undefined;
  /** Destination name to on/off; `All: false` turns off every destination not set true. */
  integrations?: Record<string, boolean> | undefined;
}

export interface IdentifyParams extends CommonFields {
  traits?: Payload | undefined;
}

export interface TrackParams extends CommonFields {
  event: string;
  properties?: Payload | undefined;
}

export interface PageParams extends CommonFields {
  name?: string | undefined;
  category?: string | undefined;
  /** `url`, `title`, `referrer` and `path` are recognized; others are allowed. */
  properties?: Payload | undefined;
}

export interface ScreenParams extends CommonFields {
  name?: string | undefined;
}

export interface GroupParams extends CommonFields {
  groupId: string;
  traits?: Payload | undefined;
}

export interface AliasParams extends CommonFields {
  userId: string;
  previousId: string;
}

export interface ParamsByType {
  identify: IdentifyParams;
  track: TrackParams;
  page: PageParams;
  screen: ScreenParams;
  group: GroupParams;
  alias: AliasParams;
}

export type CallType = keyof ParamsByType;

/**
 * A queued call as reported back (in errors): its type, its assigned message id, and its fields as
 * they were sent (timestamp as a Date, context including `library`). `analytics[call.type](call)`
 * enqueues it again with the same id, so the server stores it at most once.
 */
export type Call = {
  [T in CallType]: { type: T; messageId: string } & Omit<ParamsByType[T], "messageId">;
}[CallType];
