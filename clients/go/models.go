package jobq

import (
	"encoding/json"
	"time"
)

// Job statuses (Job.Status).
const (
	StatusPending   = "pending"   // waiting: new, delayed, released, or back after a lease expired
	StatusRunning   = "running"   // leased to a worker until LockedUntil
	StatusFailed    = "failed"    // an attempt failed; the retry is scheduled at VisibleAt
	StatusCompleted = "completed" // acked, with its Result. Final
	StatusDead      = "dead"      // in the dead-letter queue
	StatusCancelled = "cancelled" // cancelled by an operator
)

// Job is a job as the service answers it. Times the service sends as null are the zero
// time.Time, strings it sends as null are "".
type Job struct {
	ID             string          `json:"id"`
	Queue          string          `json:"queue"`
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload"`
	Priority       int             `json:"priority"`
	Status         string          `json:"status"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	IdempotencyKey string          `json:"idempotency_key"`
	CreatedAt      time.Time       `json:"created_at"`
	VisibleAt      time.Time       `json:"visible_at"`
	LockedUntil    time.Time       `json:"locked_until"`
	WorkerID       string          `json:"worker_id"`
	CompletedAt    time.Time       `json:"completed_at"`
	LastError      string          `json:"last_error"`
	Errors         []JobError      `json:"errors"`
	Releases       []JobRelease    `json:"releases"`
	// Result is what the worker acked with: JSON, "null" when there is none.
	Result json.RawMessage `json:"result"`
}

// Finished reports whether the job reached a final status (completed, dead or cancelled).
func (j *Job) Finished() bool {
	switch j.Status {
	case StatusCompleted, StatusDead, StatusCancelled:
		return true
	}
	return false
}

// JobError is one failed attempt in a job's history. Kind is "failed" (a worker reported
// it) or "lease_expired".
type JobError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
	Kind    string    `json:"kind"`
}

// JobRelease is one claim a worker gave back (it did not count against MaxAttempts).
type JobRelease struct {
	Attempt  int       `json:"attempt"`
	At       time.Time `json:"at"`
	WorkerID string    `json:"worker_id"`
	DelayMs  int64     `json:"delay_ms"`
}

// NewJob is what Enqueue sends. Only Type is required; a zero field takes the service's
// (or the queue's) default.
type NewJob struct {
	Queue string // default "default"
	Type  string
	// Payload is marshalled with encoding/json and must give a JSON object (a struct, a
	// map, a json.RawMessage); nil sends {}.
	Payload  any
	Priority int // higher runs first
	// Delay or RunAt (not both) postpones the job. Delay is sent in whole milliseconds.
	Delay          time.Duration
	RunAt          time.Time
	MaxAttempts    int // 0: the queue's
	IdempotencyKey string
}

// Lease is one claimed job: until LockedUntil it is this worker's alone. LeaseID is the
// fencing token that Heartbeat, Ack, Fail and Release take.
type Lease struct {
	LeaseID     string    `json:"lease_id"`
	LockedUntil time.Time `json:"locked_until"`
	Job         *Job      `json:"job"`
}

// Claim is what Claim asks for.
type Claim struct {
	WorkerID string   // required: names this worker in the job and in GET /v1/workers
	Queues   []string // required, tried in this order
	Types    []string // only these job types (nil: any)
	Limit    int      // 1 to 1000; 0 means 1
	LeaseMs  int      // 0: the queue's lease_ms
	WaitMs   int      // long-poll up to this long (at most 30000); 0 answers at once
}

// Ack is one entry of AckMany.
type Ack struct {
	LeaseID string
	Result  any // marshalled with encoding/json
}

// AckResult is one answer of AckMany (and ReleaseResult of ReleaseMany): OK, or Code says
// why not ("lease_lost", "not_found").
type AckResult struct {
	LeaseID          string `json:"lease_id"`
	OK               bool   `json:"ok"`
	Code             string `json:"code"`
	AlreadyCompleted bool   `json:"already_completed"`
}

// ReleaseResult is one answer of ReleaseMany.
type ReleaseResult = AckResult

// Failure is what Fail reports.
type Failure struct {
	Error string
	// NoRetry sends the job dead at once (retry: false): for a failure that retrying
	// cannot fix.
	NoRetry bool
	// RetryIn replaces the queue's backoff for this attempt (0: the backoff applies).
	RetryIn time.Duration
}

// Release is one entry of ReleaseMany: the job is claimable again after Delay.
type Release struct {
	LeaseID string
	Delay   time.Duration
}

// JobFilter selects jobs for ListJobs; empty fields do not filter.
type JobFilter struct {
	Queue  string
	Status string
	Type   string
	Limit  int    // 1 to 1000; 0: the service's 100
	Cursor string // NextCursor of the previous page
}

// JobPage is one page of ListJobs, newest first. NextCursor is "" on the last page.
type JobPage struct {
	Jobs       []*Job `json:"jobs"`
	NextCursor string `json:"next_cursor"`
}

// DeadFilter selects dead jobs for ReplayDead and PurgeDead; empty fields do not filter.
type DeadFilter struct {
	Queue string
	Type  string
	Limit int
}

// Queue is a queue's entry: its settings, its jobs by status, and its lag.
type Queue struct {
	Name          string         `json:"name"`
	Settings      QueueSettings  `json:"settings"`
	Counts        QueueCounts    `json:"counts"`
	WaitingByType map[string]int `json:"waiting_by_type"`
	// OldestWaitingMs is how long the oldest claimable job has waited; nil when none is.
	OldestWaitingMs *int64 `json:"oldest_waiting_ms"`
	// RateLimitUse is the rate_limit's use now; nil when the queue has no rate_limit.
	RateLimitUse *RateLimitUse `json:"rate_limit_use"`
}

// RateLimit is a queue's pace: at most Jobs handed out by claims in any window of PerMs
// milliseconds, across every worker and replica; with Key ("type" or "payload.<field>"),
// an allowance per value of it.
type RateLimit struct {
	Jobs  int    `json:"jobs"`
	PerMs int64  `json:"per_ms"`
	Key   string `json:"key,omitempty"`
}

// EnqueueRate is a token bucket of enqueues: Burst jobs at once (0 sends none: the
// service takes Jobs), refilled at Jobs per PerMs milliseconds.
type EnqueueRate struct {
	Jobs  int   `json:"jobs"`
	PerMs int64 `json:"per_ms"`
	Burst int   `json:"burst,omitempty"`
}

// RateLimitUse is what a queue's rate_limit is using now: Jobs handed out in the last
// PerMs (the busiest key's), Keys with a job in that window, KeysAtLimit, and FreeInMs,
// when a full window has room again (nil: none is full).
type RateLimitUse struct {
	Jobs        int    `json:"jobs"`
	Keys        int    `json:"keys"`
	KeysAtLimit int    `json:"keys_at_limit"`
	FreeInMs    *int64 `json:"free_in_ms"`
}

// QueueSettings are a queue's settings. A nil pointer is "no limit" or "off".
type QueueSettings struct {
	MaxDepth         *int  `json:"max_depth"`
	Paused           bool  `json:"paused"`
	LeaseMs          int   `json:"lease_ms"`
	MaxAttempts      int   `json:"max_attempts"`
	BackoffBaseMs    int64 `json:"backoff_base_ms"`
	BackoffMaxMs     int64 `json:"backoff_max_ms"`
	MaxLeaseExpiries int   `json:"max_lease_expiries"`
	AgingMs          *int  `json:"aging_ms"`
	MaxRunning       *int  `json:"max_running"`
	RetentionMs      int64 `json:"retention_ms"`
	DeadRetentionMs  int64 `json:"dead_retention_ms"`
	// The rate limits (see the guide): nil is none, or off.
	RateLimit   *RateLimit   `json:"rate_limit"`
	EnqueueRate *EnqueueRate `json:"enqueue_rate"`
	SoftDepth   *int         `json:"soft_depth"`
	SoftLagMs   *int64       `json:"soft_lag_ms"`
}

// QueueCounts are a queue's jobs by status.
type QueueCounts struct {
	Pending   int `json:"pending"`
	Running   int `json:"running"`
	Failed    int `json:"failed"`
	Completed int `json:"completed"`
	Dead      int `json:"dead"`
	Cancelled int `json:"cancelled"`
}

// QueueFilter selects queues for ListQueues.
type QueueFilter struct {
	Prefix string // only names starting with it
	Limit  int    // 1 to 1000; 0: the service's 100
	Cursor string // NextCursor of the previous page
}

// QueuePage is one page of ListQueues, by name. NextCursor is "" on the last page.
type QueuePage struct {
	Queues     []*Queue `json:"queues"`
	NextCursor string   `json:"next_cursor"`
}

// QueueUpdate changes the settings given (a nil pointer leaves a setting as it is). The
// No* fields set a limit to null: no limit, or off.
type QueueUpdate struct {
	MaxDepth         *int
	NoMaxDepth       bool
	Paused           *bool
	LeaseMs          *int
	MaxAttempts      *int
	BackoffBaseMs    *int64
	BackoffMaxMs     *int64
	MaxLeaseExpiries *int
	AgingMs          *int
	NoAging          bool
	MaxRunning       *int
	NoMaxRunning     bool
	RetentionMs      *int64
	DeadRetentionMs  *int64
	RateLimit        *RateLimit // the pace of claims
	NoRateLimit      bool
	EnqueueRate      *EnqueueRate // producers' token bucket
	NoEnqueueRate    bool
	SoftDepth        *int // adaptive backpressure past this many waiting jobs
	NoSoftDepth      bool
	SoftLagMs        *int64 // ... or past this wait of the oldest one
	NoSoftLag        bool
}

// Int returns a pointer to n, for QueueUpdate's fields.
func Int(n int) *int { return &n }

// Int64 returns a pointer to n, for QueueUpdate's fields.
func Int64(n int64) *int64 { return &n }

// Bool returns a pointer to b, for QueueUpdate's fields.
func Bool(b bool) *bool { return &b }

// WorkerBeat is what a worker process reports of itself (POST /v1/workers/{id}/beat);
// zero fields are left out, and keep what an earlier beat said.
type WorkerBeat struct {
	Host        string
	PID         int
	Concurrency int
	Queues      []string
	InFlight    *int // jobs held now (a pointer: 0 is worth saying)
	StartedAt   time.Time
	State       string // "running", "stopping" or "stopped"
}
