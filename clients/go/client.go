package jobq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	// DefaultTimeout bounds each call (a claim gets its WaitMs on top).
	DefaultTimeout = 30 * time.Second
	// TokenEnv is where NewClient and NewWorker find the token when Config gives none.
	TokenEnv = "JOBQ_TOKEN"
	// A long-poll holds the request open for wait_ms; its timeout must outlast that.
	claimTimeoutMargin = 10 * time.Second
	// Retry-After is optional on a 503 from a proxy; a second is a polite first guess.
	defaultRetryAfter = time.Second
	// Wait polls quickly at first (most jobs are short), then calmer.
	waitPollFirst = 50 * time.Millisecond
	waitPollMax   = time.Second
	userAgent     = "jobq-go/0"
)

// Config configures a Client.
type Config struct {
	// URL is the service's root, http:// or https:// (not ending in /v1).
	URL string
	// Token is sent as "Authorization: Bearer"; "" takes JOBQ_TOKEN from the environment
	// (in local mode, with no tokens, none is needed).
	Token string
	// Timeout bounds each call; 0 means DefaultTimeout. A ctx deadline applies as well.
	Timeout time.Duration
	// RetryOverload lets a call wait out 429 answers (queue_full, queue_rate_limited,
	// token_rate_limited, queue_overloaded) and 503 unavailable, sleeping the wait each
	// asks for (retry_after_ms to the millisecond, else Retry-After), up to this much time
	// in all; 0 returns them at once as a *Problem (RetryAfter says how long to wait).
	RetryOverload time.Duration
	// HTTPClient replaces the default (one with a keep-alive pool sized for a worker).
	HTTPClient *http.Client
}

// Client calls one jobq service. It is safe for concurrent use.
type Client struct {
	base          string
	token         string
	timeout       time.Duration
	retryOverload time.Duration
	http          *http.Client
}

// NewClient checks the configuration and returns a client; no call is made yet.
func NewClient(cfg Config) (*Client, error) {
	base, err := checkURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	token := cfg.Token
	if token == "" {
		token = os.Getenv(TokenEnv)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	hc := cfg.HTTPClient
	if hc == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		// The default keeps 2 idle connections per host: a worker's concurrent acks,
		// heartbeats and claims would open and close connections all day.
		transport.MaxIdleConnsPerHost = 64
		hc = &http.Client{Transport: transport}
	}
	return &Client{base: base, token: token, timeout: timeout, retryOverload: cfg.RetryOverload, http: hc}, nil
}

func checkURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("jobq: URL %q is not an http:// or https:// URL (for example http://127.0.0.1:8000)", raw)
	}
	base := strings.TrimRight(raw, "/")
	if strings.HasSuffix(base, "/v1") {
		// Every call adds /v1/... itself: this URL would answer 404 to all of them.
		return "", fmt.Errorf("jobq: URL %q names the API's /v1: give the service's root, %s", raw, strings.TrimSuffix(base, "/v1"))
	}
	return base, nil
}

// path builds /v1/... with each part percent-encoded: ids are opaque and may hold any character.
func path(parts ...string) string {
	escaped := make([]string, len(parts))
	for i, p := range parts {
		escaped[i] = url.PathEscape(p)
	}
	return "/v1/" + strings.Join(escaped, "/")
}

// call sends one request and decodes a success answer into out (when not nil). An error
// answer is a *Problem; 429 and 503 are waited out within RetryOverload.
func (c *Client) call(ctx context.Context, method, p string, query url.Values, body any, out any) error {
	return c.callTimeout(ctx, c.timeout, method, p, query, body, out)
}

func (c *Client) callTimeout(ctx context.Context, timeout time.Duration, method, p string, query url.Values, body any, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("jobq: %s %s: the body is not JSON: %w", method, p, err)
		}
	}
	target := c.base + p
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	deadline := time.Now().Add(c.retryOverload)
	for {
		answer, err := c.send(ctx, timeout, method, target, payload)
		if err != nil {
			return fmt.Errorf("jobq: %s %s: %w", method, p, err)
		}
		if answer.problem == nil {
			if out == nil || len(answer.body) == 0 {
				return nil
			}
			if err := json.Unmarshal(answer.body, out); err != nil {
				return fmt.Errorf("jobq: %s %s: the answer is not the JSON expected: %w", method, p, err)
			}
			return nil
		}
		pause, ok := overloadPause(answer.problem, time.Until(deadline))
		if !ok {
			return answer.problem
		}
		if err := sleep(ctx, pause); err != nil {
			return answer.problem
		}
	}
}

type answer struct {
	body    []byte
	problem *Problem
}

func (c *Client) send(ctx context.Context, timeout time.Duration, method, target string, payload []byte) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var reader io.Reader
	if payload != nil {
		reader = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, reader)
	if err != nil {
		return answer{}, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	if resp.StatusCode >= 400 {
		return answer{problem: problemFrom(resp, body)}, nil
	}
	return answer{body: body}, nil
}

// overloadPause says how long to wait before sending a 429 or 503 call again, and whether
// that fits the time left; any other answer is not retried (it would answer the same).
func overloadPause(p *Problem, left time.Duration) (time.Duration, bool) {
	if !p.Temporary() {
		return 0, false
	}
	pause := p.RetryAfter
	if pause <= 0 {
		pause = defaultRetryAfter
	}
	// Jitter, so producers told "1 s" at the same moment do not come back in lock-step.
	pause += time.Duration(rand.Float64() * 0.1 * float64(pause))
	return pause, pause <= left
}

// sleep waits d, or returns ctx's error once it is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Producers

type jobBody struct {
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Queue          string          `json:"queue,omitempty"`
	Priority       int             `json:"priority,omitempty"`
	DelayMs        int64           `json:"delay_ms,omitempty"`
	RunAt          string          `json:"run_at,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

func newJobBody(j NewJob) (jobBody, error) {
	if j.Delay != 0 && !j.RunAt.IsZero() {
		return jobBody{}, errors.New("jobq: give Delay or RunAt, not both")
	}
	b := jobBody{
		Type: j.Type, Queue: j.Queue, Priority: j.Priority,
		MaxAttempts: j.MaxAttempts, IdempotencyKey: j.IdempotencyKey,
	}
	if j.Payload != nil {
		raw, err := json.Marshal(j.Payload)
		if err != nil {
			return jobBody{}, fmt.Errorf("jobq: the payload of a %s job is not JSON: %w", j.Type, err)
		}
		b.Payload = raw
	}
	if j.Delay != 0 {
		b.DelayMs = j.Delay.Round(time.Millisecond).Milliseconds()
	}
	if !j.RunAt.IsZero() {
		b.RunAt = j.RunAt.UTC().Format(time.RFC3339Nano)
	}
	return b, nil
}

// Enqueue adds one job. With an IdempotencyKey, a repeat returns the existing job.
func (c *Client) Enqueue(ctx context.Context, job NewJob) (*Job, error) {
	body, err := newJobBody(job)
	if err != nil {
		return nil, err
	}
	var out Job
	if err := c.call(ctx, http.MethodPost, path("jobs"), nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EnqueueMany adds up to 1000 jobs in one transaction: all or none. The jobs come back in
// the order given.
func (c *Client) EnqueueMany(ctx context.Context, jobs []NewJob) ([]*Job, error) {
	bodies := make([]jobBody, len(jobs))
	for i, j := range jobs {
		b, err := newJobBody(j)
		if err != nil {
			return nil, err
		}
		bodies[i] = b
	}
	var out JobPage
	if err := c.call(ctx, http.MethodPost, path("jobs", "batch"), nil, map[string]any{"jobs": bodies}, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// Get reads one job.
func (c *Client) Get(ctx context.Context, id string) (*Job, error) {
	return c.jobCall(ctx, http.MethodGet, path("jobs", id), nil)
}

// Wait polls the job until it finishes, and returns it once completed (its Result is the
// handler's). A job that ends dead or cancelled returns a *JobFailedError; give ctx a
// deadline (context.WithTimeout) to bound the wait, which then ends with ctx's error.
func (c *Client) Wait(ctx context.Context, id string) (*Job, error) {
	pause := waitPollFirst
	for {
		job, err := c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if job.Status == StatusCompleted {
			return job, nil
		}
		if job.Finished() {
			return job, &JobFailedError{Job: job}
		}
		if err := sleep(ctx, pause); err != nil {
			return nil, fmt.Errorf("jobq: job %s not finished (%s): %w", id, job.Status, err)
		}
		if pause = pause * 3 / 2; pause > waitPollMax {
			pause = waitPollMax
		}
	}
}

func (c *Client) jobCall(ctx context.Context, method, p string, body any) (*Job, error) {
	var out Job
	if err := c.call(ctx, method, p, nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Operators

// ListJobs reads one page of jobs, newest first; pass NextCursor back for the next page.
func (c *Client) ListJobs(ctx context.Context, f JobFilter) (*JobPage, error) {
	q := url.Values{}
	setQuery(q, "queue", f.Queue)
	setQuery(q, "status", f.Status)
	setQuery(q, "type", f.Type)
	setQuery(q, "cursor", f.Cursor)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out JobPage
	if err := c.call(ctx, http.MethodGet, path("jobs"), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func setQuery(q url.Values, name, value string) {
	if value != "" {
		q.Set(name, value)
	}
}

// Cancel cancels a waiting or running job (a running job's lease dies).
func (c *Client) Cancel(ctx context.Context, id string) (*Job, error) {
	return c.jobCall(ctx, http.MethodPost, path("jobs", id, "cancel"), nil)
}

// RetryJob puts a dead, cancelled or failed job back to pending, attempt 0, errors kept.
func (c *Client) RetryJob(ctx context.Context, id string) (*Job, error) {
	return c.jobCall(ctx, http.MethodPost, path("jobs", id, "retry"), nil)
}

// DeleteJob deletes a job that is not running, for good.
func (c *Client) DeleteJob(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, path("jobs", id), nil, nil, nil)
}

// ReplayDead sends matching dead jobs back to pending and says how many.
func (c *Client) ReplayDead(ctx context.Context, f DeadFilter) (int, error) {
	body := map[string]any{}
	if f.Queue != "" {
		body["queue"] = f.Queue
	}
	if f.Type != "" {
		body["type"] = f.Type
	}
	if f.Limit > 0 {
		body["limit"] = f.Limit
	}
	var out struct {
		Replayed int `json:"replayed"`
	}
	err := c.call(ctx, http.MethodPost, path("dead", "replay"), nil, body, &out)
	return out.Replayed, err
}

// PurgeDead deletes matching dead jobs and says how many.
func (c *Client) PurgeDead(ctx context.Context, f DeadFilter) (int, error) {
	q := url.Values{}
	setQuery(q, "queue", f.Queue)
	setQuery(q, "type", f.Type)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		Purged int `json:"purged"`
	}
	err := c.call(ctx, http.MethodDelete, path("dead"), q, nil, &out)
	return out.Purged, err
}

// ListQueues reads one page of queues by name; pass NextCursor back for the next page.
func (c *Client) ListQueues(ctx context.Context, f QueueFilter) (*QueuePage, error) {
	q := url.Values{}
	setQuery(q, "prefix", f.Prefix)
	setQuery(q, "cursor", f.Cursor)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out QueuePage
	if err := c.call(ctx, http.MethodGet, path("queues"), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Queue reads one queue's entry.
func (c *Client) Queue(ctx context.Context, name string) (*Queue, error) {
	var out Queue
	if err := c.call(ctx, http.MethodGet, path("queues", name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateQueue changes the settings given (creating the queue if needed).
func (c *Client) UpdateQueue(ctx context.Context, name string, u QueueUpdate) (*Queue, error) {
	body := map[string]any{}
	put := func(key string, value any, isSet bool) {
		if isSet {
			body[key] = value
		}
	}
	put("max_depth", u.MaxDepth, u.MaxDepth != nil)
	put("max_depth", nil, u.NoMaxDepth)
	put("paused", u.Paused, u.Paused != nil)
	put("lease_ms", u.LeaseMs, u.LeaseMs != nil)
	put("max_attempts", u.MaxAttempts, u.MaxAttempts != nil)
	put("backoff_base_ms", u.BackoffBaseMs, u.BackoffBaseMs != nil)
	put("backoff_max_ms", u.BackoffMaxMs, u.BackoffMaxMs != nil)
	put("max_lease_expiries", u.MaxLeaseExpiries, u.MaxLeaseExpiries != nil)
	put("aging_ms", u.AgingMs, u.AgingMs != nil)
	put("aging_ms", nil, u.NoAging)
	put("max_running", u.MaxRunning, u.MaxRunning != nil)
	put("max_running", nil, u.NoMaxRunning)
	put("retention_ms", u.RetentionMs, u.RetentionMs != nil)
	put("dead_retention_ms", u.DeadRetentionMs, u.DeadRetentionMs != nil)
	put("rate_limit", u.RateLimit, u.RateLimit != nil)
	put("rate_limit", nil, u.NoRateLimit)
	put("enqueue_rate", u.EnqueueRate, u.EnqueueRate != nil)
	put("enqueue_rate", nil, u.NoEnqueueRate)
	put("soft_depth", u.SoftDepth, u.SoftDepth != nil)
	put("soft_depth", nil, u.NoSoftDepth)
	put("soft_lag_ms", u.SoftLagMs, u.SoftLagMs != nil)
	put("soft_lag_ms", nil, u.NoSoftLag)
	var out Queue
	if err := c.call(ctx, http.MethodPatch, path("queues", name), nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteQueue deletes a queue. It is refused (ErrQueueNotEmpty; the Problem's Body has its
// counts, schedules and topics) while it holds waiting, running, failed or dead jobs,
// unless purge deletes those too.
func (c *Client) DeleteQueue(ctx context.Context, name string, purge bool) error {
	var q url.Values
	if purge {
		q = url.Values{"purge": {"true"}}
	}
	return c.call(ctx, http.MethodDelete, path("queues", name), q, nil, nil)
}

// Workers: the lease calls, for a loop of your own (Worker does all of this for you).

// Claim leases up to c.Limit jobs; with WaitMs it long-polls until one is claimable and
// answers an empty list when the time is up.
func (c *Client) Claim(ctx context.Context, claim Claim) ([]Lease, error) {
	body := map[string]any{"worker_id": claim.WorkerID, "queues": claim.Queues}
	if claim.Types != nil {
		body["types"] = claim.Types
	}
	if claim.Limit > 0 {
		body["limit"] = claim.Limit
	}
	// Without a lease length the queue's applies: lease_ms is left out, never sent as 0.
	if claim.LeaseMs > 0 {
		body["lease_ms"] = claim.LeaseMs
	}
	if claim.WaitMs > 0 {
		body["wait_ms"] = claim.WaitMs
	}
	var out struct {
		Leases []Lease `json:"leases"`
	}
	timeout := c.timeout + time.Duration(claim.WaitMs)*time.Millisecond + claimTimeoutMargin
	if err := c.callTimeout(ctx, timeout, http.MethodPost, path("leases"), nil, body, &out); err != nil {
		return nil, err
	}
	return out.Leases, nil
}

// Heartbeat extends a lease by extendMs (0: the lease's own length) and returns the new
// locked_until; ErrLeaseLost once the lease is no longer held (stop reporting that job).
func (c *Client) Heartbeat(ctx context.Context, leaseID string, extendMs int) (time.Time, error) {
	body := map[string]any{}
	if extendMs > 0 {
		body["extend_ms"] = extendMs
	}
	var out struct {
		LockedUntil time.Time `json:"locked_until"`
	}
	err := c.call(ctx, http.MethodPost, path("leases", leaseID, "heartbeat"), nil, body, &out)
	return out.LockedUntil, err
}

// Ack completes the job with result (marshalled with encoding/json; nil is null).
func (c *Client) Ack(ctx context.Context, leaseID string, result any) (*Job, error) {
	return c.jobCall(ctx, http.MethodPost, path("leases", leaseID, "ack"), map[string]any{"result": result})
}

// AckMany acks up to 1000 leases in one call; one lost lease does not fail the others, so
// check each AckResult.
func (c *Client) AckMany(ctx context.Context, acks []Ack) ([]AckResult, error) {
	items := make([]map[string]any, len(acks))
	for i, a := range acks {
		items[i] = map[string]any{"lease_id": a.LeaseID, "result": a.Result}
	}
	var out struct {
		Results []AckResult `json:"results"`
	}
	err := c.call(ctx, http.MethodPost, path("leases", "ack"), nil, map[string]any{"acks": items}, &out)
	return out.Results, err
}

// Fail reports a failed attempt: the job is retried after its backoff (or f.RetryIn), or
// goes dead with f.NoRetry or when its attempts are used up.
func (c *Client) Fail(ctx context.Context, leaseID string, f Failure) (*Job, error) {
	body := map[string]any{"error": f.Error}
	if f.NoRetry {
		body["retry"] = false
	}
	if f.RetryIn > 0 {
		body["retry_in_ms"] = f.RetryIn.Round(time.Millisecond).Milliseconds()
	}
	return c.jobCall(ctx, http.MethodPost, path("leases", leaseID, "fail"), body)
}

// Release hands the job back unfinished, without spending its attempt: it is pending
// again, claimable after delay.
func (c *Client) Release(ctx context.Context, leaseID string, delay time.Duration) (*Job, error) {
	body := map[string]any{}
	if delay > 0 {
		body["delay_ms"] = delay.Round(time.Millisecond).Milliseconds()
	}
	return c.jobCall(ctx, http.MethodPost, path("leases", leaseID, "release"), body)
}

// ReleaseMany releases up to 1000 leases in one call (POST /v1/leases/release); one lost
// lease does not fail the others, so check each ReleaseResult.
func (c *Client) ReleaseMany(ctx context.Context, releases []Release) ([]ReleaseResult, error) {
	items := make([]map[string]any, len(releases))
	for i, r := range releases {
		items[i] = map[string]any{"lease_id": r.LeaseID}
		if r.Delay > 0 {
			items[i]["delay_ms"] = r.Delay.Round(time.Millisecond).Milliseconds()
		}
	}
	var out struct {
		Results []ReleaseResult `json:"results"`
	}
	err := c.call(ctx, http.MethodPost, path("leases", "release"), nil, map[string]any{"releases": items}, &out)
	return out.Results, err
}

// Beat reports a worker process as alive, so GET /v1/workers lists it while it holds no
// job. Worker does this by itself every 10 seconds.
func (c *Client) Beat(ctx context.Context, workerID string, b WorkerBeat) error {
	body := map[string]any{}
	if b.Host != "" {
		body["host"] = b.Host
	}
	if b.PID > 0 {
		body["pid"] = b.PID
	}
	if b.Concurrency > 0 {
		body["concurrency"] = b.Concurrency
	}
	if b.Queues != nil {
		body["queues"] = b.Queues
	}
	if b.InFlight != nil {
		body["in_flight"] = *b.InFlight
	}
	if !b.StartedAt.IsZero() {
		body["started_at"] = b.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	if b.State != "" {
		body["state"] = b.State
	}
	return c.call(ctx, http.MethodPost, path("workers", workerID, "beat"), nil, body, nil)
}
