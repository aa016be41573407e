package jobq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// HandlerFunc runs one job. What it returns becomes the job's result (marshalled with
// encoding/json; a json.RawMessage goes as it is). An error fails the attempt, and the
// job is retried after the queue's backoff; return Retry or Discard to say otherwise.
// ctx is cancelled when the lease is lost (the job was cancelled, or another worker took
// it) and when a stopping worker's grace period runs out: return soon after.
//
// Delivery is at least once: hand job.ID to downstream systems as their idempotency key.
type HandlerFunc func(ctx context.Context, job *Job) (any, error)

// RetryError is what Retry returns: run the job again after In (0: the queue's backoff).
// The attempt still counts towards MaxAttempts.
type RetryError struct {
	Reason string
	In     time.Duration
}

func (e *RetryError) Error() string { return e.Reason }

// Retry fails the attempt on purpose and asks for another after in (0: the queue's
// backoff). The job's error is reason.
func Retry(reason string, in time.Duration) error {
	return &RetryError{Reason: reason, In: in}
}

// DiscardError is what Discard returns: the job goes dead at once.
type DiscardError struct {
	Reason string
}

func (e *DiscardError) Error() string { return e.Reason }

// Discard gives up on the job: it goes dead at once (a fail with retry: false), its error
// being reason. For a failure that no retry can fix (a malformed payload).
func Discard(reason string) error {
	return &DiscardError{Reason: reason}
}

// Error texts are stored with the job; keep them well under the service's body limit.
const maxErrorChars = 16000

// outcome is what one run of a handler came to.
type outcome struct {
	result  []byte   // the JSON to ack with, when failure is nil
	failure *Failure // the failure to report instead
}

// runHandler calls fn and turns what it did (a result, an error, a panic) into an outcome.
func runHandler(ctx context.Context, fn HandlerFunc, job *Job) (out outcome) {
	defer func() {
		if v := recover(); v != nil {
			out = outcome{failure: &Failure{Error: truncate(fmt.Sprintf("panic: %v\n\n%s", v, debug.Stack()))}}
		}
	}()
	if fn == nil { // the types filter of the claim should make this impossible
		return outcome{failure: &Failure{Error: fmt.Sprintf("this worker has no handler for job type %q", job.Type)}}
	}
	value, err := fn(ctx, job)
	if err != nil {
		var retry *RetryError
		var discard *DiscardError
		switch {
		case errors.As(err, &discard):
			return outcome{failure: &Failure{Error: truncate(discard.Reason), NoRetry: true}}
		case errors.As(err, &retry):
			return outcome{failure: &Failure{Error: truncate(retry.Reason), RetryIn: retry.In}}
		default:
			return outcome{failure: &Failure{Error: truncate(err.Error())}}
		}
	}
	raw, err := json.Marshal(value)
	if err != nil {
		// Retrying would run the side effects again only to fail the same way: dead.
		return outcome{failure: &Failure{
			Error:   fmt.Sprintf("the handler for %q returned a value that is not JSON (%T): %v", job.Type, value, err),
			NoRetry: true,
		}}
	}
	return outcome{result: raw}
}

// truncate keeps the head (the message) and the tail (where it happened) of a long text.
func truncate(text string) string {
	if len(text) <= maxErrorChars {
		return text
	}
	marker := fmt.Sprintf("\n… %d bytes cut …\n", len(text)-maxErrorChars)
	head := maxErrorChars / 4
	return text[:head] + marker + text[len(text)-(maxErrorChars-head-len(marker)):]
}
