export { DeadLetters, type ListOptions } from "./dead-letters.js";
export { deliveryMsgId, MESSAGE_ID_HEADER, SOURCE_ID_HEADER } from "./delivery-headers.js";
export type { DeadLetter, DeadLetterRecord, FailureKind, UrlOutcomeRecord } from "./record.js";
