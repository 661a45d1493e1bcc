package tracking

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// world serves informers from memory: a list per watch, then a watch
// stream the test feeds.
type world struct {
	mu       sync.Mutex
	objs     map[Key][]*unstructured.Unstructured
	watchers map[Key]*watch.FakeWatcher
	started  map[Key]int
}

func newWorld() *world {
	return &world{objs: map[Key][]*unstructured.Unstructured{}, watchers: map[Key]*watch.FakeWatcher{}, started: map[Key]int{}}
}

func (w *world) informers(k Key, resync time.Duration) cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started[k]++
	fw := watch.NewFakeWithChanSize(10, false)
	w.watchers[k] = fw
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			l := &unstructured.UnstructuredList{}
			l.SetResourceVersion("1")
			for _, o := range w.objs[k] {
				l.Items = append(l.Items, *o.DeepCopy())
			}
			return l, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
	}
	return cache.NewSharedIndexInformer(listThenWatch{lw}, &unstructured.Unstructured{}, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// listThenWatch tells the reflector to list, then watch (the in-memory
// watch does not stream an initial list).
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (w *world) watcher(k Key) *watch.FakeWatcher {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watchers[k]
}

func cm(ns, name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": name, "resourceVersion": rv,
			"managedFields": []any{map[string]any{"manager": "x"}}}}}
	return u
}

var (
	cms     = Key{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Selector: "kontinue.dev/stamped=true"}
	secrets = Key{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}}
)

func startTracker(t *testing.T, w *world) (*Tracker, chan Event) {
	t.Helper()
	events := make(chan Event, 100)
	tr := NewWith(w.informers, 0, func(e Event) { events <- e })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr.Start(ctx)
	return tr, events
}

func waitSynced(t *testing.T, tr *Tracker, k Key) {
	t.Helper()
	require.Eventually(t, func() bool { return tr.Synced(k) }, 5*time.Second, 5*time.Millisecond)
}

func TestHandleWatchesWhatOneReconcileUsed(t *testing.T) {
	w := newWorld()
	w.objs[cms] = []*unstructured.Unstructured{cm("a", "one", "1")}
	tr, _ := startTracker(t, w)

	h := tr.Begin("Workload/ns/app")
	h.Watch(cms)
	h.Watch(secrets)
	h.Done()
	waitSynced(t, tr, cms)
	assert.Equal(t, map[Key]int{cms: 1, secrets: 1}, tr.Active())
	assert.True(t, h.Watch(cms), "synced now")

	obj, synced := tr.Get(cms, "a", "one")
	require.True(t, synced)
	require.NotNil(t, obj)
	assert.NotContains(t, obj.Object["metadata"], "managedFields", "managed fields never reach the cache")
	missing, synced := tr.Get(cms, "a", "two")
	assert.True(t, synced)
	assert.Nil(t, missing, "absent, and the cache knows it")

	// The next reconcile uses only config maps: the secrets watch stops.
	h = tr.Begin("Workload/ns/app")
	h.Watch(cms)
	h.Done()
	assert.Equal(t, map[Key]int{cms: 1}, tr.Active())

	// Another user shares the watch; one leaving does not stop it.
	other := tr.Begin("Deliverable/ns/app")
	other.Watch(cms)
	other.Done()
	assert.Equal(t, map[Key]int{cms: 2}, tr.Active())
	tr.ReleaseAll("Workload/ns/app")
	tr.ReleaseAll("Workload/ns/app") // twice is harmless
	assert.Equal(t, map[Key]int{cms: 1}, tr.Active())
	assert.Equal(t, 1, w.started[cms], "one informer per watch, shared")
	tr.Begin("Deliverable/ns/app").Done()
	assert.Empty(t, tr.Active())
}

func TestGetBeforeSyncSaysSo(t *testing.T) {
	tr, _ := startTracker(t, newWorld())
	obj, synced := tr.Get(cms, "a", "one")
	assert.Nil(t, obj)
	assert.False(t, synced, "an untracked watch is not a proof of absence")
	_, synced = tr.List(cms, "")
	assert.False(t, synced)
}

func TestEventsAndList(t *testing.T) {
	w := newWorld()
	w.objs[cms] = []*unstructured.Unstructured{cm("a", "one", "1"), cm("b", "two", "1")}
	tr, events := startTracker(t, w)
	tr.Begin("u").Watch(cms)
	waitSynced(t, tr, cms)

	next := func() Event {
		select {
		case e := <-events:
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
		}
		return Event{}
	}
	seen := map[string]EventType{}
	for i := 0; i < 2; i++ {
		e := next()
		assert.Equal(t, cms, e.Key)
		seen[e.Obj.GetName()] = e.Type
	}
	assert.Equal(t, map[string]EventType{"one": Added, "two": Added}, seen)

	w.watcher(cms).Modify(cm("a", "one", "2"))
	e := next()
	assert.Equal(t, Updated, e.Type)
	assert.Equal(t, "1", e.Old.GetResourceVersion())
	assert.Equal(t, "2", e.Obj.GetResourceVersion())

	w.watcher(cms).Delete(cm("b", "two", "3"))
	e = next()
	assert.Equal(t, Deleted, e.Type)
	assert.Equal(t, "two", e.Obj.GetName())

	all, synced := tr.List(cms, "")
	assert.True(t, synced)
	assert.Len(t, all, 1)
	inA, _ := tr.List(cms, "a")
	assert.Len(t, inA, 1)
	inB, _ := tr.List(cms, "b")
	assert.Empty(t, inB)
	assert.Equal(t, 1, tr.CachedObjects())
}

func TestStopResourceReturnsItsUsers(t *testing.T) {
	tr, _ := startTracker(t, newWorld())
	for _, u := range []string{"Workload/ns/b", "Workload/ns/a", Permanent} {
		h := tr.Begin(u)
		h.Watch(cms)
		h.Done()
	}
	other := tr.Begin("Workload/ns/c")
	other.Watch(secrets)
	other.Done()
	users := tr.StopResource(cms.GVR.GroupResource())
	assert.Equal(t, []string{"Workload/ns/a", "Workload/ns/b"}, users, "sorted, without the permanent user")
	assert.Equal(t, map[Key]int{secrets: 1}, tr.Active())
}

func TestListControlledBy(t *testing.T) {
	owned := func(name, uid string, controller bool) *unstructured.Unstructured {
		u := cm("a", name, "1")
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Name: "w", UID: types.UID(uid), Controller: &controller}})
		return u
	}
	w := newWorld()
	w.objs[cms] = []*unstructured.Unstructured{owned("mine", "u1", true), owned("mine-too", "u1", true),
		owned("other", "u2", true), owned("not-controller", "u1", false), cm("a", "none", "1")}
	tr, _ := startTracker(t, w)
	_, synced := tr.ListControlledBy(cms, "u1")
	assert.False(t, synced, "no watch yet")
	tr.Begin("u").Watch(cms)
	waitSynced(t, tr, cms)
	got, synced := tr.ListControlledBy(cms, "u1")
	require.True(t, synced)
	var names []string
	for _, o := range got {
		names = append(names, o.GetName())
	}
	assert.ElementsMatch(t, []string{"mine", "mine-too"}, names)
	none, _ := tr.ListControlledBy(cms, "u3")
	assert.Empty(t, none)
}

// A watch as a service account whose client cannot be made never falls
// back to the tracker's own client: it does not sync, and Err says why.
func TestWatchAsAccountWithoutClientFails(t *testing.T) {
	tr := New(nil, nil, 0, func(Event) {})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr.Start(ctx)
	k := Key{GVR: secrets.GVR, Selector: "a=b", Namespace: "dev", As: "dev/runner"}
	assert.False(t, tr.Ensure(k, "Runnable/dev/r"))
	require.Eventually(t, func() bool { return tr.Err(k) != nil }, 5*time.Second, 5*time.Millisecond)
	assert.Contains(t, tr.Err(k).Error(), "no client for service account dev/runner")
	assert.False(t, tr.Synced(k))
	assert.Equal(t, "/v1, Resource=secrets{a=b} in dev as dev/runner", k.String())
	assert.Nil(t, tr.Err(secrets), "an untracked key has no error")
}

// EachJSON hands out each cached object as JSON, one at a time: a packed
// watch's decompressed into one buffer per scan, a plain watch's objects
// marshalled; the namespace index holds, and before the sync it says so.
func TestEachJSON(t *testing.T) {
	for _, packed := range []bool{false, true} {
		w := newWorld()
		w.objs[cms] = []*unstructured.Unstructured{cm("a", "one", "1"), cm("a", "two", "1"), cm("b", "three", "1")}
		tr, _ := startTracker(t, w)
		tr.PackWhen(func(Key) bool { return packed })
		assert.False(t, tr.EachJSON(cms, "", func([]byte) { t.Fatal("called before the sync") }))
		tr.Begin("u").Watch(cms)
		waitSynced(t, tr, cms)

		names := func(ns string) []string {
			var out []string
			require.True(t, tr.EachJSON(cms, ns, func(doc []byte) {
				var u unstructured.Unstructured
				require.NoError(t, u.UnmarshalJSON(doc))
				assert.Nil(t, u.Object["metadata"].(map[string]any)["managedFields"], "the cached, compacted object")
				out = append(out, u.GetNamespace()+"/"+u.GetName())
			}))
			return out
		}
		assert.ElementsMatch(t, []string{"a/one", "a/two", "b/three"}, names(""), "packed=%v", packed)
		assert.ElementsMatch(t, []string{"b/three"}, names("b"), "packed=%v", packed)
		if packed {
			var bufs []*byte
			tr.EachJSON(cms, "", func(doc []byte) { bufs = append(bufs, &doc[0]) })
			require.Len(t, bufs, 3)
			assert.Same(t, bufs[0], bufs[1], "one buffer per scan, not an allocation per object")
			assert.Same(t, bufs[0], bufs[2])
		}
	}
}

// TestSyncedWaitsForTheHandler: a watch is Synced once its handler has
// seen the whole first list, not merely once the cache holds it: what
// the handler keeps from events (the Manager's book of owners) is complete
// when Synced says so.
func TestSyncedWaitsForTheHandler(t *testing.T) {
	w := newWorld()
	w.objs[cms] = []*unstructured.Unstructured{cm("a", "one", "1"), cm("a", "two", "1")}
	release, seen := make(chan struct{}), make(chan string, 2)
	tr := NewWith(w.informers, 0, func(e Event) {
		seen <- e.Obj.GetName()
		<-release
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr.Start(ctx)
	tr.Ensure(cms, "test")
	<-seen // the handler holds the first object
	require.Eventually(t, func() bool { _, synced := tr.List(cms, ""); return synced }, 5*time.Second, 5*time.Millisecond)
	assert.False(t, tr.Synced(cms), "the cache holds the list, the handler has not seen it")
	close(release)
	waitSynced(t, tr, cms)
	assert.Len(t, seen, 1, "the second object was handled before Synced")
}

// BenchmarkWatchUsers reports the heap the tracker keeps per user (an
// owner) holding two watches, over 10,000 users: what it needs to release
// an owner's watches. A fresh tracker each time (maps keep their room),
// the earlier ones kept (none is freed while measuring).
func BenchmarkWatchUsers(b *testing.B) {
	const n = 10000
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("Workload/ns-%d/app-%d", i%100, i)
	}
	var per float64
	var keep []*Tracker
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for b.Loop() {
		w := newWorld()
		tr := NewWith(w.informers, 0, func(Event) {})
		tr.Start(ctx)
		tr.Ensure(cms, Permanent)
		tr.Ensure(secrets, Permanent)
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		for _, u := range users {
			h := tr.Begin(u)
			h.Watch(cms)
			h.Watch(secrets)
			h.Done()
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		per = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
		keep = append(keep, tr)
	}
	goruntime.KeepAlive(keep)
	b.ReportMetric(per, "B/user")
}

// TestReleaseFencesTheHandler: when Release stops a watch, it returns only
// once the handler is done with the event it was handling, and the
// handler is given no event of that watch afterwards (what it kept of
// them can be dropped for good then).
func TestReleaseFencesTheHandler(t *testing.T) {
	w := newWorld()
	w.objs[cms] = []*unstructured.Unstructured{cm("a", "one", "1"), cm("a", "two", "1")}
	in, release := make(chan string, 2), make(chan struct{})
	tr := NewWith(w.informers, 0, func(e Event) {
		in <- e.Obj.GetName()
		<-release
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr.Start(ctx)
	tr.Ensure(cms, "test")
	require.Equal(t, "one", <-in) // the handler holds the first object
	released := make(chan struct{})
	go func() {
		tr.Release(cms, "test")
		close(released)
	}()
	select {
	case <-released:
		t.Fatal("Release returned while the handler was handling an event of the watch")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-released
	assert.Empty(t, in, "no event after the watch stopped")
	assert.Empty(t, tr.Active())
}

// TestTrimWith: a trimmed watch caches, and gives its handler, only what
// its function keeps of each object.
func TestTrimWith(t *testing.T) {
	w := newWorld()
	o := cm("a", "one", "1")
	o.Object["data"] = map[string]any{"keep": "x", "drop": "y"}
	w.objs[cms] = []*unstructured.Unstructured{o}
	tr, events := startTracker(t, w)
	tr.TrimWith(func(k Key) func(map[string]any) map[string]any {
		if k != cms {
			return nil
		}
		return func(obj map[string]any) map[string]any {
			data, _ := obj["data"].(map[string]any)
			return map[string]any{"metadata": obj["metadata"], "data": map[string]any{"keep": data["keep"]}}
		}
	})
	tr.Ensure(cms, "test")
	waitSynced(t, tr, cms)
	ev := <-events
	assert.Equal(t, map[string]any{"keep": "x"}, ev.Obj.Object["data"])
	got, _ := tr.Get(cms, "a", "one")
	require.NotNil(t, got)
	assert.Equal(t, map[string]any{"keep": "x"}, got.Object["data"])
	assert.Equal(t, "1", got.GetResourceVersion())
	assert.Nil(t, got.Object["metadata"].(map[string]any)["managedFields"])
}

// A watch of one object by its name is a watch of its own, whose users an
// event names (Users): who to tell when it changes.
func TestWatchByName(t *testing.T) {
	w := newWorld()
	tr, _ := startTracker(t, w)
	one := Key{GVR: cms.GVR, Namespace: "a", Name: "blocker"}
	assert.Equal(t, "/v1, Resource=configmaps named blocker in a", one.String())
	assert.Empty(t, tr.Users(one), "not watched")

	for _, u := range []string{"Workload/a/x", "Workload/a/y"} {
		h := tr.Begin(u)
		h.Watch(one)
		h.Done()
	}
	assert.ElementsMatch(t, []string{"Workload/a/x", "Workload/a/y"}, tr.Users(one))
	assert.Equal(t, 1, w.started[one])
	tr.Begin("Workload/a/x").Done() // no longer refused: let go
	assert.Equal(t, []string{"Workload/a/y"}, tr.Users(one))
	tr.ReleaseAll("Workload/a/y")
	assert.Empty(t, tr.Users(one))
	assert.Empty(t, tr.Active())
}
