import type { DescMessage } from "@bufbuild/protobuf";
import {
  AliasRequestSchema,
  type BatchCall,
  GroupRequestSchema,
  IdentifyRequestSchema,
  PageRequestSchema,
  ScreenRequestSchema,
  TrackRequestSchema,
} from "../../../gen/hookpost/v1/ingest_pb.js";

/** One analytics call, tagged with its type: the shape of a BatchCall's oneof. */
export type Call = Exclude<BatchCall["call"], { case: undefined }>;
export type CallType = Call["case"];

/** The request message of each call type, to measure a call's encoded size. */
export const CALL_SCHEMAS: Record<CallType, DescMessage> = {
  identify: IdentifyRequestSchema,
  track: TrackRequestSchema,
  page: PageRequestSchema,
  screen: ScreenRequestSchema,
  group: GroupRequestSchema,
  alias: AliasRequestSchema,
};
