package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"kontinue.dev/kontinue/reconciler/netguard"
)

// item is one event for one alert, queued for the alert's provider.
type item struct {
	alert   string // namespace/name
	summary string
	ev      Event
}

// Retry bounds the delivery of one request. A receiver that is down is
// retried for a while (For), not a number of times: a receiver down for a
// minute loses nothing, its provider's events wait in the queue (up to its
// bound) behind the request being retried.
type Retry struct {
	// For is how long a request is retried before its events are dropped
	// (default 5 minutes).
	For time.Duration
	// Attempts, when positive, also caps the tries of a request.
	Attempts int
	// Initial is the wait after the first failure, doubled after each
	// (default 1 s), at most Max (default 30 s); a receiver's Retry-After
	// wins when it is longer, up to Max.
	Initial, Max time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.For <= 0 {
		r.For = 5 * time.Minute
	}
	if r.Initial <= 0 {
		r.Initial = time.Second
	}
	if r.Max <= 0 {
		r.Max = 30 * time.Second
	}
	return r
}

// permanentError is a delivery that retrying will not fix (a refused
// address, a 4xx answer).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// send delivers req, retrying network errors, 429 and 5xx answers with
// backoff, until ctx ends or r.For has passed (or r.Attempts are spent);
// retrying, when set, is told of each failure that will be retried.
func send(ctx context.Context, c *http.Client, req *http.Request, r Retry, retrying func(error)) error {
	r = r.withDefaults()
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return err
		}
		body = b
	}
	deadline := time.Now().Add(r.For)
	wait := r.Initial
	var last error
	for attempt := 1; ; attempt++ {
		rq := req.Clone(ctx)
		rq.Body = io.NopCloser(bytes.NewReader(body))
		rq.ContentLength = int64(len(body))
		resp, err := c.Do(rq)
		retryAfter := time.Duration(0)
		switch {
		case err != nil:
			var refused *netguard.RefusedError
			if errors.As(err, &refused) {
				return &permanentError{refused}
			}
			last = err
		default:
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			switch {
			case resp.StatusCode < 300:
				return nil
			case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
				last = fmt.Errorf("%s answered %s", req.URL.Redacted(), resp.Status)
				if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
					retryAfter = time.Duration(s) * time.Second
				}
			default:
				return &permanentError{fmt.Errorf("%s answered %s", req.URL.Redacted(), resp.Status)}
			}
		}
		d := max(wait, min(retryAfter, r.Max))
		if r.Attempts > 0 && attempt >= r.Attempts || time.Now().Add(d).After(deadline) {
			return last
		}
		if retrying != nil {
			retrying(last)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return last
		case <-t.C:
		}
		wait = min(2*wait, r.Max)
	}
}
