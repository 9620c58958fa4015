/** The public entry point of @hookpost/dispatcher: what other packages may import. */
export { bodyObject, NEXT_SIGNATURE_HEADER, renderBody, signatureHeaders, USER_AGENT } from "@hookpost/core";
export {
  type AlertSettings,
  type DispatcherConfig,
  defaultDispatcherConfig,
  dispatcherConfigFrom,
  dispatcherConfigFromEnv,
} from "./config.js";
export { laneConsumerConfig } from "./consumers.js";
export { type DeliveryDeps, DeliveryHandler } from "./delivery.js";
export { type RunningDispatcher, startDispatcher } from "./dispatcher.js";
export { type AgentOptions, createWebhookAgent } from "./http-agent.js";
export { INTEGRATION_NAME, webhooksEnabled } from "./integrations.js";
export { LoopLag } from "./loop-lag.js";
export { DispatcherMetrics } from "./metrics.js";
export { AlertState, conditionKey } from "./operator-webhooks/alert-state.js";
export { eventId } from "./operator-webhooks/events.js";
export { AlertMonitor, type MonitorDeps } from "./operator-webhooks/monitor.js";
export { OperatorEventPublisher } from "./operator-webhooks/publisher.js";
export { ownerOf } from "./ordered/ownership.js";
export { Parking } from "./parking.js";
export { failedRetryMs, Puller, type PullerOptions } from "./puller.js";
export { restoreUncounted, uncounted } from "./restore.js";
export {
  backoffMs,
  type DeadCause,
  type Decision,
  decide,
  parseRetryAfter,
  policyFor,
  type RetryPolicy,
} from "./retry.js";
export { parseStoredCall, Router, type RouterDeps } from "./router.js";
export {
  type AttemptOutcome,
  type DeliveryResult,
  notSentOutcome,
  type SenderOptions,
  WebhookSender,
} from "./sender.js";
export { planShares, SHARE_PRESSURE, type ShareInput } from "./source-shares.js";
export { AddressPolicy, SsrfRefusedError } from "./ssrf.js";
export { type Look, type Suspicion, verdict } from "./stranded.js";
