// Types of @jobq/client. The API's objects (Job, Lease, Queue ...) are the schemas generated
// from openapi/openapi.json into openapi.d.ts (`npm run gen`); this file names them and types
// the client's own surface. test/types.ts compiles against it (`npm run typecheck`).

import type { components } from "./openapi.js";

type Schemas = components["schemas"];

/** A job as the service answers it (snake_case fields, as in the HTTP API). */
export type Job = Schemas["JobPublic"];
export type JobStatus = Schemas["JobStatus"];
export type JobError = Schemas["JobError"];
export type JobPage = Schemas["JobPage"];
export type Lease = Schemas["LeasePublic"];
export type Queue = Schemas["QueuePublic"];
export type QueueSettings = Schemas["QueueSettings"];
export type QueuePage = Schemas["QueueList"];
/** A queue's rate_limit as answered: `{ jobs, per_ms, key }`. */
export type RateLimit = Schemas["RateLimitPublic"];
/** A queue's (or a token's) enqueue_rate as answered: `{ jobs, per_ms, burst }`. */
export type EnqueueRate = Schemas["EnqueueRatePublic"];
/** `rate_limit_use` of GET /v1/queues: `{ jobs, keys, keys_at_limit, free_in_ms }`. */
export type RateLimitUse = Schemas["RateLimitUse"];
export type AckResult = Schemas["AckResult"];
export type Problem = Schemas["Problem"];
export type WorkerBeat = Schemas["WorkerBeatBody"];
export type WorkerSeen = Schemas["WorkerBeatPublic"];
export type { components, paths, operations } from "./openapi.js";

export declare const VERSION: string;

export interface ClientOptions {
  /** The service's root, e.g. http://127.0.0.1:8000 (not .../v1). */
  url: string;
  /** Sent as `Authorization: Bearer`; default JOBQ_TOKEN from the environment; "" sends none. */
  token?: string;
  /** Per request, default 30000 (a long-poll claim gets its waitMs on top). */
  timeoutMs?: number;
  /** Wait out 429/503 answers (sleeping their retry_after_ms, else Retry-After) for at most
   * this long per call; default 0: they throw at once. */
  retryOverloadMs?: number;
  headers?: Record<string, string>;
  /** A fetch of your own; default globalThis.fetch. */
  fetch?: typeof fetch;
}

export interface EnqueueOptions {
  queue?: string;
  priority?: number;
  delayMs?: number;
  /** A Date or an RFC 3339 string. Not with delayMs. */
  runAt?: Date | string;
  maxAttempts?: number;
  idempotencyKey?: string;
}

export interface NewJob extends EnqueueOptions {
  type: string;
  payload?: Record<string, unknown>;
}

export interface JobFilter {
  queue?: string;
  status?: JobStatus;
  type?: string;
  /** Substring of the payload's JSON text or last_error, ignoring case (a scan). */
  search?: string;
  limit?: number;
  cursor?: string | null;
}

export interface DeadFilter {
  queue?: string;
  type?: string;
  limit?: number;
}

/** Queue settings to change; null means no limit / off where the API allows it. */
export interface QueueSettingsPatch {
  maxDepth?: number | null;
  paused?: boolean;
  leaseMs?: number;
  maxAttempts?: number;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  maxLeaseExpiries?: number;
  agingMs?: number | null;
  maxRunning?: number | null;
  retentionMs?: number;
  deadRetentionMs?: number;
  /** The pace of claims: at most `jobs` handed out in any `perMs` ms (per `key` value:
   * "type" or "payload.<field>"); null: none. */
  rateLimit?: { jobs: number; perMs: number; key?: string | null } | null;
  /** Producers' token bucket: `burst` (default `jobs`) at once, refilled at `jobs` per
   * `perMs`; null: none. */
  enqueueRate?: { jobs: number; perMs: number; burst?: number | null } | null;
  /** Adaptive backpressure's thresholds (waiting jobs; the oldest one's wait); null: off. */
  softDepth?: number | null;
  softLagMs?: number | null;
}

export interface ClaimOptions {
  queues: string[] | string;
  workerId: string;
  types?: string[];
  limit?: number;
  /** Without it the queue's lease_ms applies. */
  leaseMs?: number;
  /** Long-poll up to this long (0 to 30000). */
  waitMs?: number;
  signal?: AbortSignal;
}

export interface ReleaseResult {
  lease_id: string;
  ok: boolean;
  code?: string;
}

export declare class Client {
  constructor(options: ClientOptions);
  readonly url: string;
  /** Any call: the JSON answer (null for 204), or the typed error. */
  request<T = unknown>(
    method: string,
    path: string,
    options?: { body?: unknown; timeoutMs?: number; signal?: AbortSignal },
  ): Promise<T>;

  enqueue(type: string, payload?: Record<string, unknown>, options?: EnqueueOptions): Promise<Job>;
  enqueueMany(jobs: NewJob[]): Promise<Job[]>;
  publish(topic: string, type: string, payload?: Record<string, unknown>, options?: Omit<EnqueueOptions, "queue">): Promise<Job[]>;
  get(jobId: string): Promise<Job>;
  /** Resolves to the completed job; JobFailed if it ends dead or cancelled; WaitTimeout. */
  wait(jobId: string, options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<Job>;
  listJobs(filter?: JobFilter): Promise<JobPage>;
  iterJobs(filter?: Omit<JobFilter, "cursor">): AsyncGenerator<Job, void, undefined>;
  cancel(jobId: string): Promise<Job>;
  retry(jobId: string): Promise<Job>;
  deleteJob(jobId: string): Promise<void>;

  listDead(filter?: DeadFilter & { cursor?: string | null }): Promise<JobPage>;
  replayDead(filter?: DeadFilter): Promise<number>;
  purgeDead(filter?: DeadFilter): Promise<number>;
  purgeDeadJob(jobId: string): Promise<void>;

  listQueues(options?: { prefix?: string; limit?: number; cursor?: string | null }): Promise<QueuePage>;
  iterQueues(options?: { prefix?: string; pageSize?: number }): AsyncGenerator<Queue, void, undefined>;
  getQueue(name: string): Promise<Queue>;
  updateQueue(name: string, settings: QueueSettingsPatch): Promise<Queue>;
  pauseQueue(name: string): Promise<Queue>;
  resumeQueue(name: string): Promise<Queue>;
  deleteQueue(name: string, options?: { purge?: boolean }): Promise<void>;

  claim(options: ClaimOptions): Promise<Lease[]>;
  heartbeat(leaseId: string, options?: { extendMs?: number }): Promise<{ locked_until: string }>;
  ack(leaseId: string, result?: unknown): Promise<Job>;
  ackMany(acks: { leaseId: string; result?: unknown }[]): Promise<AckResult[]>;
  fail(leaseId: string, error: string, options?: { retry?: boolean; retryInMs?: number }): Promise<Job>;
  release(leaseId: string, options?: { delayMs?: number }): Promise<Job>;
  releaseMany(releases: (string | { leaseId: string; delayMs?: number })[]): Promise<ReleaseResult[]>;
  workerBeat(workerId: string, fields?: WorkerBeat, options?: { signal?: AbortSignal }): Promise<WorkerSeen>;
}

export interface JobContext {
  /** Aborts when the lease is lost or the stop's grace period ran out. */
  signal: AbortSignal;
  leaseId: string;
}

export type Handler = (job: Job, context: JobContext) => unknown | Promise<unknown>;

export interface Logger {
  debug?(message: string): void;
  info?(message: string): void;
  warn?(message: string): void;
  error?(message: string): void;
}

export interface WorkerOptions {
  url: string;
  token?: string;
  queues: string[] | string;
  handlers: Record<string, Handler> | Map<string, Handler>;
  /** Jobs run at once (default 10). */
  concurrency?: number;
  /** The lease to ask for; without it the queue's lease_ms, read off locked_until. */
  leaseMs?: number;
  /** How long running jobs get to finish once the stop begins (default 25000). */
  gracePeriodMs?: number;
  /** The claims' long-poll (default 20000, at most 30000). */
  waitMs?: number;
  workerId?: string;
  /** Stop on SIGTERM/SIGINT while run() runs (default true). */
  handleSignals?: boolean;
  /** Default: INFO and up on the console, prefixed "jobq worker:". */
  logger?: Logger | null;
  fetch?: typeof fetch;
}

export declare class Worker {
  constructor(options: WorkerOptions);
  readonly client: Client;
  readonly workerId: string;
  readonly url: string;
  /** Resolves once the worker has stopped; rejects with Unauthorized/Forbidden when the
   * service refused its token (after stopping the same graceful way). */
  run(): Promise<void>;
  /** Begins the graceful stop; resolves once stopped. */
  stop(): Promise<void>;
}

/** Thrown by a handler: fail the attempt and retry, after inMs or the queue's backoff. */
export declare class Retry extends Error {
  constructor(reason?: string, options?: { inMs?: number });
  readonly reason: string;
  readonly inMs: number | undefined;
}

/** Thrown by a handler: the job goes dead at once, with reason as its last_error. */
export declare class Discard extends Error {
  constructor(reason?: string);
  readonly reason: string;
}

export declare class JobqError extends Error {}
export declare class TransportError extends JobqError {
  readonly url: string | null;
}
export declare class WaitTimeout extends JobqError {
  readonly jobId: string;
  readonly timeoutMs: number;
}
export declare class JobFailed extends JobqError {
  readonly job: Job;
}
export declare class APIError extends JobqError {
  readonly status: number;
  /** The problem's code (validation_error, not_found, lease_lost, queue_full ...). */
  readonly code: string | null;
  readonly title: string | null;
  readonly detail: string | null;
  /** The whole problem+json body. */
  readonly body: Record<string, unknown>;
}
export declare class ValidationError extends APIError {
  readonly errors: { loc: (string | number)[]; msg: string }[];
}
export declare class Unauthorized extends APIError {}
export declare class Forbidden extends APIError {}
export declare class NotFound extends APIError {}
export declare class MethodNotAllowed extends APIError {}
export declare class Conflict extends APIError {}
export declare class LeaseLost extends Conflict {
  readonly alreadyCompleted: boolean;
}
export declare class IdempotencyConflict extends Conflict {}
export declare class InvalidState extends Conflict {}
export declare class QueueNotEmpty extends Conflict {
  readonly counts: Record<string, number>;
  readonly schedules: string[];
  readonly topics: string[];
}
export declare class PayloadTooLarge extends APIError {}
export declare class RetryableError extends APIError {
  /** How long to wait, in ms: the body's retry_after_ms when sent (to the millisecond),
   * else Retry-After; null when the answer had neither. */
  readonly retryAfterMs: number | null;
}
export declare class QueueFull extends RetryableError {}
/** queue_rate_limited or token_rate_limited: an enqueue rate holds fewer jobs than the request. */
export declare class RateLimited extends RetryableError {}
export declare class QueueRateLimited extends RateLimited {}
export declare class TokenRateLimited extends RateLimited {}
/** queue_overloaded: past the queue's soft_depth or soft_lag_ms. */
export declare class Overloaded extends RetryableError {}
export declare class Unavailable extends RetryableError {}
export declare class ServerError extends APIError {}
