/** The public entry point of @hookpost/cli: what other packages may import. */
export {
  type ApplyFile,
  type DesiredDestination,
  type DesiredSource,
  loadApplyFile,
  parseApplyFile,
} from "./apply-file.js";
export { applyCommand, diff } from "./commands/apply.js";
export {
  type ErrorScene,
  EXIT_FAILURE,
  EXIT_USAGE,
  InputError,
  type InputProblem,
  type RenderedError,
  renderError,
  UsageError,
} from "./errors.js";
export {
  collect,
  collectHeader,
  collectSequences,
  isoDate,
  jsonObject,
  pointInTime,
  positiveInt,
  sequence,
} from "./parse.js";
export {
  type DeadLetterView,
  type DestinationView,
  deadLetterView,
  destinationView,
  iso,
  outcomeText,
  SIGNING,
  type SigningName,
  type SourceView,
  sourceView,
  updateSummary,
} from "./views.js";
