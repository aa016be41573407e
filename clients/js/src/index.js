// @jobq/client: a client and a worker for jobq, over the runtime's fetch (Node >= 18, Deno,
// Bun); no dependencies. index.d.ts types every export.
export { Client, VERSION } from "./client.js";
export { Worker, Retry, Discard } from "./worker.js";
export {
  JobqError,
  TransportError,
  WaitTimeout,
  JobFailed,
  APIError,
  ValidationError,
  Unauthorized,
  Forbidden,
  NotFound,
  MethodNotAllowed,
  Conflict,
  LeaseLost,
  IdempotencyConflict,
  InvalidState,
  QueueNotEmpty,
  PayloadTooLarge,
  RetryableError,
  QueueFull,
  Unavailable,
  ServerError,
} from "./errors.js";
