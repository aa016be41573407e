// Command conformance is a jobq worker built on this client's Worker, with the handlers the
// conformance kit drives (`jobq conformance -- ./conformance`):
//
//   - conformance.echo: acks with the payload as the result;
//   - conformance.fail: fails with payload.message as the error, never retried (Discard);
//   - conformance.sleep: sleeps payload.ms milliseconds (the Worker heartbeats meanwhile),
//     then acks with {"slept": ms}.
//
// It reads JOBQ_URL, JOBQ_TOKEN (optional) and JOBQ_QUEUES (comma-separated), and stops
// gracefully on SIGTERM or SIGINT; a second signal kills it at once.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"jobq.invalid/jobq"
)

// A job still running this long after the signal is released for another worker: the kit
// expects a job that cannot finish within a few seconds to be handed back.
const gracePeriod = 3 * time.Second

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	go func() {
		<-ctx.Done()
		stop() // the default action again: a second signal ends the process at once
	}()

	queues := strings.Split(os.Getenv("JOBQ_QUEUES"), ",")
	w, err := jobq.NewWorker(jobq.WorkerConfig{
		URL:         os.Getenv("JOBQ_URL"),
		Token:       os.Getenv("JOBQ_TOKEN"),
		Queues:      queues,
		GracePeriod: gracePeriod,
	})
	if err != nil {
		return err
	}
	w.Handle("conformance.echo", func(ctx context.Context, job *jobq.Job) (any, error) {
		return job.Payload, nil
	})
	w.Handle("conformance.fail", func(ctx context.Context, job *jobq.Job) (any, error) {
		var p struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal(job.Payload, &p); err != nil {
			return nil, jobq.Discard(fmt.Sprintf("payload is not {\"message\": ...}: %v", err))
		}
		return nil, jobq.Discard(p.Message)
	})
	w.Handle("conformance.sleep", func(ctx context.Context, job *jobq.Job) (any, error) {
		var p struct {
			Ms int64 `json:"ms"`
		}
		if err := json.Unmarshal(job.Payload, &p); err != nil {
			return nil, jobq.Discard(fmt.Sprintf("payload is not {\"ms\": n}: %v", err))
		}
		select {
		case <-time.After(time.Duration(p.Ms) * time.Millisecond):
			return map[string]int64{"slept": p.Ms}, nil
		case <-ctx.Done():
			// Lease lost, or the grace period is over: the Worker releases the job.
			return nil, ctx.Err()
		}
	})
	return w.Run(ctx)
}
