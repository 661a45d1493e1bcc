package render

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/api"
)

// One namespace takes at most its share of render slots; a render past it
// waits until one is given back, or until its deadline.
func TestNamespaceSlots(t *testing.T) {
	s := &nsSlots{max: 2, m: map[string]*nsSem{}}
	ctx := context.Background()
	assert.True(t, s.take(ctx, "a"))
	assert.True(t, s.take(ctx, "a"))
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	assert.False(t, s.take(short, "a"), "a's share is taken")
	assert.True(t, s.take(ctx, "b"), "b's is not")
	got := make(chan bool)
	go func() { got <- s.take(ctx, "a") }()
	s.give("a")
	assert.True(t, <-got, "a waiting render gets the slot given back")
	s.give("a")
	s.give("a")
	s.give("b")
	assert.Empty(t, s.m)
}

// Renders of one namespace hold at most its share of the render slots,
// whatever the engine: another namespace renders meanwhile, and the
// namespace's next render waits a while, then fails as retryable.
func TestRenderSlotsPerNamespace(t *testing.T) {
	// a's renders must hold their slots until every check below is done:
	// their deadline is far past what the checks take on a loaded machine
	// (with 3 s, CI saw them end before the last check, whose render then
	// got a slot), and a render waits for a slot a short while.
	setLimits(t, 15*time.Second, 0, 0)
	oldWait := queueWait
	queueWait = 300 * time.Millisecond
	t.Cleanup(func() { queueWait = oldWait })
	freshGoTemplateCache(t)
	freshYttCache(t)
	defer waitFlights(t)
	in := func(ns string) Context {
		tc := testContext()
		owner := testOwner()
		owner["metadata"].(map[string]any)["namespace"] = ns
		tc["workload"], tc["deliverable"] = owner, owner
		return tc
	}
	// One list, ranged over in both loops: a spin that allocates next to
	// nothing (`until` in the inner loop made a new list each time, and on
	// a loaded machine the child's garbage outgrew its 256 MiB before the
	// deadline: the render failed on memory, not time).
	spin := `{{ $l := until 60000 }}{{ range $l }}{{ range $l }}{{ end }}{{ end }}{apiVersion: v1, kind: ConfigMap, metadata: {name: x}}`
	var freedMu sync.Mutex
	freed := map[string]int{}
	defer OnNamespaceSlotFreed(func(ns string) { freedMu.Lock(); freed[ns]++; freedMu.Unlock() })()
	errs := make(chan error, nsShare)
	for i := range nsShare {
		go func() {
			tc := in("a")
			tc["params"] = map[string]any{"i": int64(i)}
			_, err := GoTemplate().Render(context.Background(), &api.TemplateSpec{GoTemplate: spin}, tc)
			errs <- err
		}()
	}
	require.Eventually(t, func() bool { return len(renderSlots) == nsShare }, 5*time.Second, 10*time.Millisecond)

	objs, err := GoTemplate().Render(context.Background(), &api.TemplateSpec{GoTemplate: "{apiVersion: v1, kind: ConfigMap, metadata: {name: fine}}"}, in("b"))
	require.NoError(t, err)
	assert.Equal(t, "fine", objs[0].GetName())
	_, err = Ytt().Render(context.Background(), &api.TemplateSpec{Ytt: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\n"}, in("b"))
	require.NoError(t, err)
	assert.Len(t, errs, 0, "namespace b rendered while a's templates spun")

	for _, e := range []Engine{GoTemplate(), Ytt()} {
		spec := &api.TemplateSpec{GoTemplate: "{apiVersion: v1, kind: ConfigMap, metadata: {name: waits}}"}
		if e.Name() == YttName {
			spec = &api.TemplateSpec{Ytt: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: waits}\n"}
		}
		start := time.Now()
		_, err = e.Render(context.Background(), spec, in("a"))
		require.Error(t, err, e.Name())
		assert.Contains(t, err.Error(), "namespace [a] already has 2 renders running", e.Name())
		assert.True(t, Retryable(err), e.Name())
		assert.Equal(t, "a", BusyNamespace(err), "the namespace whose freed slot wakes the owner (%s)", e.Name())
		// It waited queueWait, not until its deadline: the reconcile
		// waiting for it does not hold a worker that long.
		assert.Less(t, time.Since(start), limits.timeout-time.Second, e.Name())
	}
	for range nsShare {
		err := <-errs
		require.Error(t, err)
		assert.Contains(t, err.Error(), "goTemplate rendering did not finish within 15s")
	}
	// Each spin gave namespace a's slot back, and said so.
	require.Eventually(t, func() bool { freedMu.Lock(); defer freedMu.Unlock(); return freed["a"] >= nsShare }, 5*time.Second, 10*time.Millisecond)
	assert.Empty(t, BusyNamespace(errors.New("other")), "not a busy namespace")
}
