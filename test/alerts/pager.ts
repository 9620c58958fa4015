import type { OperatorWebhookRecord } from "@hookpost/core";

/** One operator webhook for every event type, as the watcher tests configure it. */
export const PAGER: OperatorWebhookRecord = {
  id: "pager",
  name: "Pager",
  url: "https://pager.example.com/in",
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  eventTypes: [],
  enabled: true,
  createdAt: "2026-12-01T00:00:00.000Z",
  updatedAt: "2026-12-01T00:00:00.000Z",
};
