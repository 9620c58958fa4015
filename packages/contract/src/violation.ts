/** One invalid field of a request (google.rpc.BadRequest's FieldViolation; the HTTP `violations`). */
export interface Violation {
  field: string;
  description: string;
}

/**
 * How field names are spelled in violations: `proto` as in the .proto (`message_id`, gRPC and the
 * CLI), `json` as in Segment's JSON and the client library (`messageId`).
 */
export type FieldNaming = "proto" | "json";

const PROTO_NAMES: Record<string, string> = {
  messageId: "message_id",
  userId: "user_id",
  anonymousId: "anonymous_id",
  groupId: "group_id",
  previousId: "previous_id",
};

/** The name of a call field (given in its JSON spelling) in the given naming. */
export function fieldName(jsonName: string, naming: FieldNaming): string {
  return naming === "proto" ? (PROTO_NAMES[jsonName] ?? jsonName) : jsonName;
}
