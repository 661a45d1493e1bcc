package spans

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy is how a failed export is tried again: exponential backoff
// with jitter from Initial, each wait at most Max, giving up once the
// next try would start past MaxElapsed. A server's Retry-After replaces
// the backoff's wait (up to MaxElapsed).
type RetryPolicy struct {
	Initial, Max, MaxElapsed time.Duration
	// Sleep waits d or until stop closes (false then); tests replace it.
	Sleep func(d time.Duration, stop <-chan struct{}) bool
}

// DefaultRetry is the OpenTelemetry SDKs' usual policy, shortened: the
// queue behind one batch keeps filling while it is retried.
var DefaultRetry = RetryPolicy{Initial: time.Second, Max: 30 * time.Second, MaxElapsed: time.Minute}

// Retryable reports whether an OTLP/HTTP answer may be retried: the
// specification's 429, 502, 503 and 504 (a server that answers anything
// else will answer it again).
func Retryable(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// RetryAfter reads a Retry-After header: seconds, or an HTTP date
// (relative to now); 0 when absent or unreadable.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		if s > 3600 {
			s = 3600
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Do runs try until it succeeds, says its failure is not retryable, the
// policy's time is spent, or stop closes (then no more waits: one try).
// try returns how long the server asked to wait (0: the backoff's).
func (p RetryPolicy) Do(stop <-chan struct{}, try func() (after time.Duration, retry bool, err error)) error {
	sleep := p.Sleep
	if sleep == nil {
		sleep = sleepOrStop
	}
	wait, spent := p.Initial, time.Duration(0)
	for {
		after, retry, err := try()
		if err == nil || !retry {
			return err
		}
		d := jitter(wait)
		if after > 0 {
			d = after
		}
		if spent+d > p.MaxElapsed || !sleep(d, stop) {
			return err
		}
		spent += d
		if wait *= 2; wait > p.Max {
			wait = p.Max
		}
	}
}

// jitter is d ± 50%, so that many exporters do not retry in step.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d)
}

func sleepOrStop(d time.Duration, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}
