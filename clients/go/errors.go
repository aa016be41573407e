package jobq

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Problem is an error answer of the service (status 4xx or 5xx), read from its RFC 9457
// problem details. Get at it with errors.As:
//
//	var p *jobq.Problem
//	if errors.As(err, &p) && p.Code == "queue_full" {
//		time.Sleep(p.RetryAfter)
//	}
//
// or test its code with errors.Is and the sentinels below (errors.Is(err, jobq.ErrQueueFull)).
type Problem struct {
	Status int    // the HTTP status
	Code   string // the service's code (validation_error, not_found, lease_lost ...); "" from a proxy
	Title  string
	Detail string
	// RetryAfter is how long the service asks to wait (429 and 503 answers): the body's
	// retry_after_ms when it sent one (the rate limits do, to the millisecond), else the
	// Retry-After header (whole seconds); 0 when neither.
	RetryAfter time.Duration
	// Errors lists what was wrong with the request (422 validation_error).
	Errors []ProblemItem
	// AlreadyCompleted (lease_lost only): this very lease completed the job and its result
	// is stored; an ack sent again after its answer was lost.
	AlreadyCompleted bool
	// Body is the whole problem document, for the fields not named here (queue_not_empty's
	// counts, schedules and topics).
	Body map[string]any
}

// ProblemItem is one entry of a validation error's list.
type ProblemItem struct {
	Loc []any  `json:"loc"`
	Msg string `json:"msg"`
}

func (p *Problem) Error() string {
	label := strconv.Itoa(p.Status)
	if p.Code != "" {
		label += " " + p.Code
	}
	text := p.Detail
	if text == "" {
		text = p.Title
	}
	if text == "" {
		text = "no detail"
	}
	return "jobq: " + label + ": " + text
}

// Temporary reports whether the answer asks the caller to come back later (429 or 503):
// nothing was done, and the same call may be sent again after RetryAfter.
func (p *Problem) Temporary() bool {
	return p.Status == http.StatusTooManyRequests || p.Status == http.StatusServiceUnavailable
}

// Is lets errors.Is compare a Problem with the sentinels: by code when the service sent one,
// else by status (an answer from a proxy in between has no code).
func (p *Problem) Is(target error) bool {
	if p.Code != "" {
		switch target {
		case ErrUnavailable:
			return p.Code == "unavailable" || p.Code == codeTooManyLongPolls
		case ErrRateLimited:
			return p.Code == "queue_rate_limited" || p.Code == "token_rate_limited"
		}
		want, ok := sentinelCodes[target]
		return ok && want == p.Code
	}
	want, ok := sentinelStatus[target]
	return ok && want == p.Status
}

// Sentinels for the common problem codes: errors.Is(err, jobq.ErrLeaseLost).
var (
	ErrValidation          = errors.New("jobq: validation_error")
	ErrUnauthorized        = errors.New("jobq: unauthorized")
	ErrForbidden           = errors.New("jobq: forbidden")
	ErrNotFound            = errors.New("jobq: not_found")
	ErrLeaseLost           = errors.New("jobq: lease_lost")
	ErrIdempotencyConflict = errors.New("jobq: idempotency_conflict")
	ErrInvalidState        = errors.New("jobq: invalid_state")
	ErrQueueNotEmpty       = errors.New("jobq: queue_not_empty")
	ErrPayloadTooLarge     = errors.New("jobq: payload_too_large")
	ErrQueueFull           = errors.New("jobq: queue_full")
	// ErrRateLimited: an enqueue rate (the queue's or the token's) holds fewer jobs than
	// the request brought; nothing was enqueued, RetryAfter says when it holds them all.
	// ErrQueueRateLimited and ErrTokenRateLimited tell whose rate it is.
	ErrRateLimited      = errors.New("jobq: rate limited")
	ErrQueueRateLimited = errors.New("jobq: queue_rate_limited")
	ErrTokenRateLimited = errors.New("jobq: token_rate_limited")
	// ErrOverloaded: the queue is past its soft_depth or soft_lag_ms and this enqueue fell
	// in the share refused to slow producers down; send it again after RetryAfter.
	ErrOverloaded = errors.New("jobq: queue_overloaded")
	// ErrUnavailable: the service cannot reach its database (503), or holds as many
	// waiting long-polls as it may (too_many_long_polls): come back after RetryAfter.
	ErrUnavailable = errors.New("jobq: unavailable")
)

// The service's long-poll cap answers 503 with this code; it means "ask again later" too.
const codeTooManyLongPolls = "too_many_long_polls"

var sentinelCodes = map[error]string{
	ErrValidation:          "validation_error",
	ErrUnauthorized:        "unauthorized",
	ErrForbidden:           "forbidden",
	ErrNotFound:            "not_found",
	ErrLeaseLost:           "lease_lost",
	ErrIdempotencyConflict: "idempotency_conflict",
	ErrInvalidState:        "invalid_state",
	ErrQueueNotEmpty:       "queue_not_empty",
	ErrPayloadTooLarge:     "payload_too_large",
	ErrQueueFull:           "queue_full",
	ErrQueueRateLimited:    "queue_rate_limited",
	ErrTokenRateLimited:    "token_rate_limited",
	ErrOverloaded:          "queue_overloaded",
}

var sentinelStatus = map[error]int{
	ErrValidation:      http.StatusUnprocessableEntity,
	ErrUnauthorized:    http.StatusUnauthorized,
	ErrForbidden:       http.StatusForbidden,
	ErrNotFound:        http.StatusNotFound,
	ErrPayloadTooLarge: http.StatusRequestEntityTooLarge,
	ErrUnavailable:     http.StatusServiceUnavailable,
}

// JobFailedError is what Wait returns when the job ended dead or cancelled instead of
// completed; Job is its last state (LastError says why).
type JobFailedError struct {
	Job *Job
}

func (e *JobFailedError) Error() string {
	why := e.Job.LastError
	if why == "" {
		why = "no error text"
	}
	return fmt.Sprintf("jobq: job %s ended %s: %s", e.Job.ID, e.Job.Status, why)
}

// problemFrom reads an error answer. A body that is not problem+json (a proxy's page) still
// gives a Problem with the status.
func problemFrom(resp *http.Response, body []byte) *Problem {
	p := &Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
	var doc map[string]any
	if json.Unmarshal(body, &doc) == nil && doc != nil {
		p.Body = doc
		p.Code, _ = doc["code"].(string)
		if title, ok := doc["title"].(string); ok && title != "" {
			p.Title = title
		}
		p.Detail, _ = doc["detail"].(string)
		p.AlreadyCompleted, _ = doc["already_completed"].(bool)
		var items struct {
			Errors []ProblemItem `json:"errors"`
		}
		if json.Unmarshal(body, &items) == nil {
			p.Errors = items.Errors
		}
	}
	p.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if ms, ok := p.Body["retry_after_ms"].(float64); ok && ms >= 0 && ms == float64(int64(ms)) {
		p.RetryAfter = time.Duration(ms) * time.Millisecond
	}
	return p
}

// parseRetryAfter reads delta-seconds or an HTTP-date (RFC 9110); 0 when absent or unreadable.
func parseRetryAfter(value string, now time.Time) time.Duration {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0
	}
	if secs, err := strconv.Atoi(value); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if when, err := http.ParseTime(value); err == nil && when.After(now) {
		return when.Sub(now)
	}
	return 0
}
