package loop

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/fairq"
	"kontinue.dev/kontinue/reconciler/stamp"
	"kontinue.dev/kontinue/reconciler/wakes"
)

// A key is skipped only when every reason it was added for is a version of
// a stamped object that Kontinue wrote, judged when a worker takes it.
func TestOnlyEchoes(t *testing.T) {
	k := Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "app"}}
	for _, tt := range []struct {
		name  string
		wrote map[types.UID]string // versions Kontinue wrote (stamp.Echoes)
		adds  func(c *Controller, e *stamp.Echoes)
		want  bool
	}{
		{"no reason recorded (a timed look again): reconciled", map[types.UID]string{"a": "2"}, func(c *Controller, _ *stamp.Echoes) {}, false},
		{"its own write coming back: skipped", map[types.UID]string{"a": "2"},
			func(c *Controller, _ *stamp.Echoes) { c.wokeBy(k, "a", "2") }, true},
		{"the event came before the write's answer: judged at the take, skipped", nil,
			func(c *Controller, e *stamp.Echoes) { c.wokeBy(k, "a", "2"); e.Wrote("a", "2") }, true},
		{"another version of the object (its controller's status): reconciled", map[types.UID]string{"a": "2"},
			func(c *Controller, _ *stamp.Echoes) { c.wokeBy(k, "a", "3") }, false},
		{"one of two objects is news: reconciled", map[types.UID]string{"a": "2", "b": "5"},
			func(c *Controller, _ *stamp.Echoes) { c.wokeBy(k, "a", "2"); c.wokeBy(k, "b", "6") }, false},
		{"both objects its own writes: skipped", map[types.UID]string{"a": "2", "b": "5"},
			func(c *Controller, _ *stamp.Echoes) { c.wokeBy(k, "a", "2"); c.wokeBy(k, "b", "5") }, true},
		{"an edit of the owner as well: reconciled", map[types.UID]string{"a": "2"},
			func(c *Controller, _ *stamp.Echoes) { c.wokeBy(k, "a", "2"); c.Enqueue(k) }, false},
		{"an edit before the echo: reconciled", map[types.UID]string{"a": "2"},
			func(c *Controller, _ *stamp.Echoes) { c.Enqueue(k); c.wokeBy(k, "a", "2") }, false},
		{"a fan-out as well: reconciled", map[types.UID]string{"a": "2"},
			func(c *Controller, _ *stamp.Echoes) { c.EnqueueFanOut(k); c.wokeBy(k, "a", "2") }, false},
		{"a progress event as well (a run): reconciled", map[types.UID]string{"a": "2"},
			func(c *Controller, _ *stamp.Echoes) { c.wokeBy(k, "a", "2"); c.EnqueueProgress(k) }, false},
		{"more versions than kept: reconciled", map[types.UID]string{"a": "9"},
			func(c *Controller, _ *stamp.Echoes) {
				for range wakes.MaxVersions + 1 {
					c.wokeBy(k, "a", "9")
				}
			}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := stamp.NewEchoes()
			for uid, rv := range tt.wrote {
				e.Wrote(uid, rv)
			}
			c := NewController("Workload", nil)
			defer c.Queue.ShutDown()
			c.Echo = e.Back
			tt.adds(c, e)
			assert.Equal(t, tt.want, c.onlyEchoes(k))
			assert.False(t, c.onlyEchoes(k), "the reasons are taken: a second take has none")
		})
	}
}

// Through the loop: a key woken by its own write's event is not
// reconciled; a key that asked to be looked at again is, even when its
// own write's event wakes it first.
func TestLoopSkipsOwnWrites(t *testing.T) {
	k := Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "app"}}
	calls := make(chan Result, 10)
	next := make(chan Result, 10)
	c := NewController("Workload", ReconcileFunc(func(context.Context, Key) (Result, error) {
		var r Result
		select {
		case r = <-next:
		default:
		}
		calls <- r
		return r, nil
	}))
	e := stamp.NewEchoes()
	c.Echo = e.Back
	skipped := make(chan string, 10)
	c.OnEcho = func(name string) { skipped <- name }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, context.Background(), 1); close(done) }()
	defer func() { cancel(); <-done }()

	// A create: reconciled; it wrote version 2 of object a.
	next <- Result{}
	c.Enqueue(k)
	<-calls
	e.Wrote("a", "2")
	c.EnqueueStamped(k, "a", "2")
	assert.Equal(t, "Workload", <-skipped, "its own write's event is skipped")

	// A reconcile that asks to look again in 50 ms, and its write's event
	// comes first: the event is no news, the look again still happens.
	next <- Result{RequeueAfter: 50 * time.Millisecond}
	c.Enqueue(k)
	<-calls
	e.Wrote("a", "3")
	next <- Result{}
	c.EnqueueStamped(k, "a", "3")
	assert.Equal(t, "Workload", <-skipped, "its own write's event is no news")
	select {
	case <-calls:
	case <-time.After(10 * time.Second):
		t.Fatal("the key that asked to be looked at again was not")
	}
}

// A version known for Kontinue's own when its event comes adds no key to
// the queue; one whose write's answer comes after its event waits in the
// queue and is judged when a worker takes the key.
func TestEnqueueStampedDropsKnownEchoes(t *testing.T) {
	k := Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "app"}}
	e := stamp.NewEchoes()
	c := NewController("Workload", nil)
	defer c.Queue.ShutDown()
	c.Echo = e.Back

	e.Wrote("a", "2")
	c.EnqueueStamped(k, "a", "2")
	assert.Equal(t, 0, c.Queue.Len(), "the write's answer came first: nothing queued")
	assert.Equal(t, 0, e.Len(), "and the version is forgotten")

	c.EnqueueStamped(k, "a", "3")
	assert.Equal(t, 1, c.Queue.Len(), "the event came first: queued")
	e.Wrote("a", "3")
	assert.True(t, c.onlyEchoes(k), "judged at the take: an echo")

	e.Wrote("a", "4")
	c.EnqueueStamped(k, "a", "5")
	assert.Equal(t, 1, c.Queue.Len(), "another version is news")
	assert.False(t, c.onlyEchoes(k))
}

// A reconcile that asks to be looked at again later is not reconciled
// again at once for the echoes of its own writes that came in while it
// ran (they are judged as echoes); the look again still comes, even when
// it comes due while the key waits in the queue for such an echo.
func TestRequeueLeavesEchoesJudged(t *testing.T) {
	k := Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "app"}}
	busy := Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "busy"}}
	e := stamp.NewEchoes()
	calls := make(chan Key, 10)
	release := make(chan struct{})
	first := true
	var c *Controller
	c = NewController("Workload", ReconcileFunc(func(_ context.Context, key Key) (Result, error) {
		calls <- key
		switch {
		case key == busy:
			<-release
		case first:
			// Its write's event comes before the write's answer, while
			// it runs; then it asks to be looked at again.
			first = false
			c.EnqueueStamped(k, "a", "2")
			e.Wrote("a", "2")
			return Result{RequeueAfter: 200 * time.Millisecond}, nil
		}
		return Result{}, nil
	}))
	c.Echo = e.Back
	skipped := make(chan string, 10)
	c.OnEcho = func(name string) { skipped <- name }
	q := c.Queue.(*fairq.Queue[Key])
	timed := make(chan Key, 10)
	onTimer := q.OnTimer
	q.OnTimer = func(key Key) {
		if onTimer != nil {
			onTimer(key)
		}
		timed <- key
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, context.Background(), 1); close(done) }()
	defer func() { cancel(); <-done }()
	recv := func(ch <-chan Key, what string) Key {
		t.Helper()
		select {
		case got := <-ch:
			return got
		case <-time.After(10 * time.Second):
			t.Fatal(what)
		}
		return Key{}
	}

	c.Enqueue(k)
	require.Equal(t, k, recv(calls, "not reconciled"))
	select {
	case <-skipped:
	case got := <-calls:
		t.Fatalf("%s reconciled again at once for the echo of its own write", got)
	case <-time.After(10 * time.Second):
		t.Fatal("the echo was not judged")
	}
	require.Equal(t, k, recv(timed, "the look again did not come due"))
	require.Equal(t, k, recv(calls, "the look again was not reconciled"))

	// The look again comes due while the key waits for an echo (the one
	// worker is busy with another key).
	c.Queue.AddAfter(k, 100*time.Millisecond)
	c.Enqueue(busy)
	require.Equal(t, busy, recv(calls, "busy not taken"))
	c.EnqueueStamped(k, "a", "3")
	e.Wrote("a", "3")
	require.Equal(t, k, recv(timed, "the look again did not come due"))
	close(release)
	select {
	case got := <-calls:
		assert.Equal(t, k, got, "the look again is not lost in the echo's add")
	case <-skipped:
		t.Fatal("the look again was taken for an echo")
	case <-time.After(10 * time.Second):
		t.Fatal("the key was not taken")
	}
}
