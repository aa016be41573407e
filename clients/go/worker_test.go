package jobq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"jobq.invalid/jobq"
)

// newWorker makes a worker of the live service, or of cfg.URL when given (a stand-in).
func newWorker(t *testing.T, cfg jobq.WorkerConfig) *jobq.Worker {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = serviceURL(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	w, err := jobq.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWorkerCompletesJobs(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)
	w := newWorker(t, jobq.WorkerConfig{Queues: []string{q}, Concurrency: 4})
	w.Handle("double", func(ctx context.Context, job *jobq.Job) (any, error) {
		var p struct{ N int }
		if err := json.Unmarshal(job.Payload, &p); err != nil {
			return nil, err
		}
		return map[string]int{"n": p.N * 2}, nil
	})
	stop := startWorker(t, w)
	var ids []string
	for n := 0; n < 20; n++ {
		job, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "double", Payload: map[string]int{"n": n}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, job.ID)
	}
	for n, id := range ids {
		job, err := c.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"n":%d}`, 2*n); string(job.Result) != want || job.Attempt != 1 || job.WorkerID != w.ID() {
			t.Fatalf("job %d: result %s attempt %d worker %q, want %s", n, job.Result, job.Attempt, job.WorkerID, want)
		}
	}
	// The worker beats its presence: GET /v1/workers lists it.
	eventually(t, 5*time.Second, "the worker listed by GET /v1/workers", func() bool {
		return listedWorker(t, w.ID()) == "running"
	})
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v after a graceful stop", err)
	}
	if state := listedWorker(t, w.ID()); state != "stopped" {
		t.Fatalf("after Run returned, the worker is listed %q", state)
	}
}

// listedWorker is the state GET /v1/workers gives the worker, "" if it is not listed.
func listedWorker(t *testing.T, id string) string {
	req, _ := http.NewRequest(http.MethodGet, serviceURL(t)+"/v1/workers", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Workers []struct {
			WorkerID string `json:"worker_id"`
			State    string `json:"state"`
		} `json:"workers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	for _, w := range out.Workers {
		if w.WorkerID == id {
			return w.State
		}
	}
	return ""
}

func TestWorkerRetryAndDiscard(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)
	w := newWorker(t, jobq.WorkerConfig{Queues: []string{q}})
	w.Handle("flaky", func(ctx context.Context, job *jobq.Job) (any, error) {
		if job.Attempt == 1 {
			return nil, jobq.Retry("image store busy", 100*time.Millisecond)
		}
		return "ok", nil
	})
	w.Handle("bad", func(ctx context.Context, job *jobq.Job) (any, error) {
		return nil, fmt.Errorf("checking the address: %w", jobq.Discard("not an address"))
	})
	w.Handle("broken", func(ctx context.Context, job *jobq.Job) (any, error) {
		panic("nil map")
	})
	startWorker(t, w)

	flaky, _ := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "flaky"})
	bad, _ := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "bad"})
	broken, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "broken", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}

	job, err := c.Wait(ctx, flaky.ID)
	if err != nil || job.Attempt != 2 || string(job.Result) != `"ok"` || len(job.Errors) != 1 || job.Errors[0].Error != "image store busy" {
		t.Fatalf("Retry: %+v %v", job, err)
	}
	_, err = c.Wait(ctx, bad.ID)
	var failed *jobq.JobFailedError
	if !errors.As(err, &failed) || failed.Job.Status != jobq.StatusDead || failed.Job.Attempt != 1 ||
		failed.Job.LastError != "not an address" || failed.Job.MaxAttempts != 25 {
		t.Fatalf("Discard: %v", err)
	}
	_, err = c.Wait(ctx, broken.ID)
	if !errors.As(err, &failed) || failed.Job.Status != jobq.StatusDead || !strings.Contains(failed.Job.LastError, "panic: nil map") {
		t.Fatalf("a panicking handler: %v", err)
	}
}

func TestWorkerHeartbeatsAJobLongerThanItsLease(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)
	// The queue's lease, not one the worker chose: it reads the length off locked_until.
	if _, err := c.UpdateQueue(ctx, q, jobq.QueueUpdate{LeaseMs: jobq.Int(1500)}); err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, jobq.WorkerConfig{Queues: []string{q}})
	w.Handle("slow", func(ctx context.Context, job *jobq.Job) (any, error) {
		select {
		case <-time.After(4000 * time.Millisecond):
			return "slept", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	startWorker(t, w)
	job, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	done, err := c.Wait(ctx, job.ID)
	if err != nil || done.Attempt != 1 || len(done.Errors) != 0 {
		t.Fatalf("a job 2.7 times its lease: %+v %v", done, err)
	}
}

func TestWorkerCancelsAHandlerWhoseLeaseIsLost(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)
	started := make(chan string, 10)
	cancelled := make(chan error, 10)
	w := newWorker(t, jobq.WorkerConfig{Queues: []string{q}, LeaseMs: 900, GracePeriod: -1})
	w.Handle("long", func(ctx context.Context, job *jobq.Job) (any, error) {
		started <- job.ID
		<-ctx.Done()
		cancelled <- ctx.Err()
		return "too late", nil
	})
	startWorker(t, w)
	if _, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "long"}); err != nil {
		t.Fatal(err)
	}
	id := <-started
	if _, err := c.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled: // the next heartbeat (every 300 ms) was answered lease_lost
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's ctx was not cancelled after its job was")
	}
	job, err := c.Get(ctx, id)
	if err != nil || job.Status != jobq.StatusCancelled || string(job.Result) != "null" {
		t.Fatalf("a cancelled job: %+v %v", job, err)
	}
}

func TestWorkerStopReleasesWhatDidNotFinish(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)
	var mu sync.Mutex
	running := map[string]bool{}
	cooperativeStopped := make(chan struct{})
	stuck := make(chan struct{}) // a handler that ignores its ctx, let go at the test's end
	t.Cleanup(func() { close(stuck) })
	w := newWorker(t, jobq.WorkerConfig{Queues: []string{q}, Concurrency: 4, GracePeriod: 500 * time.Millisecond})
	w.Handle("cooperative", func(ctx context.Context, job *jobq.Job) (any, error) {
		mu.Lock()
		running[job.ID] = true
		mu.Unlock()
		<-ctx.Done()
		close(cooperativeStopped)
		return nil, ctx.Err()
	})
	w.Handle("stubborn", func(ctx context.Context, job *jobq.Job) (any, error) {
		mu.Lock()
		running[job.ID] = true
		mu.Unlock()
		<-stuck
		return "finished after the stop", nil
	})
	w.Handle("quick", func(ctx context.Context, job *jobq.Job) (any, error) {
		mu.Lock()
		running[job.ID] = true
		mu.Unlock()
		time.Sleep(100 * time.Millisecond) // finishes within the grace period
		return "quick", nil
	})
	stop := startWorker(t, w)
	a, _ := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "cooperative", MaxAttempts: 1})
	b, _ := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "stubborn", MaxAttempts: 1})
	eventually(t, 5*time.Second, "both jobs running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running[a.ID] && running[b.ID]
	})
	quick, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "quick"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the quick job running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running[quick.ID]
	})

	began := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the stop took %s with a grace period of 0.5 s", took)
	}
	select {
	case <-cooperativeStopped:
	default:
		t.Fatal("the running handler's ctx was not cancelled after the grace period")
	}
	// Both unfinished jobs are pending again, claimable now, their attempt not spent (a
	// job of max_attempts 1 is not dead); the one that finished in time was acked.
	for _, id := range []string{a.ID, b.ID} {
		job, err := c.Get(ctx, id)
		if err != nil || job.Status != jobq.StatusPending || job.Attempt != 0 || len(job.Releases) != 1 ||
			len(job.Errors) != 0 || job.VisibleAt.After(time.Now()) {
			t.Fatalf("job %s after the stop: %+v %v", id, job, err)
		}
	}
	done, err := c.Get(ctx, quick.ID)
	if err != nil || done.Status != jobq.StatusCompleted {
		t.Fatalf("the job that finished within the grace period: %+v %v", done, err)
	}
}

func TestWorkerStopAbortsTheLongPoll(t *testing.T) {
	c := newClient(t)
	q := freshQueue(t, c)
	w := newWorker(t, jobq.WorkerConfig{Queues: []string{q}, WaitMs: 30000})
	w.Handle("never", func(ctx context.Context, job *jobq.Job) (any, error) { return nil, nil })
	stop := startWorker(t, w)
	eventually(t, 5*time.Second, "the worker listed", func() bool { return listedWorker(t, w.ID()) == "running" })
	began := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("an idle worker took %s to stop (its 30 s long-poll was not aborted)", took)
	}
}

// The claim loop waits the Retry-After of a 503 before it claims again, and its claims
// long-poll and leave lease_ms to the queue; no live service needed: a stand-in answers.
func TestWorkerWaitsRetryAfter(t *testing.T) {
	var mu sync.Mutex
	var claims []time.Time
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/leases" {
			rw.WriteHeader(http.StatusOK)
			_, _ = rw.Write([]byte(`{}`))
			return
		}
		var body map[string]any
		_ = json.NewDecoder(req.Body).Decode(&body)
		mu.Lock()
		bodies = append(bodies, body)
		claims = append(claims, time.Now())
		n := len(claims)
		mu.Unlock()
		if n <= 2 {
			rw.Header().Set("Content-Type", "application/problem+json")
			rw.Header().Set("Retry-After", "1")
			rw.WriteHeader(http.StatusServiceUnavailable)
			_, _ = rw.Write([]byte(`{"type":"/problems/unavailable","title":"Unavailable","status":503,"code":"unavailable","detail":"database down"}`))
			return
		}
		time.Sleep(200 * time.Millisecond) // an empty long-poll
		_, _ = rw.Write([]byte(`{"leases":[]}`))
	}))
	defer srv.Close()
	w := newWorker(t, jobq.WorkerConfig{URL: srv.URL, Queues: []string{"q"}})
	w.Handle("t", func(ctx context.Context, job *jobq.Job) (any, error) { return nil, nil })
	stop := startWorker(t, w)
	eventually(t, 10*time.Second, "three claims", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(claims) >= 3
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		if gap := claims[i].Sub(claims[i-1]); gap < time.Second {
			t.Fatalf("claim %d came %s after a 503 with Retry-After: 1", i+1, gap)
		}
	}
	for _, body := range bodies {
		if _, given := body["lease_ms"]; given || body["wait_ms"] != float64(jobq.DefaultWaitMs) || body["types"] == nil {
			t.Fatalf("a claim without LeaseMs: %v", body)
		}
	}
}

// A token the service refuses stops the worker: Run returns the 401 as a *Problem, and it
// claims no more than once.
func TestWorkerStopsWhenTheTokenIsRefused(t *testing.T) {
	var mu sync.Mutex
	claims, tokens := 0, map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		mu.Lock()
		tokens[req.Header.Get("Authorization")] = true
		if req.URL.Path == "/v1/leases" {
			claims++
		}
		mu.Unlock()
		rw.Header().Set("Content-Type", "application/problem+json")
		rw.WriteHeader(http.StatusUnauthorized)
		_, _ = rw.Write([]byte(`{"type":"/problems/unauthorized","title":"Unauthorized","status":401,"code":"unauthorized","detail":"unknown token"}`))
	}))
	defer srv.Close()
	w := newWorker(t, jobq.WorkerConfig{URL: srv.URL, Token: "revoked", Queues: []string{"q"}})
	w.Handle("t", func(ctx context.Context, job *jobq.Job) (any, error) { return nil, nil })
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a worker whose token is refused kept running")
	}
	var p *jobq.Problem
	if !errors.As(err, &p) || !errors.Is(err, jobq.ErrUnauthorized) || p.Detail != "unknown token" {
		t.Fatalf("Run returned %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if claims != 1 || len(tokens) != 1 || !tokens["Bearer revoked"] {
		t.Fatalf("%d claims, tokens sent %v", claims, tokens)
	}
}

// An ack answered 503 goes again after its Retry-After (a lease id fences it, so a repeat
// is safe), and the job's handler runs once.
func TestWorkerRetriesAnAckAfterRetryAfter(t *testing.T) {
	var mu sync.Mutex
	var acks []time.Time
	claimed := false
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch req.URL.Path {
		case "/v1/leases":
			if !claimed {
				claimed = true
				until := time.Now().Add(30 * time.Second).UTC().Format(time.RFC3339Nano)
				_, _ = fmt.Fprintf(rw, `{"leases":[{"lease_id":"7.1","locked_until":%q,"job":{"id":"7","queue":"q","type":"t","payload":{},"status":"running","attempt":1,"max_attempts":25}}]}`, until)
				return
			}
			mu.Unlock()
			time.Sleep(200 * time.Millisecond) // an empty long-poll
			mu.Lock()
			_, _ = rw.Write([]byte(`{"leases":[]}`))
		case "/v1/leases/7.1/ack":
			acks = append(acks, time.Now())
			if len(acks) == 1 {
				rw.Header().Set("Retry-After", "1")
				rw.WriteHeader(http.StatusServiceUnavailable)
				_, _ = rw.Write([]byte(`{"status":503,"code":"unavailable","title":"Service Unavailable"}`))
				return
			}
			_, _ = rw.Write([]byte(`{"id":"7","queue":"q","type":"t","status":"completed","attempt":1,"result":"done"}`))
		default:
			_, _ = rw.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	runs := 0
	w := newWorker(t, jobq.WorkerConfig{URL: srv.URL, Queues: []string{"q"}})
	w.Handle("t", func(ctx context.Context, job *jobq.Job) (any, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		return "done", nil
	})
	stop := startWorker(t, w)
	eventually(t, 10*time.Second, "the ack sent again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if gap := acks[1].Sub(acks[0]); gap < time.Second || len(acks) != 2 || runs != 1 {
		t.Fatalf("%d acks, %s apart, %d runs of the handler", len(acks), gap, runs)
	}
}
