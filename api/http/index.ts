// Shared HTTP pieces of every Capstan API (orchestrator, secrets, registry, console). Components
// import from here: error answers in docs/api-reference.md's shapes ("Errors"), JSON bodies (content type,
// 1 MiB, UTF-8, syntax, then a zod schema) and query parameters, every failure a 400 that names
// the field.
export {
  accepted,
  ApiError,
  asApiError,
  authChallenge,
  badRequest,
  errorHandler,
  errorResponse,
  forbidden,
  notAllowed,
  notFound,
  notFoundHandler,
  notFoundHandlerFor,
  unauthorized,
  unavailable,
  type ApiErrorOptions,
  type ErrorBody,
  type ErrorFormat,
  type ErrorDetail,
  type ErrorStatus,
  type NotAllowedReason,
} from "./errors.ts";
export { maxJsonBodyBytes, readBodyBytes, readJson, readJsonBody, type ReadJsonOptions } from "./body.ts";
export { parseQuery, queryBoolean, queryCount } from "./query.ts";
export { invalid, parseWith } from "./validation.ts";
export { detailsOf, formatPath } from "../resources/issue-paths.ts";
export { isoNow, systemWallClock, type WallClock } from "./clock.ts";
