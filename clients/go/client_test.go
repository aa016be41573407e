package jobq_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"jobq.invalid/jobq"
)

func TestEnqueueGetWait(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)

	job, err := c.Enqueue(ctx, jobq.NewJob{
		Queue: q, Type: "email.welcome", Payload: map[string]any{"to": "ada@example.com"},
		Priority: 5, MaxAttempts: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if job.ID == "" || job.Status != jobq.StatusPending || job.Queue != q || job.Priority != 5 || job.MaxAttempts != 3 {
		t.Fatalf("enqueued job: %+v", job)
	}
	got, err := c.Get(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	var payload map[string]string
	if err := json.Unmarshal(got.Payload, &payload); err != nil || payload["to"] != "ada@example.com" {
		t.Fatalf("payload %s (%v)", got.Payload, err)
	}
	if got.CreatedAt.IsZero() || !got.LockedUntil.IsZero() {
		t.Fatalf("times: created %v, locked until %v", got.CreatedAt, got.LockedUntil)
	}

	// Wait returns once a worker acks: here, our own loop of lease calls.
	waited := make(chan *jobq.Job, 1)
	go func() {
		done, err := c.Wait(ctx, job.ID)
		if err != nil {
			t.Error(err)
		}
		waited <- done
	}()
	leases, err := c.Claim(ctx, jobq.Claim{WorkerID: "go-test", Queues: []string{q}, WaitMs: 5000})
	if err != nil || len(leases) != 1 || leases[0].Job.ID != job.ID || leases[0].Job.Attempt != 1 {
		t.Fatalf("claim: %+v %v", leases, err)
	}
	if _, err := c.Ack(ctx, leases[0].LeaseID, map[string]bool{"sent": true}); err != nil {
		t.Fatal(err)
	}
	done := <-waited
	if done == nil || done.Status != jobq.StatusCompleted || string(done.Result) != `{"sent":true}` {
		t.Fatalf("waited: %+v", done)
	}

	// A delayed job is not done within a short wait: ctx's deadline ends it.
	later, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "later", Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !later.VisibleAt.After(time.Now().Add(50 * time.Minute)) {
		t.Fatalf("a job delayed an hour is visible at %v", later.VisibleAt)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(short, later.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline: %v", err)
	}
	// A job that ends dead: Wait says so with a *JobFailedError.
	if _, err := c.Cancel(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Wait(ctx, later.ID)
	var failed *jobq.JobFailedError
	if !errors.As(err, &failed) || failed.Job.Status != jobq.StatusCancelled {
		t.Fatalf("Wait on a cancelled job: %v", err)
	}
}

func TestEnqueueManyAndIdempotency(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)
	jobs, err := c.EnqueueMany(ctx, []jobq.NewJob{
		{Queue: q, Type: "a", Payload: json.RawMessage(`{"n":1}`)},
		{Queue: q, Type: "b", RunAt: time.Now().Add(time.Minute)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].Type != "a" || jobs[1].Type != "b" || string(jobs[0].Payload) != `{"n":1}` {
		t.Fatalf("batch: %+v", jobs)
	}
	first, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "once", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "once", IdempotencyKey: "k1"})
	if err != nil || again.ID != first.ID {
		t.Fatalf("repeat with the same key: %+v %v", again, err)
	}
	_, err = c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "other", IdempotencyKey: "k1"})
	if !errors.Is(err, jobq.ErrIdempotencyConflict) {
		t.Fatalf("same key, another type: %v", err)
	}
	if _, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "x", Delay: time.Second, RunAt: time.Now()}); err == nil {
		t.Fatal("Delay and RunAt together were accepted")
	}
}

func TestTypedProblems(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)

	// 422: the service names what is wrong.
	_, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "x", MaxAttempts: -1})
	var p *jobq.Problem
	if !errors.As(err, &p) || p.Status != 422 || p.Code != "validation_error" || len(p.Errors) == 0 || !errors.Is(err, jobq.ErrValidation) {
		t.Fatalf("422: %#v", err)
	}
	if !strings.Contains(err.Error(), "422 validation_error") {
		t.Fatalf("message: %s", err)
	}

	// 404.
	_, err = c.Get(ctx, "999999999999")
	if !errors.As(err, &p) || p.Status != 404 || !errors.Is(err, jobq.ErrNotFound) || errors.Is(err, jobq.ErrLeaseLost) {
		t.Fatalf("404: %v", err)
	}

	// 409 lease_lost: a lease released is dead for good; an ack sent twice says the first
	// one completed the job.
	if _, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "x"}); err != nil {
		t.Fatal(err)
	}
	leases, err := c.Claim(ctx, jobq.Claim{WorkerID: "go-test", Queues: []string{q}, LeaseMs: 5000})
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v %v", leases, err)
	}
	until, err := c.Heartbeat(ctx, leases[0].LeaseID, 10000)
	if err != nil || time.Until(until) < 8*time.Second {
		t.Fatalf("heartbeat: %v %v", until, err)
	}
	released, err := c.Release(ctx, leases[0].LeaseID, 0)
	if err != nil || released.Status != jobq.StatusPending || released.Attempt != 0 || len(released.Releases) != 1 {
		t.Fatalf("release: %+v %v", released, err)
	}
	_, err = c.Heartbeat(ctx, leases[0].LeaseID, 0)
	if !errors.As(err, &p) || p.Status != 409 || !errors.Is(err, jobq.ErrLeaseLost) || p.AlreadyCompleted {
		t.Fatalf("409: %v", err)
	}
	leases, err = c.Claim(ctx, jobq.Claim{WorkerID: "go-test", Queues: []string{q}})
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v %v", leases, err)
	}
	if _, err := c.Ack(ctx, leases[0].LeaseID, nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.Ack(ctx, leases[0].LeaseID, nil)
	if !errors.As(err, &p) || !errors.Is(err, jobq.ErrLeaseLost) || !p.AlreadyCompleted {
		t.Fatalf("a second ack: %v", err)
	}

	// 429 queue_full from a queue at its max_depth, with Retry-After.
	if _, err := c.UpdateQueue(ctx, q, jobq.QueueUpdate{MaxDepth: jobq.Int(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "fills"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "too-many"})
	if !errors.As(err, &p) || p.Status != 429 || p.Code != "queue_full" || p.RetryAfter < time.Second ||
		!errors.Is(err, jobq.ErrQueueFull) || !p.Temporary() {
		t.Fatalf("429: %#v", err)
	}
}

// countingTransport tells when the service answered 429, so the test can make room then.
type countingTransport struct {
	full     atomic.Int32
	answered chan struct{}
}

func (ct *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests && ct.full.Add(1) == 1 {
		close(ct.answered)
	}
	return resp, err
}

func TestRetryOverloadWaitsOutQueueFull(t *testing.T) {
	admin := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, admin)
	if _, err := admin.UpdateQueue(ctx, q, jobq.QueueUpdate{MaxDepth: jobq.Int(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "fills"}); err != nil {
		t.Fatal(err)
	}
	ct := &countingTransport{answered: make(chan struct{})}
	patient, err := jobq.NewClient(jobq.Config{
		URL: serviceURL(t), RetryOverload: 20 * time.Second, HTTPClient: &http.Client{Transport: ct},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		// Room is made only once the producer was told the queue is full.
		<-ct.answered
		leases, err := admin.Claim(ctx, jobq.Claim{WorkerID: "go-test", Queues: []string{q}})
		if err == nil && len(leases) == 1 {
			_, err = admin.Ack(ctx, leases[0].LeaseID, nil)
		}
		if err != nil {
			t.Error(err)
		}
	}()
	job, err := patient.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "patient"})
	if err != nil || job.Type != "patient" {
		t.Fatalf("enqueue with RetryOverload: %v %v", job, err)
	}
	if ct.full.Load() < 1 {
		t.Fatal("the queue was never full")
	}
}

func TestOperatorCalls(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)

	queue, err := c.UpdateQueue(ctx, q, jobq.QueueUpdate{MaxDepth: jobq.Int(100), LeaseMs: jobq.Int(4000), Paused: jobq.Bool(false)})
	if err != nil || queue.Name != q || queue.Settings.MaxDepth == nil || *queue.Settings.MaxDepth != 100 || queue.Settings.LeaseMs != 4000 {
		t.Fatalf("update: %+v %v", queue, err)
	}
	queue, err = c.UpdateQueue(ctx, q, jobq.QueueUpdate{NoMaxDepth: true})
	if err != nil || queue.Settings.MaxDepth != nil || queue.Settings.LeaseMs != 4000 {
		t.Fatalf("no max_depth: %+v %v", queue, err)
	}
	page, err := c.ListQueues(ctx, jobq.QueueFilter{Prefix: q})
	if err != nil || len(page.Queues) != 1 || page.Queues[0].Name != q || page.NextCursor != "" {
		t.Fatalf("list queues: %+v %v", page, err)
	}

	// Dead letters: a job failed for good, replayed, failed again, purged.
	job, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "doomed"})
	if err != nil {
		t.Fatal(err)
	}
	failDead := func() {
		t.Helper()
		leases, err := c.Claim(ctx, jobq.Claim{WorkerID: "go-test", Queues: []string{q}})
		if err != nil || len(leases) != 1 {
			t.Fatalf("claim: %v %v", leases, err)
		}
		dead, err := c.Fail(ctx, leases[0].LeaseID, jobq.Failure{Error: "no such user", NoRetry: true})
		if err != nil || dead.Status != jobq.StatusDead || dead.LastError != "no such user" {
			t.Fatalf("fail: %+v %v", dead, err)
		}
	}
	failDead()
	jobs, err := c.ListJobs(ctx, jobq.JobFilter{Queue: q, Status: jobq.StatusDead})
	if err != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != job.ID || jobs.Jobs[0].Errors[0].Kind != "failed" {
		t.Fatalf("dead jobs: %+v %v", jobs, err)
	}
	if err := c.DeleteQueue(ctx, q, false); !errors.Is(err, jobq.ErrQueueNotEmpty) {
		t.Fatalf("delete of a queue holding a dead job: %v", err)
	}
	if n, err := c.ReplayDead(ctx, jobq.DeadFilter{Queue: q}); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	failDead()
	if n, err := c.PurgeDead(ctx, jobq.DeadFilter{Queue: q, Type: "doomed"}); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}

	// Cancel, retry, delete; a fail with RetryIn; batches of acks and releases.
	job, err = c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := c.Cancel(ctx, job.ID); err != nil || j.Status != jobq.StatusCancelled {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	if _, err := c.Cancel(ctx, job.ID); !errors.Is(err, jobq.ErrInvalidState) {
		t.Fatalf("cancel twice: %v", err)
	}
	if j, err := c.RetryJob(ctx, job.ID); err != nil || j.Status != jobq.StatusPending {
		t.Fatalf("retry: %+v %v", j, err)
	}
	leases, err := c.Claim(ctx, jobq.Claim{WorkerID: "go-test", Queues: []string{q}})
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v %v", leases, err)
	}
	failed, err := c.Fail(ctx, leases[0].LeaseID, jobq.Failure{Error: "later", RetryIn: time.Minute})
	if err != nil || failed.Status != jobq.StatusFailed || time.Until(failed.VisibleAt) < 50*time.Second {
		t.Fatalf("fail with RetryIn: %+v %v", failed, err)
	}
	if _, err := c.EnqueueMany(ctx, []jobq.NewJob{{Queue: q, Type: "m"}, {Queue: q, Type: "m"}, {Queue: q, Type: "m"}}); err != nil {
		t.Fatal(err)
	}
	leases, err = c.Claim(ctx, jobq.Claim{WorkerID: "go-test", Queues: []string{q}, Types: []string{"m"}, Limit: 3})
	if err != nil || len(leases) != 3 {
		t.Fatalf("claim 3: %v %v", leases, err)
	}
	acks, err := c.AckMany(ctx, []jobq.Ack{{LeaseID: leases[0].LeaseID, Result: 1}, {LeaseID: "0.0", Result: 2}})
	if err != nil || len(acks) != 2 || !acks[0].OK || acks[1].OK || acks[1].Code == "" {
		t.Fatalf("ack many: %+v %v", acks, err)
	}
	rels, err := c.ReleaseMany(ctx, []jobq.Release{{LeaseID: leases[1].LeaseID}, {LeaseID: leases[2].LeaseID, Delay: time.Minute}})
	if err != nil || len(rels) != 2 || !rels[0].OK || !rels[1].OK {
		t.Fatalf("release many: %+v %v", rels, err)
	}
	if err := c.DeleteJob(ctx, leases[1].Job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, leases[1].Job.ID); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("a deleted job: %v", err)
	}
	if err := c.DeleteQueue(ctx, q, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Queue(ctx, q); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("a deleted queue: %v", err)
	}
}

func TestConfigIsChecked(t *testing.T) {
	for _, url := range []string{"", "localhost:8000", "http://127.0.0.1:8000/v1/"} {
		if _, err := jobq.NewClient(jobq.Config{URL: url}); err == nil {
			t.Errorf("NewClient accepted URL %q", url)
		}
	}
	if _, err := jobq.NewWorker(jobq.WorkerConfig{URL: "http://127.0.0.1:1"}); err == nil {
		t.Error("NewWorker accepted no queues")
	}
	w, err := jobq.NewWorker(jobq.WorkerConfig{URL: "http://127.0.0.1:1", Queues: []string{"q"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no handlers") {
		t.Fatalf("Run without handlers: %v", err)
	}
}
