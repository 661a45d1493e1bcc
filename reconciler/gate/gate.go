// Package gate holds the APIGate: one gate for an API server outage,
// shared by every controller and watch.
package gate

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"
)

// Probe backoff of the APIGate: short and capped low, since a probe of a
// server that is away costs a refused connection, and every probe interval
// is time the controllers stay idle after the server is back.
const (
	gateProbeFirst = 100 * time.Millisecond
	gateProbeMax   = 250 * time.Millisecond
)

// gateSettleMax bounds how long the workers wait, once the server answers,
// for the watches to reconnect (Settle).
const gateSettleMax = 3 * time.Second

// APIGate handles an API server outage once for all controllers and
// watches: the first reconcile (or list, or watch) that finds the server
// unreachable closes the gate and logs it; one goroutine then probes the
// server with a short backoff, instead of every key retrying (and logging)
// on its own backoff and every watch on client-go's (0.8 s doubling to
// 30 s, which brings a watch back up to half a minute after the server).
// When a probe succeeds, the watches go on first (WaitServer returns);
// Settle waits for them to reconnect, and then the workers go on (Wait
// returns) on caches that have caught up, so that a recovery does not
// write on stale copies and end in conflicts.
type APIGate struct {
	probe func(ctx context.Context) error
	// Settle, when set, runs once the server answers, before the workers
	// go on (bounded by gateSettleMax).
	Settle func(ctx context.Context)

	mu     sync.Mutex
	ctx    context.Context
	down   bool
	since  time.Time     // when the gate closed
	opened time.Time     // when it last opened
	open   chan struct{} // closed when the workers may go on
	back   chan struct{} // closed when the server answers (watches go on)
	isBack bool
	backAt time.Time
}

// New returns an open gate that probes the server with probe.
func New(probe func(ctx context.Context) error) *APIGate {
	return &APIGate{probe: probe}
}

// Start sets the context that bounds the probing (until then: none).
func (g *APIGate) Start(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ctx = ctx
}

// Unreachable reports whether err says that the API server could not be
// reached or cannot serve at all (as opposed to an answer about a request).
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) || utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsServiceUnavailable(err) {
		return true
	}
	// Errors flattened into text on the way (discovery, fmt.Errorf %v).
	s := err.Error()
	return strings.Contains(s, "connect: connection refused") || strings.Contains(s, "connection reset by peer")
}

// answered reports whether a probe's error is an answer that only this
// request got (401, 403, 404: the server serves), so that an RBAC without
// access to /readyz cannot hold the gate closed forever. 5xx and 429 mean
// the server is not ready yet.
func answered(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	c := se.Status().Code
	return c != 0 && c < 500 && c != 429
}

// Fail records the error of a call (a reconcile, a list, a watch) that
// started at started; it reports whether the error is the API server being
// unreachable (the caller then waits at the gate instead of backing off).
// A call that started before the gate last opened does not close it
// again: its failure is the outage already over. A failure while the
// watches reconnect, of a call made after the server answered, means the
// server went away again: the watches wait again.
func (g *APIGate) Fail(err error, started time.Time) bool {
	if g == nil || !Unreachable(err) {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case !g.down && !started.Before(g.opened):
		g.down, g.since, g.open, g.back, g.isBack = true, time.Now(), make(chan struct{}), make(chan struct{}), false
		klog.InfoS("API server unreachable; reconciles and watches wait until it answers again", "err", err.Error())
		ctx := g.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		go g.probeUntilBack(ctx)
	case g.down && g.isBack && !started.Before(g.backAt):
		g.back, g.isBack = make(chan struct{}), false
	}
	return true
}

// Down reports whether the gate is closed.
func (g *APIGate) Down() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.down
}

// Wait returns at once while the gate is open; while it is closed it
// blocks until it opens (or ctx ends). Workers wait here.
func (g *APIGate) Wait(ctx context.Context) {
	if g == nil {
		return
	}
	g.mu.Lock()
	if !g.down {
		g.mu.Unlock()
		return
	}
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
	}
}

// WaitServer returns at once while the server answers; while it is away it
// blocks until a probe succeeds (or ctx ends). Lists and watches wait here,
// and go on before the workers do.
func (g *APIGate) WaitServer(ctx context.Context) {
	if g == nil {
		return
	}
	g.mu.Lock()
	if !g.down || g.isBack {
		g.mu.Unlock()
		return
	}
	back := g.back
	g.mu.Unlock()
	select {
	case <-back:
	case <-ctx.Done():
	}
}

// probeUntilBack probes the server until it answers, lets the watches go
// on, settles, and opens the gate; if the server goes away again while the
// watches reconnect, it probes on. It is the only prober of an outage.
func (g *APIGate) probeUntilBack(ctx context.Context) {
	for delay := gateProbeFirst; ; delay = min(2*delay, gateProbeMax) {
		select {
		case <-ctx.Done():
			return // shutting down: waiters end with their own contexts
		case <-time.After(delay):
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := g.probe(pctx)
		cancel()
		if err != nil && !answered(err) {
			continue
		}
		g.mu.Lock()
		g.isBack, g.backAt = true, time.Now()
		close(g.back)
		g.mu.Unlock()
		if g.Settle != nil {
			sctx, cancel := context.WithTimeout(ctx, gateSettleMax)
			g.Settle(sctx)
			cancel()
		}
		g.mu.Lock()
		if !g.isBack {
			g.mu.Unlock()
			delay = gateProbeFirst / 2
			continue // away again
		}
		now := time.Now()
		klog.InfoS("API server answers again; reconciles resume", "after", now.Sub(g.since).Round(100*time.Millisecond).String(),
			"settled", now.Sub(g.backAt).Round(time.Millisecond).String())
		g.down, g.opened = false, now
		close(g.open)
		g.mu.Unlock()
		return
	}
}
