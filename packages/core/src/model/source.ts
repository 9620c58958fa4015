import { hash, randomBytes } from "node:crypto";

/** A source as stored in the configuration bucket. The write key itself is never stored. */
export interface SourceRecord {
  id: string;
  name: string;
  /** sha256 hex of the write key (keys are 192 random bits, so a fast hash is enough). */
  writeKeyHash: string;
  /** First characters of the key, to tell keys apart in listings. */
  writeKeyPrefix: string;
  createdAt: string;
  /**
   * Web origins whose browsers may send this source's calls (CORS, `@hookpost/contract`
   * origins.ts), normalised. Absent or empty: any origin.
   */
  allowedOrigins?: string[];
}

export function generateWriteKey(): string {
  return `hpk_${randomBytes(24).toString("base64url")}`;
}

export function hashWriteKey(writeKey: string): string {
  return hash("sha256", writeKey, "hex");
}

export function writeKeyPrefix(writeKey: string): string {
  return writeKey.slice(0, 8);
}
