import { ConfigError, extractTraceContext, tracingEnabledFromEnv } from "@hookpost/core";
import { trace } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";

describe("when tracing is on", () => {
  it("is off without OTEL_* variables, on with an OTLP endpoint or OTEL_TRACES_EXPORTER=otlp", () => {
    expect(tracingEnabledFromEnv({})).toBe(false);
    expect(tracingEnabledFromEnv({ OTEL_SERVICE_NAME: "x" })).toBe(false);
    expect(tracingEnabledFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toBe(true);
    expect(tracingEnabledFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://c/v1/traces" })).toBe(true);
    expect(tracingEnabledFromEnv({ OTEL_TRACES_EXPORTER: "otlp" })).toBe(true);
  });

  it("OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off", () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" };
    expect(tracingEnabledFromEnv({ ...endpoint, OTEL_SDK_DISABLED: "true" })).toBe(false);
    expect(tracingEnabledFromEnv({ ...endpoint, OTEL_TRACES_EXPORTER: "none" })).toBe(false);
  });

  it("refuses settings it cannot honour, naming the variable", () => {
    expect(() => tracingEnabledFromEnv({ OTEL_TRACES_EXPORTER: "zipkin" })).toThrow(ConfigError);
    expect(() => tracingEnabledFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toThrow(
      /http\(s\):\/\//,
    );
    expect(() =>
      tracingEnabledFromEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4317",
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      }),
    ).toThrow(/OTLP\/HTTP/);
  });
});

describe("extractTraceContext", () => {
  const headers = (h: Record<string, string>) => (name: string) => h[name];
  it("reads a valid traceparent (and tracestate); ignores missing or malformed ones", () => {
    const ctx = extractTraceContext(
      headers({ traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "a=b" }),
    );
    const sc = trace.getSpanContext(ctx)!;
    expect(sc).toMatchObject({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      isRemote: true,
    });
    expect(sc.traceState?.get("a")).toBe("b");
    expect(trace.getSpanContext(extractTraceContext(headers({})))).toBeUndefined();
    expect(trace.getSpanContext(extractTraceContext(headers({ traceparent: "garbage" })))).toBeUndefined();
    expect(
      trace.getSpanContext(
        extractTraceContext(headers({ traceparent: `00-${"0".repeat(32)}-00f067aa0ba902b7-01` })),
      ),
    ).toBeUndefined();
  });
});
