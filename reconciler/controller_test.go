package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestUnreachable(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", refused, true},
		{"connection refused, wrapped", fmt.Errorf("list runs: %w", refused), true},
		{"connection refused, flattened to text", errors.New("Get \"https://127.0.0.1:6443/api\": dial tcp 127.0.0.1:6443: connect: connection refused"), true},
		{"connection reset", &url.Error{Op: "Get", URL: "u", Err: syscall.ECONNRESET}, true},
		{"EOF", &url.Error{Op: "Get", URL: "u", Err: io.EOF}, true},
		{"503", apierrors.NewServiceUnavailable("starting"), true},
		{"conflict: an answer", apierrors.NewConflict(gr, "x", errors.New("changed")), false},
		{"forbidden: an answer", apierrors.NewForbidden(gr, "x", errors.New("no")), false},
		{"500: an answer about this request", apierrors.NewInternalError(errors.New("webhook failed")), false},
		{"anything else", errors.New("template rendered nothing"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Unreachable(tt.err))
		})
	}
}

func TestAnswered(t *testing.T) {
	gr := schema.GroupResource{Resource: "readyz"}
	assert.True(t, answered(apierrors.NewForbidden(gr, "", errors.New("no"))), "no access to /readyz: the server answers")
	assert.True(t, answered(apierrors.NewNotFound(gr, "")))
	assert.False(t, answered(apierrors.NewInternalError(errors.New("etcd not ready"))))
	assert.False(t, answered(apierrors.NewServiceUnavailable("starting")))
	assert.False(t, answered(apierrors.NewTooManyRequests("later", 1)))
	assert.False(t, answered(errors.New("dial tcp: connect: connection refused")))
}

func TestAPIGate(t *testing.T) {
	down := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	var probes atomic.Int32
	var up atomic.Bool
	g := NewAPIGate(func(context.Context) error {
		probes.Add(1)
		if up.Load() {
			return nil
		}
		return down
	})
	// Settle sees the watches released and the workers still held.
	var settled atomic.Int32
	serverFirst := make(chan bool, 1)
	g.Settle = func(ctx context.Context) {
		if settled.Add(1) == 1 {
			released := make(chan struct{})
			go func() { g.WaitServer(ctx); close(released) }()
			select {
			case <-released:
				serverFirst <- g.Down()
			case <-time.After(time.Second):
				serverFirst <- false
			}
		}
	}
	ctx := context.Background()

	// Open: Wait returns at once; errors that are answers do not close it.
	g.Wait(ctx)
	g.WaitServer(ctx)
	assert.False(t, g.Fail(errors.New("rejected"), time.Now()))
	assert.False(t, g.Down())
	var nilGate *APIGate
	nilGate.Wait(ctx)
	nilGate.WaitServer(ctx)
	assert.False(t, nilGate.Fail(down, time.Now()), "no gate: every key backs off on its own")

	// The first unreachable error closes it; later ones only report.
	started := time.Now()
	assert.True(t, g.Fail(down, started))
	assert.True(t, g.Fail(down, started))
	assert.True(t, g.Down())

	// Workers and watches wait; one prober, with a short capped backoff
	// (0.1 s, 0.2 s, 0.4 s, then every 0.5 s).
	workers, watches := make(chan struct{}, 3), make(chan struct{}, 2)
	for i := 0; i < 3; i++ {
		go func() { g.Wait(ctx); workers <- struct{}{} }()
	}
	for i := 0; i < 2; i++ {
		go func() { g.WaitServer(ctx); watches <- struct{}{} }()
	}
	time.Sleep(1300 * time.Millisecond)
	assert.Len(t, workers, 0, "workers wait while the server is away")
	assert.Len(t, watches, 0, "watches wait while the server is away")
	n := probes.Load()
	assert.GreaterOrEqual(t, n, int32(3), "probes often enough to notice the server within half a second")
	assert.LessOrEqual(t, n, int32(5), "one prober, whoever waits")
	up.Store(true)
	for i := 0; i < 2; i++ {
		select {
		case <-watches:
		case <-time.After(2 * time.Second):
			t.Fatal("the watches did not go on once the server answered")
		}
	}
	for i := 0; i < 3; i++ {
		select {
		case <-workers:
		case <-time.After(2 * time.Second):
			t.Fatal("the gate did not open once the server answered")
		}
	}
	assert.True(t, <-serverFirst, "the watches go on first; the workers wait for Settle")
	assert.False(t, g.Down())

	// A call that started before the gate opened does not close it
	// again; one that starts after does.
	assert.True(t, g.Fail(down, started))
	assert.False(t, g.Down(), "a failure from before the recovery")
	up.Store(false)
	assert.True(t, g.Fail(down, time.Now()))
	assert.True(t, g.Down())

	// The server goes away again while the watches reconnect: they wait
	// again, and the gate opens only after the next recovery.
	g.Settle = func(context.Context) {
		if settled.Add(1) == 2 {
			up.Store(false)
			g.Fail(down, time.Now())
			go func() { time.Sleep(600 * time.Millisecond); up.Store(true) }()
		}
	}
	up.Store(true)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	g.Wait(cctx)
	require.NoError(t, cctx.Err(), "the gate opened after the second recovery")
	assert.Equal(t, int32(3), settled.Load(), "settled once per recovery")
	assert.False(t, g.Down())

	// A cancelled wait returns while the gate is closed.
	up.Store(false)
	assert.True(t, g.Fail(down, time.Now()))
	cctx2, cancel2 := context.WithCancel(ctx)
	cancel2()
	g.Wait(cctx2)
	g.WaitServer(cctx2)
	up.Store(true)
	g.Wait(ctx)
	assert.False(t, g.Down())
}

func TestWaitDelay(t *testing.T) {
	for _, tt := range []struct {
		first time.Duration
		waits int
		want  time.Duration
	}{
		{200 * time.Millisecond, 0, 200 * time.Millisecond},
		{200 * time.Millisecond, 1, 400 * time.Millisecond},
		{200 * time.Millisecond, 4, 3200 * time.Millisecond},
		{200 * time.Millisecond, 9, maxWait},
		{200 * time.Millisecond, 1000, maxWait},
		{time.Second, 5, 32 * time.Second},
		{time.Second, 6, maxWait},
		{5 * time.Minute, 3, 5 * time.Minute}, // above the cap: kept
	} {
		assert.Equal(t, tt.want, waitDelay(tt.first, tt.waits), "first %s, %d waits", tt.first, tt.waits)
	}
}

// Consecutive waits of a key back off; a timer, a success or an error ends
// the run; keys do not share a run.
func TestRequeueDelay(t *testing.T) {
	c := NewController("test", ReconcileFunc(func(context.Context, Key) (Result, error) { return Result{}, nil }))
	a, b := Key{Kind: "Runnable", NamespacedName: types.NamespacedName{Name: "a"}}, Key{Kind: "Runnable", NamespacedName: types.NamespacedName{Name: "b"}}
	wait := Result{RequeueAfter: 200 * time.Millisecond, Wait: true}
	var got []time.Duration
	for range 4 {
		got = append(got, c.requeueDelay(a, wait))
	}
	assert.Equal(t, []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond}, got)
	assert.Equal(t, 200*time.Millisecond, c.requeueDelay(b, wait), "another key waits from the start")
	assert.Equal(t, 5*time.Second, c.requeueDelay(a, Result{RequeueAfter: 5 * time.Second}), "a timer is kept as asked")
	assert.Equal(t, 200*time.Millisecond, c.requeueDelay(a, wait), "the timer ended the run of waits")
	assert.Equal(t, time.Duration(0), c.requeueDelay(a, Result{}))
	assert.Equal(t, 200*time.Millisecond, c.requeueDelay(a, wait))
	assert.Len(t, c.waits, 2)
	c.requeueDelay(a, Result{})
	c.requeueDelay(b, Result{})
	assert.Empty(t, c.waits, "nothing kept for keys that do not wait")
}

type recordingObserver struct {
	events []string
}

func (o *recordingObserver) Reconciled(c string, _ time.Duration, result string) {
	o.events = append(o.events, "reconciled "+c+" "+result)
}
func (o *recordingObserver) Working(c string, d int) {
	o.events = append(o.events, fmt.Sprintf("working %s %+d", c, d))
}
func (o *recordingObserver) Panicked(c string) { o.events = append(o.events, "panicked "+c) }

// TestObserverSeesPanics: a panicking reconcile is reported as a panic and
// an error, between a worker starting and ending it (the metrics
// controller_runtime_reconcile_panics_total and _active_workers).
func TestObserverSeesPanics(t *testing.T) {
	c := NewController("Test", ReconcileFunc(func(_ context.Context, k Key) (Result, error) {
		if k.Name == "bad" {
			panic("boom")
		}
		return Result{}, nil
	}))
	o := &recordingObserver{}
	c.Observer = o
	c.Enqueue(Key{Kind: "Test", NamespacedName: types.NamespacedName{Name: "bad"}})
	assert.True(t, c.processNext(context.Background()))
	c.Enqueue(Key{Kind: "Test", NamespacedName: types.NamespacedName{Name: "good"}})
	assert.True(t, c.processNext(context.Background()))
	c.Queue.ShutDown()
	assert.Equal(t, []string{
		"working Test +1", "panicked Test", "working Test -1", "reconciled Test error",
		"working Test +1", "working Test -1", "reconciled Test success",
	}, o.events)
}
