package tracking

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var errAway = errors.New("connection refused")

// fakeOutage is away until back is closed.
type fakeOutage struct {
	fails atomic.Int32
	back  chan struct{}
}

func (f *fakeOutage) Fail(err error, _ time.Time) bool {
	// As the gate does (gate.Unreachable): a 503 is unreachable too.
	if !errors.Is(err, errAway) && !apierrors.IsServiceUnavailable(err) {
		return false
	}
	f.fails.Add(1)
	return true
}

func (f *fakeOutage) WaitServer(ctx context.Context) {
	select {
	case <-f.back:
	case <-ctx.Done():
	}
}

func TestThroughOutage(t *testing.T) {
	o := &fakeOutage{back: make(chan struct{})}
	tr := NewWith(nil, 0, nil)
	tr.WaitOutages(o)
	ctx := context.Background()

	// Another error goes back to the reflector at once.
	_, err := throughOutage(tr, ctx, "list x", func(context.Context) (int, error) { return 0, errors.New("forbidden") })
	assert.EqualError(t, err, "forbidden")
	assert.Equal(t, 0, tr.Reconnecting())

	// So does an answer, even one that says the service is unavailable
	// (an aggregated API that is down): the server is there.
	tctx, cancelT := context.WithTimeout(ctx, time.Second)
	defer cancelT()
	_, err = throughOutage(tr, tctx, "watch metrics", func(context.Context) (int, error) {
		return 0, apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	})
	assert.True(t, apierrors.IsServiceUnavailable(err))
	assert.Equal(t, int32(0), o.fails.Load(), "an answer is no outage")
	assert.NoError(t, tctx.Err(), "returned at once")

	// An unreachable server: the call waits, counted, and is made again
	// once the server answers.
	var calls atomic.Int32
	done := make(chan int)
	go func() {
		v, err := throughOutage(tr, ctx, "watch x", func(context.Context) (int, error) {
			if calls.Add(1) == 1 {
				return 0, errAway
			}
			return 7, nil
		})
		assert.NoError(t, err)
		done <- v
	}()
	require.Eventually(t, func() bool { return tr.Reconnecting() == 1 }, time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, int32(1), calls.Load(), "no retry while the server is away")
	settled := make(chan struct{})
	go func() { tr.AwaitReconnect(ctx); close(settled) }()
	select {
	case <-settled:
		t.Fatal("AwaitReconnect returned while a watch waits")
	case <-time.After(50 * time.Millisecond):
	}
	close(o.back)
	assert.Equal(t, 7, <-done)
	<-settled
	assert.Equal(t, 0, tr.Reconnecting())
	assert.Equal(t, int32(1), o.fails.Load())

	// A cancelled call returns its error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = throughOutage(tr, cctx, "watch y", func(context.Context) (int, error) { return 0, errAway })
	assert.ErrorIs(t, err, errAway)
	// Without an outage to wait at: once.
	_, err = throughOutage[int](nil, ctx, "watch z", func(context.Context) (int, error) { return 0, errAway })
	assert.ErrorIs(t, err, errAway)
}

// TestRefused: only a missing right is logged as a refusal (once per
// watch); an outage, a removed kind or an expired version pass quietly.
func TestRefused(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewForbidden(gr, "", errors.New(`User "system:serviceaccount:kontinue-system:kontinue" cannot watch resource "configmaps"`)), true},
		{fmt.Errorf("failed to list: %w", apierrors.NewForbidden(gr, "", errors.New("no"))), true},
		{apierrors.NewUnauthorized("token expired"), true},
		{apierrors.NewNotFound(gr, ""), false},
		{apierrors.NewResourceExpired("too old resource version"), false},
		{apierrors.NewServiceUnavailable("away"), false},
		{errAway, false},
	} {
		assert.Equal(t, tc.want, refused(tc.err), tc.err.Error())
	}
}
