package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	var probesMu sync.Mutex
	var probes []time.Time // when each probe ran
	var up atomic.Bool
	g := New(func(context.Context) error {
		probesMu.Lock()
		probes = append(probes, time.Now())
		probesMu.Unlock()
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
	// (gateProbeFirst, doubling up to gateProbeMax). Load only lengthens
	// the gaps between probes, so the test checks them from below: a
	// second prober, or a missing backoff, would put two probes closer.
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
	probesMu.Lock()
	seen := append([]time.Time(nil), probes...)
	probesMu.Unlock()
	require.GreaterOrEqual(t, len(seen), 2, "the prober probes while the server is away")
	const slack = 20 * time.Millisecond // timers fire late, never early; clock granularity
	assert.GreaterOrEqual(t, seen[0].Sub(started), gateProbeFirst-slack, "the first probe waits its delay")
	delay := gateProbeFirst
	for i := 1; i < len(seen); i++ {
		delay = min(2*delay, gateProbeMax)
		assert.GreaterOrEqual(t, seen[i].Sub(seen[i-1]), delay-slack, "one prober, whoever waits: probe %d came %s after the one before", i, seen[i].Sub(seen[i-1]))
	}
	assert.LessOrEqual(t, gateProbeMax, 500*time.Millisecond, "probes often enough to notice the server within half a second")
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
