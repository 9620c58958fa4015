import { ConfigError } from "./read-env.js";

const envOptional = (env: Env, name: string) => (env[name] === "" ? undefined : env[name]);

type Env = Record<string, string | undefined>;

/**
 * Whether OpenTelemetry tracing is on. The OTLP exporter and the SDK read their own settings
 * (endpoint, headers, sampler, service name) from the standard OTEL_* variables; this only
 * decides whether to start the SDK at all, so that a plain installation pays nothing.
 */
export function tracingEnabledFromEnv(env: Env): boolean {
  if (envOptional(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return false;
  const exporter = envOptional(env, "OTEL_TRACES_EXPORTER")?.toLowerCase();
  if (exporter === "none") return false;
  if (exporter !== undefined && exporter !== "otlp") {
    throw new ConfigError(`OTEL_TRACES_EXPORTER must be "otlp" or "none", got "${exporter}"`);
  }
  const endpoint =
    envOptional(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") ?? envOptional(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
  if (endpoint !== undefined && !/^https?:\/\//i.test(endpoint)) {
    throw new ConfigError(`the OTLP endpoint must be an http(s):// URL, got "${endpoint}"`);
  }
  // OTLP/HTTP (JSON) is what is sent; collectors take it on the same port as http/protobuf.
  const protocol =
    envOptional(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ?? envOptional(env, "OTEL_EXPORTER_OTLP_PROTOCOL");
  if (protocol === "grpc") {
    throw new ConfigError(
      'OTLP over gRPC is not supported: use the collector\'s OTLP/HTTP port (4318) and "http/protobuf"',
    );
  }
  // An endpoint, or the exporter asked for explicitly (then the OTLP default, localhost:4318).
  return endpoint !== undefined || exporter === "otlp";
}
