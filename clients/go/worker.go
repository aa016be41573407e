package jobq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	mathrand "math/rand"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

const (
	// DefaultConcurrency is how many jobs a Worker runs at once unless told otherwise.
	DefaultConcurrency = 10
	// DefaultWaitMs is how long a Worker's claim long-polls.
	DefaultWaitMs = 10000
	// MaxWaitMs is the service's longest long-poll.
	MaxWaitMs = 30000
	// DefaultGracePeriod is how long a stopping Worker lets running jobs finish: 25 s, inside
	// the 30 s an orchestrator (Kubernetes' default) allows before SIGKILL, with time left to
	// release what did not finish.
	DefaultGracePeriod = 25 * time.Second

	maxBatch = 1000
	// Without LeaseMs the lease length is read off the first locked_until; this floor keeps
	// a skewed clock from turning that into a heartbeat storm.
	minLeaseEstimate = time.Second
	fallbackLease    = 30 * time.Second
	// After the grace period, the acks, fails and releases still owed get this long.
	finalReports = 10 * time.Second
	// Claim and report retries when the service is unreachable: exponential, full jitter.
	backoffFirst = 500 * time.Millisecond
	backoffMax   = 30 * time.Second
	// A claim that comes back empty sooner than this (a service without long-polls) is
	// followed by a pause, so an idle worker never spins.
	minEmptyPoll = 250 * time.Millisecond
	// The process's own beat: its rhythm, and how long one may take before it is dropped.
	workerBeatEvery   = 10 * time.Second
	workerBeatTimeout = 5 * time.Second
)

// WorkerConfig configures a Worker. URL and Queues are required.
type WorkerConfig struct {
	URL   string
	Token string // "" takes JOBQ_TOKEN from the environment
	// Queues to claim from, tried in this order.
	Queues []string
	// Concurrency is how many jobs run at once; 0 means DefaultConcurrency.
	Concurrency int
	// LeaseMs is the lease length claimed and each heartbeat's extension; 0 takes the
	// queue's lease_ms (the heartbeat rhythm is then read off locked_until).
	LeaseMs int
	// GracePeriod is how long running jobs get to finish once Run's ctx is cancelled,
	// before their contexts are cancelled and they are released; 0 means
	// DefaultGracePeriod, a negative value none (release at once).
	GracePeriod time.Duration
	// WaitMs is each claim's long-poll; 0 means DefaultWaitMs (at most MaxWaitMs).
	WaitMs int
	// WorkerID names this worker in its jobs and in GET /v1/workers; "" makes one from the
	// host name, the process id and random hex.
	WorkerID string
	// Logger gets the start line, one line per job outcome and warnings; nil means the
	// log package's standard logger (log.New(io.Discard, "", 0) silences it).
	Logger *log.Logger
	// HTTPClient replaces the default transport.
	HTTPClient *http.Client
}

// Worker claims jobs from its queues and runs the handler registered for each job's type:
// it long-polls for work, heartbeats every lease at a third of its length, acks results
// in batches, fails errors (Retry and Discard steer how), waits out 429 and 503 answers
// for their Retry-After, beats its own presence to the service, and stops gracefully.
type Worker struct {
	cfg      WorkerConfig
	client   *Client
	log      *log.Logger
	mu       sync.Mutex
	handlers map[string]HandlerFunc
	running  bool
}

// NewWorker checks the configuration and returns a worker; register handlers with Handle,
// then call Run.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	client, err := NewClient(Config{URL: cfg.URL, Token: cfg.Token, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, err
	}
	if len(cfg.Queues) == 0 {
		return nil, errors.New("jobq: WorkerConfig.Queues: give at least one queue name")
	}
	if cfg.Concurrency < 0 {
		return nil, fmt.Errorf("jobq: WorkerConfig.Concurrency must not be negative, not %d", cfg.Concurrency)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.LeaseMs < 0 {
		return nil, fmt.Errorf("jobq: WorkerConfig.LeaseMs must not be negative, not %d", cfg.LeaseMs)
	}
	if cfg.WaitMs < 0 || cfg.WaitMs > MaxWaitMs {
		return nil, fmt.Errorf("jobq: WorkerConfig.WaitMs must be between 0 and %d, not %d", MaxWaitMs, cfg.WaitMs)
	}
	if cfg.WaitMs == 0 {
		cfg.WaitMs = DefaultWaitMs
	}
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = defaultWorkerID()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = log.Default()
	}
	return &Worker{cfg: cfg, client: client, log: logger, handlers: map[string]HandlerFunc{}}, nil
}

func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "go"
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(suffix))
}

// ID is the worker id it claims and beats with.
func (w *Worker) ID() string { return w.cfg.WorkerID }

// Handle registers fn for jobs of jobType. Only the types registered are claimed. Register
// before Run; a second registration of a type replaces the first.
func (w *Worker) Handle(jobType string, fn HandlerFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers[jobType] = fn
}

// Run works until ctx is cancelled, then stops gracefully and returns nil: it stops
// claiming at once (a waiting long-poll is aborted), lets running jobs finish within
// GracePeriod, then cancels the contexts of those still running and releases them (POST
// /v1/leases/release: pending again at once, their attempt not spent), and sends the acks
// owed. A handler that ignores its ctx is left behind: its result is dropped.
//
// Run returns early with a *Problem when the service refuses to hand out work (401, 403,
// a 4xx no retry changes), after the same graceful stop. Run it from signal.NotifyContext
// to stop on SIGTERM and Ctrl-C.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("jobq: this Worker is already running")
	}
	if len(w.handlers) == 0 {
		w.mu.Unlock()
		return errors.New("jobq: no handlers: register at least one with Handle before Run")
	}
	w.running = true
	handlers := make(map[string]HandlerFunc, len(w.handlers))
	for t, fn := range w.handlers {
		handlers[t] = fn
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
	}()
	r := newRun(w, handlers)
	return r.run(ctx)
}

// held is a lease this worker holds, from claim until its outcome is reported.
type held struct {
	lease    Lease
	leaseLen time.Duration
	ctx      context.Context // the handler's
	cancel   context.CancelFunc
	// Guarded by run.mu:
	reporting bool // the handler returned; its outcome is on its way
	lost      bool // the service says the lease is gone: never report it
	abandoned bool // the grace period ran out (or it never started): it is being released
	beatsDone chan struct{}
}

type run struct {
	w        *Worker
	handlers map[string]HandlerFunc
	types    []string
	started  time.Time

	stop     context.Context // done once the stop begins (ctx cancelled, or a refusal)
	stopNow  context.CancelFunc
	jobs     context.Context // parent of the handlers' contexts: outlives stop by the grace period
	jobsDone context.CancelFunc
	reports  context.Context // retried reports give up once this is done
	giveUp   context.CancelFunc

	mu        sync.Mutex
	held      map[string]*held
	active    int           // handlers not yet returned: what Concurrency bounds
	slotFreed chan struct{} // a handler returned (buffered 1: a wake-up, not a count)
	fatal     error
	reporting sync.WaitGroup // outcomes on their way

	acker    *batcher
	releaser *batcher
}

func newRun(w *Worker, handlers map[string]HandlerFunc) *run {
	types := make([]string, 0, len(handlers))
	for t := range handlers {
		types = append(types, t)
	}
	sort.Strings(types)
	r := &run{w: w, handlers: handlers, types: types, held: map[string]*held{}, slotFreed: make(chan struct{}, 1)}
	r.acker = newBatcher(r.sendAcks)
	r.releaser = newBatcher(r.sendReleases)
	return r
}

func (r *run) run(ctx context.Context) error {
	w := r.w
	r.started = time.Now()
	r.stop, r.stopNow = context.WithCancel(ctx)
	// Handlers and reports must outlive the caller's ctx: their ends are ours to choose.
	r.jobs, r.jobsDone = context.WithCancel(context.Background())
	r.reports, r.giveUp = context.WithCancel(context.Background())
	defer r.stopNow()
	defer r.jobsDone()
	defer r.giveUp()

	w.log.Printf("jobq worker %s: serving queues=%v at %s types=%v concurrency=%d",
		w.cfg.WorkerID, w.cfg.Queues, w.client.base, r.types, w.cfg.Concurrency)
	helpers := sync.WaitGroup{}
	helpers.Add(3)
	go func() { defer helpers.Done(); r.acker.loop(r.reports) }()
	go func() { defer helpers.Done(); r.releaser.loop(r.reports) }()
	go func() { defer helpers.Done(); r.beatLoop() }()

	r.claimLoop()
	r.drain()
	r.giveUp()
	helpers.Wait()
	r.beat("stopped")
	w.log.Printf("jobq worker %s: stopped", w.cfg.WorkerID)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

// stopping reports whether the stop has begun.
func (r *run) stopping() bool { return r.stop.Err() != nil }

// refuse stops the worker for an answer no retry changes; Run returns it.
func (r *run) refuse(what string, err error) {
	r.mu.Lock()
	first := r.fatal == nil
	if first {
		r.fatal = err
	}
	r.mu.Unlock()
	if first {
		r.w.log.Printf("jobq worker: %s refused by the service (%v); stopping", what, err)
	}
	r.stopNow()
}

// Claiming

func (r *run) claimLoop() {
	w := r.w
	var backoff backoff
	quiet := false // the long-poll cap was already reported once
	for !r.stopping() {
		r.mu.Lock()
		want := w.cfg.Concurrency - r.active
		r.mu.Unlock()
		if want <= 0 {
			select {
			case <-r.slotFreed:
			case <-r.stop.Done():
			}
			continue
		}
		if want > maxBatch {
			want = maxBatch
		}
		began := time.Now()
		leases, err := w.client.Claim(r.stop, Claim{
			WorkerID: w.cfg.WorkerID, Queues: w.cfg.Queues, Types: r.types,
			Limit: want, LeaseMs: w.cfg.LeaseMs, WaitMs: w.cfg.WaitMs,
		})
		if err != nil {
			if r.stopping() {
				return // the stop aborted the long-poll
			}
			var p *Problem
			switch {
			case errors.As(err, &p) && p.Code == codeTooManyLongPolls:
				// Not a failure: the service holds as many waiting claims as it may and had
				// no job for this one. Ask again after Retry-After, saying so once.
				if !quiet {
					w.log.Printf("jobq worker: the service holds its limit of waiting claims; claiming again after its Retry-After")
					quiet = true
				}
				r.pause(jitter(orDefault(p.RetryAfter, backoffFirst)))
			case isRefusal(err):
				// 401, 403, 422 ...: asking again will not help. Finish what we hold, then stop.
				r.refuse("claim", err)
				return
			default:
				retryAfter := time.Duration(0)
				if p != nil {
					retryAfter = p.RetryAfter
				}
				pause := backoff.next(retryAfter)
				w.log.Printf("jobq worker: claim failed (%v); claiming again in %.1fs", err, pause.Seconds())
				r.pause(pause)
			}
			continue
		}
		backoff.reset()
		quiet = false
		if r.stopping() {
			// Answered just as the stop came: these never start; give them back at once.
			for _, lease := range leases {
				lease := lease
				r.releaseUnstarted(&lease)
			}
			return
		}
		for i := range leases {
			r.take(leases[i])
		}
		if elapsed := time.Since(began); len(leases) == 0 && elapsed < minEmptyPoll {
			r.pause(time.Duration(float64(minEmptyPoll-elapsed) * (1 + mathrand.Float64()/2)))
		}
	}
}

// pause waits d, or until the stop begins.
func (r *run) pause(d time.Duration) { _ = sleep(r.stop, d) }

func (r *run) leaseLength(lease Lease) time.Duration {
	if r.w.cfg.LeaseMs > 0 {
		return time.Duration(r.w.cfg.LeaseMs) * time.Millisecond
	}
	if lease.LockedUntil.IsZero() {
		return fallbackLease
	}
	if left := time.Until(lease.LockedUntil); left > minLeaseEstimate {
		return left
	}
	return minLeaseEstimate
}

// take starts a claimed job: its handler, and its heartbeats.
func (r *run) take(lease Lease) {
	h := &held{lease: lease, leaseLen: r.leaseLength(lease), beatsDone: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(r.jobs)
	r.mu.Lock()
	r.held[lease.LeaseID] = h
	r.active++
	r.mu.Unlock()
	go r.heartbeats(h)
	go r.process(h)
}

func (r *run) releaseUnstarted(lease *Lease) {
	h := &held{lease: *lease, abandoned: true, beatsDone: make(chan struct{})}
	close(h.beatsDone)
	r.mu.Lock()
	r.held[lease.LeaseID] = h
	r.mu.Unlock()
	r.reporting.Add(1)
	go func() {
		defer r.reporting.Done()
		r.release(h, "shutdown, never started")
	}()
}

// Running one job

func (r *run) process(h *held) {
	job := h.lease.Job
	began := time.Now()
	out := runHandler(h.ctx, r.handlers[job.Type], job)
	ran := time.Since(began)
	r.mu.Lock()
	r.active--
	lost, abandoned := h.lost, h.abandoned
	if !lost && !abandoned {
		h.reporting = true
		r.reporting.Add(1)
	}
	r.mu.Unlock()
	r.freeSlot()
	if lost || abandoned {
		// A lost lease is not ours to report; an abandoned one is being released.
		return
	}
	defer r.reporting.Done()
	defer r.forget(h)
	if out.failure == nil {
		code, err := r.acker.submit(ackItem{leaseID: h.lease.LeaseID, result: out.result})
		switch {
		case err == nil && code == "ok":
			r.outcome(job, "completed", ran, "")
			return
		case err == nil && code == "already_completed":
			r.outcome(job, "completed (a retried ack: the first one had stored the result)", ran, "")
			return
		case err == nil:
			r.w.log.Printf("jobq worker: job %s: ack answered %s; the result is dropped", job.ID, code)
			return
		case errors.Is(err, ErrPayloadTooLarge):
			out.failure = &Failure{Error: "the service refused the result as too large: " + err.Error(), NoRetry: true}
		case errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden):
			r.refuse("ack of job "+job.ID, err)
			return
		case isRefusal(err):
			out.failure = &Failure{Error: "the service refused the ack: " + err.Error(), NoRetry: true}
		default:
			r.w.log.Printf("jobq worker: job %s: could not ack (%v); the lease will expire", job.ID, err)
			return
		}
	}
	r.fail(h, *out.failure, ran)
}

func (r *run) fail(h *held, f Failure, ran time.Duration) {
	job := h.lease.Job
	var answered *Job
	err := r.retrying(func(ctx context.Context) error {
		var err error
		answered, err = r.w.client.Fail(ctx, h.lease.LeaseID, f)
		return err
	})
	switch {
	case err == nil:
		r.outcome(job, failOutcome(f, answered), ran, f.Error)
	case errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound):
		r.w.log.Printf("jobq worker: job %s: fail answered %v; nothing more to do", job.ID, err)
	case errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden):
		r.refuse("failure report of job "+job.ID, err)
	default:
		r.w.log.Printf("jobq worker: job %s: could not report the failure: %v", job.ID, err)
	}
}

func failOutcome(f Failure, answered *Job) string {
	switch {
	case answered.Status == StatusDead && f.NoRetry:
		return "discarded (dead)"
	case answered.Status == StatusDead:
		return "failed for good (dead)"
	case answered.VisibleAt.IsZero():
		return "failed, retried"
	default:
		delay := time.Until(answered.VisibleAt)
		if delay < 0 {
			delay = 0
		}
		return fmt.Sprintf("failed, retried in %.1fs", delay.Seconds())
	}
}

// outcome logs the one line per job an operator reads: id, type, attempt, time.
func (r *run) outcome(job *Job, what string, ran time.Duration, why string) {
	if why != "" {
		why = ": " + firstLine(why)
	}
	r.w.log.Printf("jobq worker: job %s (%s) attempt %d/%d: %s (ran %.3fs)%s",
		job.ID, job.Type, job.Attempt, job.MaxAttempts, what, ran.Seconds(), why)
}

func firstLine(text string) string {
	for i, c := range text {
		if c == '\n' {
			text = text[:i]
			break
		}
	}
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	return text
}

func (r *run) freeSlot() {
	select {
	case r.slotFreed <- struct{}{}:
	default:
	}
}

// forget drops a lease whose outcome is reported; its heartbeats end.
func (r *run) forget(h *held) {
	r.mu.Lock()
	delete(r.held, h.lease.LeaseID)
	r.mu.Unlock()
	h.cancel()
	<-h.beatsDone
}

// lose marks a lease the service no longer knows as ours: its handler's ctx is cancelled
// and whatever it returns is dropped.
func (r *run) lose(h *held, err error) {
	r.mu.Lock()
	already := h.lost || h.reporting || h.abandoned
	if !already {
		h.lost = true
		delete(r.held, h.lease.LeaseID)
	}
	r.mu.Unlock()
	if already {
		return
	}
	job := h.lease.Job
	r.w.log.Printf("jobq worker: job %s (%s) attempt %d/%d: lease lost (%v): cancelled, or expired and taken by another worker",
		job.ID, job.Type, job.Attempt, job.MaxAttempts, err)
	h.cancel()
}

// Heartbeats

// heartbeats extends h's lease every third of its length, until its outcome is reported
// (h.ctx is then cancelled), the lease is lost, or it is abandoned.
func (r *run) heartbeats(h *held) {
	defer close(h.beatsDone)
	every := h.leaseLen / 3
	next := every
	for {
		t := time.NewTimer(next)
		select {
		case <-t.C:
		case <-h.ctx.Done():
			// The handler's ctx ends once its outcome is reported, its lease is lost, or the
			// grace period ran out: no more beats either way. (An ack retried through an
			// outage keeps its lease: the ctx ends only after it.)
			t.Stop()
			return
		}
		r.mu.Lock()
		over := h.lost || h.abandoned
		r.mu.Unlock()
		if over {
			return
		}
		ctx, cancel := context.WithTimeout(r.reports, every)
		_, err := r.w.client.Heartbeat(ctx, h.lease.LeaseID, r.w.cfg.LeaseMs)
		cancel()
		switch {
		case err == nil:
			next = every
		case errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound):
			r.lose(h, err)
			return
		case errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden):
			r.refuse("heartbeat of job "+h.lease.Job.ID, err)
			return
		default:
			if r.reports.Err() != nil {
				return
			}
			// The lease may well still be held: try again soon, well before it runs out.
			next = every / 2
			if next > 2*time.Second {
				next = 2 * time.Second
			}
			next = time.Duration(float64(next) * (0.8 + 0.4*mathrand.Float64()))
			r.w.log.Printf("jobq worker: job %s: heartbeat failed (%v); trying again in %.1fs", h.lease.Job.ID, err, next.Seconds())
		}
	}
}

// Stopping

// drain runs once claiming has stopped: running jobs get the grace period, then are
// released; the reports owed get finalReports more.
func (r *run) drain() {
	w := r.w
	r.mu.Lock()
	n := r.active
	r.mu.Unlock()
	if n > 0 {
		w.log.Printf("jobq worker %s: stopping; waiting up to %s for %d running job(s)", w.cfg.WorkerID, positive(w.cfg.GracePeriod), n)
	}
	grace := time.NewTimer(positive(w.cfg.GracePeriod))
	defer grace.Stop()
wait:
	for {
		r.mu.Lock()
		n = r.active
		r.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-r.slotFreed:
		case <-grace.C:
			break wait
		}
	}
	r.mu.Lock()
	var late []*held
	for _, h := range r.held {
		if !h.reporting && !h.lost && !h.abandoned {
			h.abandoned = true
			late = append(late, h)
		}
	}
	r.mu.Unlock()
	if len(late) > 0 {
		w.log.Printf("jobq worker %s: grace period over: releasing %d job(s)", w.cfg.WorkerID, len(late))
	}
	// Cancel the handlers' contexts and release at once, without waiting for them to
	// return: a handler that ignores its ctx must not hold up the stop.
	for _, h := range late {
		h.cancel()
		r.reporting.Add(1)
		go func(h *held) {
			defer r.reporting.Done()
			r.release(h, "shutdown")
		}(h)
	}
	done := make(chan struct{})
	go func() { r.reporting.Wait(); close(done) }()
	limit := time.NewTimer(finalReports)
	defer limit.Stop()
	select {
	case <-done:
	case <-limit.C:
		w.log.Printf("jobq worker %s: reports still owed after %s are given up; their leases will expire", w.cfg.WorkerID, finalReports)
	}
}

func positive(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

func (r *run) release(h *held, why string) {
	job := h.lease.Job
	defer func() {
		r.mu.Lock()
		delete(r.held, h.lease.LeaseID)
		r.mu.Unlock()
	}()
	code, err := r.releaser.submit(ackItem{leaseID: h.lease.LeaseID})
	switch {
	case err == nil && code == "ok":
		r.outcome(job, "released ("+why+")", 0, "")
	case err == nil:
		r.w.log.Printf("jobq worker: job %s: release answered %s; nothing more to do", job.ID, code)
	default:
		r.w.log.Printf("jobq worker: job %s: could not release (%v); the lease will expire", job.ID, err)
	}
}

// Reports

// retrying calls fn until it succeeds or fails for good, waiting out outages and 429/503
// (their Retry-After). Safe: the lease id fences every retry, so a duplicate is answered
// lease_lost and changes nothing. Gives up once the stop's last reports are over.
func (r *run) retrying(fn func(ctx context.Context) error) error {
	var b backoff
	for {
		err := fn(r.reports)
		if err == nil {
			return nil
		}
		if isRefusal(err) {
			return err
		}
		var p *Problem
		errors.As(err, &p)
		retryAfter := time.Duration(0)
		if p != nil {
			retryAfter = p.RetryAfter
		}
		pause := b.next(retryAfter)
		r.w.log.Printf("jobq worker: report failed (%v); trying again in %.1fs", err, pause.Seconds())
		if sleep(r.reports, pause) != nil {
			return err
		}
	}
}

// isRefusal reports whether err is an answer that sending again cannot change (a 4xx
// other than 429), as opposed to an outage, a 429 or a 5xx.
func isRefusal(err error) bool {
	var p *Problem
	return errors.As(err, &p) && !p.Temporary() && p.Status < 500
}

func rawJSON(b []byte) json.RawMessage { return json.RawMessage(b) }

// ackItem is one report a batcher sends: an ack (result) or a release.
type ackItem struct {
	leaseID string
	result  []byte
}

type reply struct {
	code string // "ok", or why not: "lease_lost", "not_found", "already_completed"
	err  error
}

type pendingItem struct {
	item  ackItem
	reply chan reply
}

// batcher sends reports of one kind, batching those that pile up while a request is in
// flight. No timer: a lone report goes out at once, and under load batches grow by
// themselves.
type batcher struct {
	mu      sync.Mutex
	pending []pendingItem
	wake    chan struct{}
	send    func(items []pendingItem)
}

func newBatcher(send func(items []pendingItem)) *batcher {
	return &batcher{wake: make(chan struct{}, 1), send: send}
}

func (b *batcher) submit(item ackItem) (string, error) {
	ch := make(chan reply, 1)
	b.mu.Lock()
	b.pending = append(b.pending, pendingItem{item, ch})
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	got := <-ch
	return got.code, got.err
}

// loop sends until done; what is still pending then is answered with done's error.
func (b *batcher) loop(done context.Context) {
	for {
		select {
		case <-b.wake:
		case <-done.Done():
			b.mu.Lock()
			left := b.pending
			b.pending = nil
			b.mu.Unlock()
			for _, p := range left {
				p.reply <- reply{err: done.Err()}
			}
			return
		}
		for {
			b.mu.Lock()
			n := len(b.pending)
			if n > maxBatch {
				n = maxBatch
			}
			batch := b.pending[:n:n]
			b.pending = b.pending[n:]
			b.mu.Unlock()
			if n == 0 {
				break
			}
			b.send(batch)
		}
	}
}

func (r *run) sendAcks(batch []pendingItem) {
	client := r.w.client
	if len(batch) == 1 {
		p := batch[0]
		err := r.retrying(func(ctx context.Context) error {
			_, err := client.Ack(ctx, p.item.leaseID, rawJSON(p.item.result))
			return err
		})
		p.reply <- codeOf(err)
		return
	}
	acks := make([]Ack, len(batch))
	for i, p := range batch {
		acks[i] = Ack{LeaseID: p.item.leaseID, Result: rawJSON(p.item.result)}
	}
	var results []AckResult
	err := r.retrying(func(ctx context.Context) error {
		var err error
		results, err = client.AckMany(ctx, acks)
		return err
	})
	if errors.Is(err, ErrPayloadTooLarge) {
		// Each result fits but together they do not: send them one by one.
		for _, p := range batch {
			r.sendAcks([]pendingItem{p})
		}
		return
	}
	answerEach(batch, results, err)
}

func (r *run) sendReleases(batch []pendingItem) {
	releases := make([]Release, len(batch))
	for i, p := range batch {
		releases[i] = Release{LeaseID: p.item.leaseID}
	}
	var results []ReleaseResult
	err := r.retrying(func(ctx context.Context) error {
		var err error
		results, err = r.w.client.ReleaseMany(ctx, releases)
		return err
	})
	answerEach(batch, results, err)
}

func answerEach(batch []pendingItem, results []AckResult, err error) {
	byID := make(map[string]AckResult, len(results))
	for _, res := range results {
		byID[res.LeaseID] = res
	}
	for _, p := range batch {
		res, ok := byID[p.item.leaseID]
		switch {
		case err != nil:
			p.reply <- reply{err: err}
		case !ok:
			p.reply <- reply{err: errors.New("jobq: missing from the batch answer")}
		case res.OK:
			p.reply <- reply{code: "ok"}
		case res.AlreadyCompleted:
			p.reply <- reply{code: "already_completed"}
		default:
			p.reply <- reply{code: res.Code}
		}
	}
}

// codeOf turns a single report's error into the batch's words.
func codeOf(err error) reply {
	var p *Problem
	switch {
	case err == nil:
		return reply{code: "ok"}
	case errors.As(err, &p) && p.Code == "lease_lost" && p.AlreadyCompleted:
		return reply{code: "already_completed"}
	case errors.As(err, &p) && (p.Code == "lease_lost" || p.Code == "not_found"):
		return reply{code: p.Code}
	}
	return reply{err: err}
}

// The process's own beat

func (r *run) beatLoop() {
	r.beat("running")
	t := time.NewTicker(workerBeatEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.beat("running")
		case <-r.stop.Done():
			r.beat("stopping")
			return
		}
	}
}

// beat reports this worker to the service. A beat is for the operator's page: one that
// fails (an older service answers 404) is not worth a word, and never holds up a stop.
func (r *run) beat(state string) {
	r.mu.Lock()
	inFlight := len(r.held)
	r.mu.Unlock()
	host, _ := os.Hostname()
	ctx, cancel := context.WithTimeout(context.Background(), workerBeatTimeout)
	defer cancel()
	_ = r.w.client.Beat(ctx, r.w.cfg.WorkerID, WorkerBeat{
		Host: host, PID: os.Getpid(), Concurrency: r.w.cfg.Concurrency, Queues: r.w.cfg.Queues,
		InFlight: &inFlight, StartedAt: r.started, State: state,
	})
}

// backoff spaces retries when the service cannot be reached: exponential with full
// jitter, or the Retry-After the service asked for (plus a little jitter).
type backoff struct{ failures int }

func (b *backoff) next(retryAfter time.Duration) time.Duration {
	b.failures++
	if retryAfter > 0 {
		return jitter(retryAfter)
	}
	ceiling := backoffFirst << (b.failures - 1)
	if ceiling > backoffMax || ceiling <= 0 {
		ceiling = backoffMax
	}
	return ceiling/2 + time.Duration(mathrand.Int63n(int64(ceiling/2)+1))
}

func (b *backoff) reset() { b.failures = 0 }

// jitter stretches d by up to 10%, so workers told the same Retry-After do not return in step.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(mathrand.Float64()*0.1*float64(d))
}

func orDefault(d, fallback time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return fallback
}
