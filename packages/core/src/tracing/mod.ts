export {
  extractTraceContext,
  grpcTraceContext,
  type HeaderGetter,
  type TraceContext,
} from "./propagation.js";
export {
  ATTR,
  endRequestSpan,
  natsTraceContext,
  type StepSpan,
  startDeliverySpan,
  startPublishSpan,
  startRequestSpan,
  startRouteSpan,
} from "./spans.js";
export { startTracing, type Tracing, type TracingOptions } from "./start.js";
