// The client's one error tree. Every error it throws on purpose is a JobqError.
//
//   JobqError
//   ├── TransportError            no HTTP answer: connection refused or reset, DNS, timeout
//   ├── WaitTimeout               wait(): the job did not finish in time
//   ├── JobFailed                 wait(): the job ended dead or cancelled; `.job` has it
//   └── APIError                  the service answered 4xx/5xx: status, code, detail, body
//       ├── ValidationError       422 validation_error; `errors` lists {loc, msg}
//       ├── Unauthorized          401 unauthorized
//       ├── Forbidden             403 forbidden
//       ├── NotFound              404 not_found
//       ├── MethodNotAllowed      405 method_not_allowed
//       ├── Conflict              409
//       │   ├── LeaseLost             lease_lost (`alreadyCompleted`)
//       │   ├── IdempotencyConflict   idempotency_conflict
//       │   ├── QueueNotEmpty         queue_not_empty (`counts`, `schedules`, `topics`)
//       │   └── InvalidState          invalid_state
//       ├── PayloadTooLarge       413 payload_too_large
//       ├── RetryableError        come back later: `retryAfterMs` (null when not said)
//       │   ├── QueueFull             429 queue_full
//       │   ├── RateLimited           429: an enqueue rate holds fewer jobs than the request
//       │   │   ├── QueueRateLimited      queue_rate_limited: the queue's enqueue_rate
//       │   │   └── TokenRateLimited      token_rate_limited: the access token's enqueue_rate
//       │   ├── Overloaded            429 queue_overloaded: past the queue's soft thresholds
//       │   └── Unavailable           503 unavailable, too_many_long_polls
//       └── ServerError           any other 5xx
//
// The class is chosen by the problem's `code` first and the HTTP status second, so an
// answer from a proxy that is not problem+json still lands on a sensible class. This is
// the Python SDK's tree (jobq.client), with JavaScript's names for the fields.

export class JobqError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The request got no HTTP answer; `cause` is what fetch threw, `url` the base URL tried. */
export class TransportError extends JobqError {
  constructor(message, { url, cause } = {}) {
    super(message, { cause });
    this.url = url ?? null;
  }
}

export class WaitTimeout extends JobqError {
  constructor(jobId, timeoutMs) {
    super(`job ${jobId} did not finish within ${timeoutMs} ms`);
    this.jobId = jobId;
    this.timeoutMs = timeoutMs;
  }
}

export class JobFailed extends JobqError {
  constructor(job) {
    super(`job ${job.id} ended ${job.status}: ${job.last_error || "no error text"}`);
    this.job = job;
  }
}

export class APIError extends JobqError {
  constructor({ status, code = null, title = null, detail = null, body = {} }) {
    const label = code ? `${status} ${code}` : String(status);
    super(`${label}: ${detail || title || "no detail"}`);
    this.status = status;
    this.code = code;
    this.title = title;
    this.detail = detail;
    this.body = body;
  }
}

export class ValidationError extends APIError {
  /** The service's `[{loc, msg}]`, one entry per thing wrong. */
  get errors() {
    return Array.isArray(this.body.errors) ? this.body.errors : [];
  }
}

export class Unauthorized extends APIError {}
export class Forbidden extends APIError {}
export class NotFound extends APIError {}
export class MethodNotAllowed extends APIError {}
export class Conflict extends APIError {}

export class LeaseLost extends Conflict {
  /** True when this very lease completed the job (an ack sent again): the result is stored. */
  get alreadyCompleted() {
    return this.body.already_completed === true;
  }
}

export class IdempotencyConflict extends Conflict {}
export class InvalidState extends Conflict {}

export class QueueNotEmpty extends Conflict {
  get counts() {
    const counts = this.body.counts;
    return counts && typeof counts === "object" ? counts : {};
  }
  get schedules() {
    return Array.isArray(this.body.schedules) ? this.body.schedules : [];
  }
  get topics() {
    return Array.isArray(this.body.topics) ? this.body.topics : [];
  }
}

export class PayloadTooLarge extends APIError {}

/** The service asks to be called again later; nothing was done. */
export class RetryableError extends APIError {
  constructor(fields, retryAfterMs = null) {
    super(fields);
    this.retryAfterMs = retryAfterMs;
  }
}

export class QueueFull extends RetryableError {}

/** An enqueue rate (a token bucket) holds fewer jobs than the request brought; nothing was
 * enqueued. `retryAfterMs`: when it holds them all, to the millisecond (unless other
 * producers take from it meanwhile). `code` (or the subclass) says whose rate it is. */
export class RateLimited extends RetryableError {}
export class QueueRateLimited extends RateLimited {}
export class TokenRateLimited extends RateLimited {}

/** The queue is past its soft_depth or soft_lag_ms and this enqueue fell in the share
 * refused to slow producers down; nothing was enqueued. */
export class Overloaded extends RetryableError {}

export class Unavailable extends RetryableError {}
export class ServerError extends APIError {}

const BY_CODE = {
  validation_error: ValidationError,
  unauthorized: Unauthorized,
  forbidden: Forbidden,
  not_found: NotFound,
  method_not_allowed: MethodNotAllowed,
  lease_lost: LeaseLost,
  idempotency_conflict: IdempotencyConflict,
  invalid_state: InvalidState,
  queue_not_empty: QueueNotEmpty,
  payload_too_large: PayloadTooLarge,
  queue_full: QueueFull,
  queue_rate_limited: QueueRateLimited,
  token_rate_limited: TokenRateLimited,
  queue_overloaded: Overloaded,
  unavailable: Unavailable,
  // A long-poll past the service's cap of waiting claims: come back after Retry-After.
  too_many_long_polls: Unavailable,
};

const BY_STATUS = {
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  405: MethodNotAllowed,
  409: Conflict,
  413: PayloadTooLarge,
  422: ValidationError,
  // A 429 without our code (a proxy's rate limit, say) is still "come back later".
  429: RetryableError,
  503: Unavailable,
};

/** The class for an error answer: by `code` when known, else by status. */
export function errorClass(status, code) {
  if (code && Object.hasOwn(BY_CODE, code)) return BY_CODE[code];
  if (Object.hasOwn(BY_STATUS, status)) return BY_STATUS[status];
  return status >= 500 ? ServerError : APIError;
}

/** `Retry-After` in milliseconds from now: delta-seconds or an HTTP-date (RFC 9110). */
export function parseRetryAfter(value, now = Date.now()) {
  if (!value) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const when = Date.parse(text);
  return Number.isNaN(when) ? null : Math.max(0, when - now);
}

/** How long a retryable answer asks to wait, in ms: the body's `retry_after_ms` (the rate
 * limits' exact wait) when present, else the Retry-After header (whole seconds). */
export function retryAfterMs(body, headers, now = Date.now()) {
  const ms = body.retry_after_ms;
  if (Number.isInteger(ms) && ms >= 0) return ms;
  return parseRetryAfter(headers.get("retry-after"), now);
}

/** The typed error for an answer with an error status, its body already read as text. */
export function errorFromAnswer(status, statusText, headers, text) {
  let body = {};
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) body = parsed;
  } catch {
    // Not JSON (a proxy's HTML page): the status alone chooses the class.
  }
  const code = typeof body.code === "string" ? body.code : null;
  const Cls = errorClass(status, code);
  const fields = {
    status,
    code,
    title: body.title || statusText || null,
    detail: typeof body.detail === "string" ? body.detail : null,
    body,
  };
  if (Cls === RetryableError || Cls.prototype instanceof RetryableError) {
    return new Cls(fields, retryAfterMs(body, headers));
  }
  return new Cls(fields);
}
