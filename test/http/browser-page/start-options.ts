/** How the test starts analytics-next on the page (page.ts); no DOM types, so tests import it too. */
export interface StartOptions {
  writeKey: string;
  /** Hookpost's HTTP API, another origin than the page's. */
  cdnURL: string;
  /** `host:port/v1`; absent: the settings path's answer. */
  apiHost?: string;
  batching?: { size: number; timeout: number };
  keepalive?: boolean;
}
