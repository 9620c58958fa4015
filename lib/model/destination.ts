export type Signing = "segment" | "standard-webhooks";

/** A webhook destination as stored in the configuration bucket. */
export interface DestinationRecord {
  id: string;
  name: string;
  sourceIds: string[];
  /** 1..5 absolute http(s) URLs, tried in order. */
  urls: string[];
  /** At most 5 static headers. */
  headers: Record<string, string>;
  /** Absent when none is set. Never returned by the admin API. */
  sharedSecret?: string;
  signing: Signing;
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
}
