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
	var probes atomic.Int32
	var up atomic.Bool
	g := NewAPIGate(func(context.Context) error {
		probes.Add(1)
		if up.Load() {
			return nil
		}
		return down
	})
	ctx := context.Background()

	// Open: Wait returns at once; errors that are answers do not close it.
	g.Wait(ctx)
	assert.False(t, g.Fail(errors.New("rejected"), time.Now()))
	assert.False(t, g.Down())
	var nilGate *APIGate
	nilGate.Wait(ctx)
	assert.False(t, nilGate.Fail(down, time.Now()), "no gate: every key backs off on its own")

	// The first unreachable error closes it; later ones only report.
	started := time.Now()
	assert.True(t, g.Fail(down, started))
	assert.True(t, g.Fail(down, started))
	assert.True(t, g.Down())

	// Workers wait; one probes with backoff (0.5 s, then 1 s, ...).
	done := make(chan struct{}, 3)
	for i := 0; i < 3; i++ {
		go func() { g.Wait(ctx); done <- struct{}{} }()
	}
	time.Sleep(1200 * time.Millisecond)
	assert.Len(t, done, 0, "workers wait while the server is away")
	assert.LessOrEqual(t, probes.Load(), int32(2), "one prober, backing off (0.5 s, 1 s)")
	up.Store(true)
	for i := 0; i < 3; i++ {
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatal("the gate did not open once the server answered")
		}
	}
	assert.False(t, g.Down())

	// A reconcile that started before the gate opened does not close it
	// again; one that starts after does.
	assert.True(t, g.Fail(down, started))
	assert.False(t, g.Down(), "a failure from before the recovery")
	assert.True(t, g.Fail(down, time.Now()))
	assert.True(t, g.Down())

	// A cancelled wait returns, and leaves the probing to the next waiter.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	g.Wait(cctx)
	up.Store(true)
	g.Wait(ctx)
	assert.False(t, g.Down())
}
