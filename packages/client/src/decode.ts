import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Call } from "./calls.js";
import { decodeFrame } from "./wire.js";

/**
 * A queued frame back as the public call shape, for error reports. Proto3 cannot tell an empty
 * string from an absent one, so empty strings and maps are left out.
 */
export function decodeCall(frame: Uint8Array): Call {
  const { call } = decodeFrame(frame);
  const out: Record<string, unknown> = { type: call.case ?? "unknown" };
  for (const [key, v] of Object.entries((call.value ?? {}) as Record<string, unknown>)) {
    if (key.startsWith("$") || v === undefined || v === "") continue;
    if (key === "timestamp") out.timestamp = timestampDate(v as Parameters<typeof timestampDate>[0]);
    else if (key === "integrations" && Object.keys(v as object).length === 0) continue;
    else out[key] = v;
  }
  return out as Call;
}
