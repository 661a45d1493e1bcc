package loop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

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

// TestControllerQueueOrder: a controller's queue serves an owner's own
// event before fan-out and namespaces in turn; UseFIFO (--fair-queue=false)
// brings back one FIFO.
func TestControllerQueueOrder(t *testing.T) {
	key := func(ns, name string) Key {
		return Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}
	for _, tt := range []struct {
		name string
		fifo bool
		want []string
	}{
		{"fair", false, []string{"noisy/edit", "quiet/edit", "noisy/1", "quiet/1", "noisy/2"}},
		{"fifo", true, []string{"noisy/1", "noisy/2", "quiet/1", "noisy/edit", "quiet/edit"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			c := NewController("Workload", ReconcileFunc(func(_ context.Context, k Key) (Result, error) {
				got = append(got, k.Namespace+"/"+k.Name)
				return Result{}, nil
			}))
			if tt.fifo {
				c.UseFIFO()
			}
			c.EnqueueFanOut(key("noisy", "1")) // a template edit re-renders noisy's and quiet's owners
			c.EnqueueFanOut(key("noisy", "2"))
			c.EnqueueFanOut(key("quiet", "1"))
			c.Enqueue(key("noisy", "edit")) // then people edit one each
			c.Enqueue(key("quiet", "edit"))
			for range 5 {
				assert.True(t, c.processNext(context.Background()))
			}
			c.Queue.ShutDown()
			assert.Equal(t, tt.want, got)
		})
	}
}
