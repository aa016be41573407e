package jobq_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"jobq.invalid/jobq"
)

// The rate settings go out as the API's fields and come back in QueueSettings; a paced
// queue's use shows in RateLimitUse.
func TestRateSettings(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)
	queue, err := c.UpdateQueue(ctx, q, jobq.QueueUpdate{
		RateLimit:   &jobq.RateLimit{Jobs: 10, PerMs: 1000, Key: "payload.tenant"},
		EnqueueRate: &jobq.EnqueueRate{Jobs: 50, PerMs: 1000, Burst: 200},
		SoftDepth:   jobq.Int(10000),
		SoftLagMs:   jobq.Int64(60000),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := queue.Settings
	if s.RateLimit == nil || *s.RateLimit != (jobq.RateLimit{Jobs: 10, PerMs: 1000, Key: "payload.tenant"}) ||
		s.EnqueueRate == nil || *s.EnqueueRate != (jobq.EnqueueRate{Jobs: 50, PerMs: 1000, Burst: 200}) ||
		s.SoftDepth == nil || *s.SoftDepth != 10000 || s.SoftLagMs == nil || *s.SoftLagMs != 60000 {
		t.Fatalf("settings: %+v", s)
	}
	if queue.RateLimitUse == nil || queue.RateLimitUse.Jobs != 0 || queue.RateLimitUse.FreeInMs != nil {
		t.Fatalf("use of an unused limit: %+v", queue.RateLimitUse)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "t", Payload: map[string]string{"tenant": "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := c.Claim(ctx, jobq.Claim{WorkerID: "go-test", Queues: []string{q}, Limit: 5})
	if err != nil || len(leases) != 2 {
		t.Fatalf("claim: %v %v", leases, err)
	}
	queue, err = c.Queue(ctx, q)
	if err != nil || queue.RateLimitUse == nil || queue.RateLimitUse.Jobs != 2 || queue.RateLimitUse.Keys != 1 {
		t.Fatalf("use after 2 claimed: %+v %v", queue, err)
	}
	// A burst left out takes the service's default, jobs.
	queue, err = c.UpdateQueue(ctx, q, jobq.QueueUpdate{EnqueueRate: &jobq.EnqueueRate{Jobs: 5, PerMs: 1000}})
	if err != nil || queue.Settings.EnqueueRate == nil || queue.Settings.EnqueueRate.Burst != 5 {
		t.Fatalf("burst by default: %+v %v", queue, err)
	}
	queue, err = c.UpdateQueue(ctx, q, jobq.QueueUpdate{NoRateLimit: true, NoEnqueueRate: true, NoSoftDepth: true, NoSoftLag: true})
	if err != nil {
		t.Fatal(err)
	}
	s = queue.Settings
	if s.RateLimit != nil || s.EnqueueRate != nil || s.SoftDepth != nil || s.SoftLagMs != nil || queue.RateLimitUse != nil {
		t.Fatalf("cleared: %+v use %+v", s, queue.RateLimitUse)
	}
}

// Beyond a queue's enqueue_rate: ErrQueueRateLimited, RetryAfter to the millisecond, nothing
// enqueued.
func TestQueueRateLimited(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)
	// 2 at once, then one every 5 s: the third waits for a token seconds away.
	if _, err := c.UpdateQueue(ctx, q, jobq.QueueUpdate{EnqueueRate: &jobq.EnqueueRate{Jobs: 1, PerMs: 5000, Burst: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueMany(ctx, []jobq.NewJob{{Queue: q, Type: "t"}, {Queue: q, Type: "t"}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "t"})
	var p *jobq.Problem
	if !errors.As(err, &p) || p.Status != 429 || p.Code != "queue_rate_limited" || !p.Temporary() ||
		!errors.Is(err, jobq.ErrQueueRateLimited) || !errors.Is(err, jobq.ErrRateLimited) ||
		errors.Is(err, jobq.ErrTokenRateLimited) || errors.Is(err, jobq.ErrQueueFull) {
		t.Fatalf("429: %#v", err)
	}
	ms, _ := p.Body["retry_after_ms"].(float64)
	if p.RetryAfter != time.Duration(ms)*time.Millisecond || p.RetryAfter <= 0 || p.RetryAfter > 5*time.Second {
		t.Fatalf("RetryAfter %v, retry_after_ms %v", p.RetryAfter, p.Body["retry_after_ms"])
	}
	queue, err := c.Queue(ctx, q)
	if err != nil || queue.Counts.Pending != 2 {
		t.Fatalf("a refused enqueue enqueued: %+v %v", queue, err)
	}
}

// statusCounter counts the 429 answers a client got.
type statusCounter struct{ limited atomic.Int32 }

func (sc *statusCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		sc.limited.Add(1)
	}
	return resp, err
}

// RetryOverload waits out an enqueue rate for the retry_after_ms the service gives (not the
// whole seconds of Retry-After), and no job is lost or doubled.
func TestRetryOverloadWaitsOutTheEnqueueRate(t *testing.T) {
	admin := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, admin)
	if _, err := admin.UpdateQueue(ctx, q, jobq.QueueUpdate{EnqueueRate: &jobq.EnqueueRate{Jobs: 10, PerMs: 1000, Burst: 2}}); err != nil {
		t.Fatal(err)
	}
	sc := &statusCounter{}
	patient, err := jobq.NewClient(jobq.Config{
		URL: serviceURL(t), RetryOverload: 10 * time.Second, HTTPClient: &http.Client{Transport: sc},
	})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	for n := 0; n < 8; n++ {
		if _, err := patient.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "t", Payload: map[string]int{"n": n}}); err != nil {
			t.Fatalf("enqueue %d: %v", n, err)
		}
	}
	took := time.Since(started)
	if sc.limited.Load() == 0 {
		t.Fatal("no 429 was waited out")
	}
	// 2 at once, then 6 at 10 a second: about 600 ms, not a second per refusal.
	if took < 450*time.Millisecond || took > 4*time.Second {
		t.Fatalf("8 enqueues took %v", took)
	}
	page, err := admin.ListJobs(ctx, jobq.JobFilter{Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range page.Jobs {
		got = append(got, string(j.Payload))
	}
	sort.Strings(got)
	var want []string
	for n := 0; n < 8; n++ {
		want = append(want, fmt.Sprintf(`{"n":%d}`, n))
	}
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("stored payloads %v, want %v", got, want)
	}
}

// Past soft_depth a share of enqueues answers queue_overloaded, with the curve's wait.
func TestOverloaded(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	q := freshQueue(t, c)
	jobs := make([]jobq.NewJob, 4)
	for i := range jobs {
		jobs[i] = jobq.NewJob{Queue: q, Type: "t"}
	}
	if _, err := c.EnqueueMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateQueue(ctx, q, jobq.QueueUpdate{SoftDepth: jobq.Int(1)}); err != nil {
		t.Fatal(err)
	}
	// Overload 4 and more refuses 3 of 4 enqueues, spread evenly: one of the first few is.
	var err error
	for n := 0; n < 20 && err == nil; n++ {
		_, err = c.Enqueue(ctx, jobq.NewJob{Queue: q, Type: "t"})
	}
	var p *jobq.Problem
	if !errors.As(err, &p) || p.Code != "queue_overloaded" || !errors.Is(err, jobq.ErrOverloaded) || errors.Is(err, jobq.ErrRateLimited) {
		t.Fatalf("past soft_depth: %#v", err)
	}
	if p.RetryAfter < 100*time.Millisecond || p.RetryAfter > time.Minute {
		t.Fatalf("RetryAfter %v", p.RetryAfter)
	}
}

// retryAfterAnswer is a stand-in service that refuses the first call with a token's rate
// (retry_after_ms 40, Retry-After 1) and accepts the next.
type retryAfterAnswer struct{ calls atomic.Int32 }

func (ra *retryAfterAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	if ra.calls.Add(1) == 1 {
		body := `{"type":"/problems/token_rate_limited","title":"t","status":429,"code":"token_rate_limited","retry_after_ms":40}`
		return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"1"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	}
	return &http.Response{StatusCode: 201, Header: http.Header{},
		Body: io.NopCloser(strings.NewReader(`{"id":"1","status":"pending"}`)), Request: req}, nil
}

func TestRetryAfterMsWinsOverTheHeader(t *testing.T) {
	ra := &retryAfterAnswer{}
	c, err := jobq.NewClient(jobq.Config{URL: "http://jobq.test", RetryOverload: 5 * time.Second,
		HTTPClient: &http.Client{Transport: ra}})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	job, err := c.Enqueue(testCtx(t, 10*time.Second), jobq.NewJob{Type: "t"})
	took := time.Since(started)
	if err != nil || job.ID != "1" || ra.calls.Load() != 2 {
		t.Fatalf("enqueue: %+v %v after %d calls", job, err, ra.calls.Load())
	}
	if took < 38*time.Millisecond || took > 900*time.Millisecond {
		t.Fatalf("slept %v for retry_after_ms 40 (Retry-After 1)", took)
	}

	// Without RetryOverload the Problem says the same wait.
	ra = &retryAfterAnswer{}
	c, _ = jobq.NewClient(jobq.Config{URL: "http://jobq.test", HTTPClient: &http.Client{Transport: ra}})
	_, err = c.Enqueue(testCtx(t, 10*time.Second), jobq.NewJob{Type: "t"})
	var p *jobq.Problem
	if !errors.As(err, &p) || p.RetryAfter != 40*time.Millisecond || !errors.Is(err, jobq.ErrTokenRateLimited) ||
		!errors.Is(err, jobq.ErrRateLimited) {
		t.Fatalf("token_rate_limited: %#v", err)
	}
}
