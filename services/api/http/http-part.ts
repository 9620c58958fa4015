import type { Logger } from "@hookpost/core";
import type { IngestConfig } from "../config.js";
import type { IngestMetrics } from "../metrics.js";
import { DEFAULT_HTTP_LIMITS } from "./limits.js";
import { type SegmentApiDeps, segmentApi } from "./segment-api.js";
import { type HttpServer, type Mount, startHttpServer } from "./server.js";

/**
 * The HTTP listener (HTTP_ADDR): the Segment API answers /v1/*; `mounts` (the console and
 * AdminService over Connect, then the caller's own) the rest, in order.
 */
export async function startHttp(
  config: Pick<IngestConfig, "http" | "httpPublicUrl"> & { httpAddress: string },
  deps: Omit<SegmentApiDeps, "maxBodyBytes"> & { metrics: IngestMetrics; log: Logger },
  mounts: readonly Mount[],
): Promise<HttpServer> {
  const limits = { ...DEFAULT_HTTP_LIMITS, ...config.http };
  const api = segmentApi({ ...deps, maxBodyBytes: limits.maxBodyBytes, publicUrl: config.httpPublicUrl });
  const http = await startHttpServer({
    address: config.httpAddress,
    limits,
    mounts: [api, ...mounts],
    onError: (err) => deps.log.error({ transport: "http", err: (err as Error)?.message }, "internal error"),
  });
  deps.metrics.watchHttpConnections(http.connections);
  deps.log.info(
    { address: http.address },
    "HTTP listening: Segment-compatible API, console, AdminService over Connect",
  );
  return http;
}
