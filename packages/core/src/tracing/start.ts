import { DiagLogLevel, diag, trace } from "@opentelemetry/api";
import type { SpanExporter } from "@opentelemetry/sdk-trace-base";
import { tracingEnabledFromEnv } from "../env/tracing-env.js";
import type { Logger } from "../log/logger.js";
import { setRecording } from "./spans.js";

type Env = Record<string, string | undefined>;

export interface Tracing {
  /** False when no OTEL_* variable turned it on: spans are the API's no-ops then. */
  readonly enabled: boolean;
  /** Exports what is still buffered, then stops (call before the process exits). */
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /** Exports here, span by span, instead of OTLP (tests); starts tracing regardless of the env. */
  exporter?: SpanExporter;
}

const OFF: Tracing = { enabled: false, shutdown: async () => {} };

/**
 * Starts the OpenTelemetry SDK when the environment asks for it (an OTLP endpoint, see
 * packages/core/src/env/tracing-env.ts) and registers it as the global tracer provider. Otherwise nothing is
 * loaded or started: the API's no-op tracer stays in place and spans cost next to nothing.
 * The SDK and exporter read their own OTEL_* settings (sampler, service name, headers, timeout).
 */
export async function startTracing(
  serviceName: string,
  env: Env,
  log: Logger,
  options: TracingOptions = {},
): Promise<Tracing> {
  if (!options.exporter && !tracingEnabledFromEnv(env)) return OFF;
  // Loaded only when tracing is on: a plain installation never pays for the SDK.
  const [{ BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor }, resources, semconv] =
    await Promise.all([
      import("@opentelemetry/sdk-trace-base"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/semantic-conventions"),
    ]);
  // Export failures (collector down) are the SDK's own diagnostics: surface them as warnings.
  diag.setLogger(
    {
      error: (msg, ...args) =>
        log.warn({ detail: args.map(String).join(" ").slice(0, 500) }, `tracing: ${msg}`),
      warn: (msg, ...args) =>
        log.warn({ detail: args.map(String).join(" ").slice(0, 500) }, `tracing: ${msg}`),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the default name.
  const resource = resources
    .resourceFromAttributes({ [semconv.ATTR_SERVICE_NAME]: serviceName })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  let processor: InstanceType<typeof BatchSpanProcessor> | InstanceType<typeof SimpleSpanProcessor>;
  if (options.exporter) {
    processor = new SimpleSpanProcessor(options.exporter);
  } else {
    const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http");
    processor = new BatchSpanProcessor(new OTLPTraceExporter());
  }
  // The sampler comes from OTEL_TRACES_SAMPLER / _ARG (default: parent-based, always on).
  const provider = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  trace.setGlobalTracerProvider(provider);
  setRecording(true);
  log.info({ service: serviceName, otlp: !options.exporter }, "tracing on");
  return {
    enabled: true,
    async shutdown() {
      try {
        await provider.shutdown();
      } catch (err) {
        log.warn({ err: (err as Error).message }, "tracing: last export failed");
      } finally {
        setRecording(false);
        trace.disable();
        diag.disable();
      }
    },
  };
}
