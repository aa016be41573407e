package jobq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log"
	"os"
	"testing"
	"time"

	"jobq.invalid/jobq"
)

// These tests talk to a live service: JOBQ_URL (and JOBQ_TOKEN, an admin token, when the
// service has tokens). tests/clients/test_go_client.py starts one and runs them.
func serviceURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("JOBQ_URL")
	if url == "" {
		t.Skip("JOBQ_URL is not set: these tests need a running jobq service (tests/clients/test_go_client.py starts one)")
	}
	return url
}

func newClient(t *testing.T) *jobq.Client {
	t.Helper()
	c, err := jobq.NewClient(jobq.Config{URL: serviceURL(t), Token: os.Getenv("JOBQ_TOKEN")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// freshQueue is a queue name no other test uses; it is deleted (with its jobs) afterwards.
func freshQueue(t *testing.T, c *jobq.Client) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "go-test-" + hex.EncodeToString(b)
	t.Cleanup(func() { _ = c.DeleteQueue(context.Background(), name, true) })
	return name
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test with what after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quietLogger keeps the workers' lines out of the test output unless -v.
func quietLogger() *log.Logger {
	if testing.Verbose() {
		return log.New(os.Stderr, "worker| ", log.Lmicroseconds)
	}
	return log.New(io.Discard, "", 0)
}

// startWorker runs w until the test ends (or stop is called) and returns stop, which
// cancels Run's context and returns what Run returned.
func startWorker(t *testing.T, w *jobq.Worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var result error
	stopped := false
	stop = func() error {
		if stopped {
			return result
		}
		stopped = true
		cancel()
		select {
		case result = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Worker.Run did not return within 30 s of its context's cancel")
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}
