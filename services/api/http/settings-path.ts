import type { IncomingMessage } from "node:http";
import { Code } from "@hookpost/contract";
import type { ConfigStore, SourceRecord } from "@hookpost/core";
import { HttpStatusError } from "./http-error.js";

/** `/v1/projects/<write key>/settings`: what Segment's SDKs load before they send. */
export const SETTINGS_PATH = /^\/v1\/projects\/([^/]+)\/settings$/;
/** The path as metrics and logs name it: the write key in the URL never reaches either. */
export const SETTINGS_LABEL = "/v1/projects/{writeKey}/settings";
/**
 * How long browsers and caches may keep an answer (docs/api.md "Browser and mobile SDKs"): a
 * changed HTTP_PUBLIC_URL reaches pages within this time; a rotated key fails at once anyway,
 * on the calls.
 */
export const SETTINGS_MAX_AGE_S = 300;
/** Far longer than any write key; a longer path segment is no key. */
const MAX_KEY_CHARS = 256;
/** A Host header that can be an API host (name or IP literal, optional port). */
const HOST = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * The answer of the settings path for one source: its `Segment.io` integration (the write key as
 * `apiKey`, where to send as `apiHost` and `protocol`) and empty values for everything else the
 * SDKs read, so that they load no other integration, plugin or middleware and send no telemetry
 * (analytics-next samples its own metrics at 100 % to `<apiHost>/m` unless `metrics.sampleRate`
 * says otherwise). Nothing about other sources or destinations.
 */
export function sdkSettings(writeKey: string, apiHost: string, protocol: "http" | "https"): object {
  return {
    integrations: {
      "Segment.io": { apiKey: writeKey, apiHost, protocol },
    },
    plan: {},
    edgeFunction: {},
    analyticsNextEnabled: true,
    middlewareSettings: {},
    enabledMiddleware: {},
    metrics: { sampleRate: 0 },
    legacyVideoPluginsEnabled: false,
    remotePlugins: [],
  };
}

/** Where the SDKs should send: HTTP_PUBLIC_URL, else the host this request reached, over http. */
export function apiEndpoint(
  req: IncomingMessage,
  publicUrl: string | undefined,
): { apiHost: string; protocol: "http" | "https" } {
  if (publicUrl !== undefined) {
    const url = new URL(publicUrl);
    return {
      apiHost: `${url.host}${url.pathname.replace(/\/+$/, "")}/v1`,
      protocol: url.protocol === "https:" ? "https" : "http",
    };
  }
  const host = req.headers.host ?? "";
  if (!HOST.test(host)) {
    throw new HttpStatusError(
      400,
      Code.INVALID_ARGUMENT,
      "the Host header is missing or not a host[:port]; HTTP_PUBLIC_URL sets the API host instead",
      "Host",
    );
  }
  return { apiHost: `${host}/v1`, protocol: "http" };
}

/** The source whose write key is in the path (404 for none). */
export function settingsSource(
  store: ConfigStore,
  encodedKey: string,
): { source: SourceRecord; writeKey: string } {
  let key: string;
  try {
    key = decodeURIComponent(encodedKey);
  } catch {
    key = "";
  }
  const source = key === "" || key.length > MAX_KEY_CHARS ? undefined : store.sourceByWriteKey(key);
  if (source === undefined) {
    throw new HttpStatusError(404, Code.NOT_FOUND, "no source has this write key (deleted or rotated?)");
  }
  return { source, writeKey: key };
}
