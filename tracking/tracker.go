// Package tracking owns Kontinue's watches. It starts one dynamic informer per
// (resource, label filter) when someone needs it, and stops it when its last
// user lets go. Users are named (an owner key such as "Workload/ns/name"), so
// releasing twice is harmless and never stops someone else's watch.
package tracking

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Key identifies one watch: a resource, an optional label selector, and
// optionally a namespace and a service account. A watch with As lists and
// watches as that service account ("namespace/name"), so that its cache
// holds only what the account may read; with Namespace, only that
// namespace: what a tenant asks Kontinue to watch never reaches further
// than the tenant's own rights. A watch with Name holds at most that one
// object (a field selector on metadata.name): a watch on one name, for
// the few objects that matter by their name alone (an object that blocks
// an owner's write: its removal or hand over is news).
type Key struct {
	GVR       schema.GroupVersionResource
	Selector  string
	Namespace string
	As        string
	Name      string
}

func (k Key) String() string {
	s := k.GVR.String()
	if k.Selector != "" {
		s += "{" + k.Selector + "}"
	}
	if k.Name != "" {
		s += " named " + k.Name
	}
	if k.Namespace != "" {
		s += " in " + k.Namespace
	}
	if k.As != "" {
		s += " as " + k.As
	}
	return s
}

// EventType says what happened to an object.
type EventType int

// Event types.
const (
	Added EventType = iota
	Updated
	Deleted
)

// Event is delivered for every add, real update (resourceVersion changed) and
// delete seen by any tracked informer.
type Event struct {
	Key  Key
	Type EventType
	Obj  *unstructured.Unstructured
	Old  *unstructured.Unstructured // Updated only
}

// Handler receives events. It must not block: enqueue and return.
type Handler func(Event)

// Permanent is the user name for watches that live as long as the tracker.
const Permanent = "<permanent>"

type entry struct {
	informer cache.SharedIndexInformer
	handler  cache.ResourceEventHandlerRegistration // nil: not registered
	cancel   context.CancelFunc
	users    map[string]struct{}

	// fence: the handler delivers under its read lock, and not once
	// stopped; stopping takes the write lock, so that when the call that
	// stopped a watch returns, its handler is done with it (what the
	// handler kept of its events can then be dropped for good).
	fence   sync.RWMutex
	stopped bool

	errMu   sync.Mutex
	lastErr error // the last list or watch error
}

// InformerFunc makes the informer of one watch. The informer must index
// by namespace (cache.NamespaceIndex).
type InformerFunc func(k Key, resync time.Duration) cache.SharedIndexInformer

// Impersonate returns a client acting as the service account
// namespace/name (the watches of keys with As).
type Impersonate func(namespace, name string) (dynamic.Interface, error)

// DynamicInformers makes informers that list and watch through client,
// filtered by the key's label selector and namespace; keys with As go
// through as's client instead (nil as: such watches fail, never falling
// back to client's rights).
func DynamicInformers(client dynamic.Interface, as Impersonate) InformerFunc {
	return dynamicInformers(client, as, nil)
}

func dynamicInformers(client dynamic.Interface, as Impersonate, t *Tracker) InformerFunc {
	return func(k Key, resync time.Duration) cache.SharedIndexInformer {
		indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
		cl := client
		if k.As != "" {
			ns, name, _ := strings.Cut(k.As, "/")
			var err error
			if as == nil {
				err = fmt.Errorf("no client for service account %s", k.As)
			} else {
				cl, err = as(ns, name)
			}
			if err != nil {
				return failingInformer(err, resync, indexers)
			}
		}
		sel := k.Selector
		if t != nil && t.serverSelector != nil {
			sel = t.serverSelector(k)
		}
		var field string
		if k.Name != "" {
			field = fields.OneTermEqualSelector("metadata.name", k.Name).String()
		}
		return dynamicinformer.NewFilteredDynamicInformer(gated(cl, t, k.String()), k.GVR, k.Namespace, resync, indexers,
			func(o *metav1.ListOptions) { o.LabelSelector, o.FieldSelector = sel, field }).Informer()
	}
}

// failingInformer never syncs: every list says err (Tracker.Err).
func failingInformer(err error, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, err },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, err },
	}
	return cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, resync, indexers)
}

// Tracker manages informers on demand.
type Tracker struct {
	informer InformerFunc
	resync   time.Duration
	handler  Handler
	// pack says which watches cache their objects as compressed JSON
	// (packed.go); slim, which keep only their objects' names and UIDs.
	pack func(Key) bool
	slim func(Key) bool
	// trim, when it returns a function for a watch, is what of each
	// object its cache keeps (TrimWith).
	trim func(Key) func(map[string]any) map[string]any
	// serverSelector, when set, is the label selector the API server
	// filters a watch by (FilterWith).
	serverSelector func(Key) string

	mu      sync.Mutex
	ctx     context.Context
	entries map[Key]*entry
	byUser  map[string]keySet

	// outage, when set, is where lists and watches wait while the API
	// server is away; waiting counts those that wait or retry.
	outage  Outage
	waiting atomic.Int64
}

// New returns a tracker whose informers watch through client (keys with
// As: through as); call Start before Ensure.
func New(client dynamic.Interface, as Impersonate, resync time.Duration, h Handler) *Tracker {
	t := NewWith(nil, resync, h)
	t.informer = dynamicInformers(client, as, t)
	return t
}

// NewWith returns a tracker whose informers newInformer makes.
func NewWith(newInformer InformerFunc, resync time.Duration, h Handler) *Tracker {
	return &Tracker{
		informer: newInformer,
		resync:   resync,
		handler:  h,
		entries:  map[Key]*entry{},
		byUser:   map[string]keySet{},
	}
}

// PackWhen makes the watches f picks cache their objects as compressed
// JSON, decoded on every read (packed.go): for the many objects (owners,
// stamped objects), not for those read in bulk on every reconcile (chains,
// templates). Call before Start.
func (t *Tracker) PackWhen(f func(Key) bool) { t.pack = f }

// SlimWhen makes the watches f picks cache only their objects' name,
// namespace, UID and resourceVersion (slim): for a kind of which Kontinue
// only needs to know what exists (ServiceAccounts). Call before Start.
func (t *Tracker) SlimWhen(f func(Key) bool) { t.slim = f }

// TrimWith makes the watches for which f returns a function cache only
// what that function keeps of each object (a new map it builds from the
// object's, which it must not change; apiVersion and kind are added),
// packed (PackWhen): for a watch
// that a handler reads a few fields of (the other shards' owners, for
// roll-outs). Call before Start.
func (t *Tracker) TrimWith(f func(Key) func(map[string]any) map[string]any) { t.trim = f }

// FilterWith makes the API server filter each watch by f(key) instead of
// key.Selector: a shard's replica narrows the watches of owners and of
// stamped objects to its shard, while every reader still names the watch
// by its key (one key, one cache). f must only narrow. Call before Start.
func (t *Tracker) FilterWith(f func(Key) string) { t.serverSelector = f }

// Handle collects the watches one user needs during one reconcile: Watch
// for each one as it is used, Done at the end. Watches the user held
// before but did not use this time are released then.
type Handle struct {
	t    *Tracker
	user string
	keys map[Key]struct{}
}

// Begin starts a reconcile of user.
func (t *Tracker) Begin(user string) *Handle {
	return &Handle{t: t, user: user, keys: map[Key]struct{}{}}
}

// Watch starts or joins the watch k and reports whether its cache has
// synced. It never waits.
func (h *Handle) Watch(k Key) bool {
	h.keys[k] = struct{}{}
	return h.t.Ensure(k, h.user)
}

// Glance starts or joins the watch k for this reconcile only and reports
// whether its cache has synced: unless Watch is called for k too, Done
// releases it (a look at a kind no step uses any more).
func (h *Handle) Glance(k Key) bool {
	return h.t.Ensure(k, h.user)
}

// User is the user the handle watches for.
func (h *Handle) User() string { return h.user }

// Done commits the watches used since Begin as all the user needs.
func (h *Handle) Done() {
	keys := make([]Key, 0, len(h.keys))
	for k := range h.keys {
		keys = append(keys, k)
	}
	h.t.Commit(h.user, keys)
}

// Start records the context that bounds every informer's life.
func (t *Tracker) Start(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ctx = ctx
}

// Ensure adds user to the users of k, starting its informer if needed, and
// reports whether the informer's cache has synced. It never waits.
func (t *Tracker) Ensure(k Key, user string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.ensureLocked(k)
	e.users[user] = struct{}{}
	t.byUser[user] = t.byUser[user].with(k)
	return e.informer.HasSynced()
}

// Commit sets the complete set of watches user needs: keys it used before
// but not now are released. Call it at the end of every reconcile.
func (t *Tracker) Commit(user string, keys []Key) {
	fence(t.commit(user, keys))
}

// commit is Commit under the lock; it returns the watches it stopped.
func (t *Tracker) commit(user string, keys []Key) []*entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	want := make(keySet, 0, len(keys))
	for _, k := range keys {
		want = want.with(k)
		t.ensureLocked(k).users[user] = struct{}{}
	}
	var stopped []*entry
	for _, h := range t.byUser[user] {
		if !want.has(h.Value()) {
			stopped = t.releaseLocked(h.Value(), user, stopped)
		}
	}
	if len(want) == 0 {
		delete(t.byUser, user)
	} else {
		t.byUser[user] = want
	}
	return stopped
}

// ReleaseAll drops every watch of user (the owner is gone).
func (t *Tracker) ReleaseAll(user string) { t.Commit(user, nil) }

// Release drops one watch of user. When the watch stops, its handler has
// returned from its last event when Release returns (and Commit,
// StopResource): none of them may be called by the handler for the watch
// it stops.
func (t *Tracker) Release(k Key, user string) {
	t.mu.Lock()
	stopped := t.releaseLocked(k, user, nil)
	t.dropLocked(user, k)
	t.mu.Unlock()
	fence(stopped)
}

// fence waits for the handlers of stopped watches to return from the
// event they deliver, and stops them delivering more.
func fence(stopped []*entry) {
	for _, e := range stopped {
		e.fence.Lock()
		e.stopped = true
		e.fence.Unlock()
	}
}

// StopResource stops every informer of a group/resource, whatever its users
// (its CRD was deleted: a live informer would relist a 404 forever), and
// returns the users that depended on it so that they can be re-reconciled.
func (t *Tracker) StopResource(gr schema.GroupResource) []string {
	t.mu.Lock()
	var users []string
	var stopped []*entry
	defer func() { fence(stopped) }() // after the unlock below
	defer t.mu.Unlock()
	for k, e := range t.entries {
		if k.GVR.GroupResource() != gr {
			continue
		}
		for u := range e.users {
			if u != Permanent {
				users = append(users, u)
			}
			t.dropLocked(u, k)
		}
		e.cancel()
		stopped = append(stopped, e)
		delete(t.entries, k)
		klog.V(2).InfoS("stopped watch: resource removed", "watch", k.String())
	}
	sort.Strings(users)
	return users
}

// Get reads one object from the cache of k. synced is false while the
// informer is still listing (the caller must not conclude "absent" then);
// a key that is not tracked reports synced false.
func (t *Tracker) Get(k Key, namespace, name string) (obj *unstructured.Unstructured, synced bool) {
	item, synced := t.item(k, namespace, name)
	if item == nil {
		return nil, synced
	}
	u, _ := unpack(item)
	return u, true
}

// UID reads the UID of one cached object without decoding it ("": absent,
// or the cache has not synced).
func (t *Tracker) UID(k Key, namespace, name string) types.UID {
	item, _ := t.item(k, namespace, name)
	if m, ok := metaOf(item); ok {
		return m.GetUID()
	}
	return ""
}

// item is the cached item of one object as the informer holds it (nil:
// absent, or the cache has not synced).
func (t *Tracker) item(k Key, namespace, name string) (item any, synced bool) {
	t.mu.Lock()
	e := t.entries[k]
	t.mu.Unlock()
	if e == nil || !e.informer.HasSynced() {
		return nil, false
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	item, exists, err := e.informer.GetStore().GetByKey(key)
	if err != nil || !exists {
		return nil, true
	}
	return item, true
}

// List returns the cached objects of k (all namespaces when namespace is "").
func (t *Tracker) List(k Key, namespace string) (objs []*unstructured.Unstructured, synced bool) {
	t.mu.Lock()
	e := t.entries[k]
	t.mu.Unlock()
	if e == nil || !e.informer.HasSynced() {
		return nil, false
	}
	var items []any
	if namespace == "" {
		items = e.informer.GetStore().List()
	} else {
		items, _ = e.informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	}
	objs = make([]*unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		if u, ok := unpack(it); ok {
			objs = append(objs, u)
		}
	}
	return objs, true
}

// EachJSON calls fn with the JSON of each cached object of k (all
// namespaces when namespace is ""), one at a time, and reports whether the
// cache has synced. doc is valid until fn returns (the next object is
// decompressed into the same buffer): fn must not keep it. For scans of
// every owner (a chain's selector): List would decode them all at once, a
// second copy of the cache at its decoded size (10,000 Workloads: ~150
// MiB), and the scan marshal them back.
func (t *Tracker) EachJSON(k Key, namespace string, fn func(doc []byte)) (synced bool) {
	t.mu.Lock()
	e := t.entries[k]
	t.mu.Unlock()
	if e == nil || !e.informer.HasSynced() {
		return false
	}
	var items []any
	if namespace == "" {
		items = e.informer.GetStore().List()
	} else {
		items, _ = e.informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	}
	buf := getScratch()
	b := *buf
	for _, it := range items {
		if doc, ok := jsonOf(it, b); ok {
			fn(doc)
			b = doc[:0] // ours: reused for the next
		}
	}
	putScratch(buf, b)
	return true
}

// controllerIndex indexes cached objects by the UID of their controller
// reference, so that an owner finds what it controls without walking every
// object of the kind: per-reconcile work stays independent of the
// cluster's size.
const controllerIndex = "controller"

func controllerUID(obj any) ([]string, error) {
	o, ok := metaOf(obj)
	if !ok {
		return nil, nil
	}
	for _, r := range o.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return []string{string(r.UID)}, nil
		}
	}
	return nil, nil
}

// ListControlledBy returns the cached objects of k whose controller
// reference names uid; synced is false while the informer has not synced.
func (t *Tracker) ListControlledBy(k Key, uid types.UID) (objs []*unstructured.Unstructured, synced bool) {
	t.mu.Lock()
	e := t.entries[k]
	t.mu.Unlock()
	if e == nil || !e.informer.HasSynced() {
		return nil, false
	}
	items, _ := e.informer.GetIndexer().ByIndex(controllerIndex, string(uid))
	objs = make([]*unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		if u, ok := unpack(it); ok {
			objs = append(objs, u)
		}
	}
	return objs, true
}

// Err is the last list or watch error of k's informer (nil: none yet, or
// k is not tracked): why a watch does not sync, e.g. its service account
// may not list the kind; after it synced, why its cache may be stale (a
// re-list refused once the account lost its rights). An error stays until
// the informer stops: callers that act on it drop the watch.
func (t *Tracker) Err(k Key) error {
	t.mu.Lock()
	e := t.entries[k]
	t.mu.Unlock()
	if e == nil {
		return nil
	}
	e.errMu.Lock()
	defer e.errMu.Unlock()
	return e.lastErr
}

// Synced reports whether the informer of k has synced and its handler has
// seen every object of the first list: what the handler keeps from the
// events (the Manager's book of owners for roll-outs) is complete.
func (t *Tracker) Synced(k Key) bool {
	t.mu.Lock()
	e := t.entries[k]
	t.mu.Unlock()
	return e != nil && e.informer.HasSynced() && (e.handler == nil || e.handler.HasSynced())
}

// WaitSynced waits until the watches of keys have synced, or ctx is done.
// It looks every 10 ms: the start waits on it, and a look is a few map
// reads.
func (t *Tracker) WaitSynced(ctx context.Context, keys []Key) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if !slices.ContainsFunc(keys, func(k Key) bool { return !t.Synced(k) }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Active returns the keys of the running informers and their user counts.
func (t *Tracker) Active() map[Key]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[Key]int, len(t.entries))
	for k, e := range t.entries {
		out[k] = len(e.users)
	}
	return out
}

// Users returns the users of the watch k (none when it does not run):
// who an event of a watch that names no owner concerns. A map lookup, for
// event handlers.
func (t *Tracker) Users(k Key) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[k]
	if e == nil {
		return nil
	}
	out := make([]string, 0, len(e.users))
	for u := range e.users {
		out = append(out, u)
	}
	return out
}

// CachedObjects counts the objects held by all informers.
func (t *Tracker) CachedObjects() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.entries {
		n += len(e.informer.GetStore().ListKeys())
	}
	return n
}

func (t *Tracker) ensureLocked(k Key) *entry {
	if e, ok := t.entries[k]; ok {
		return e
	}
	if t.ctx == nil {
		panic("tracking: Ensure before Start") // programming error, not input
	}
	inf := t.informer(k, t.resync)
	var trim func(map[string]any) map[string]any
	if t.trim != nil {
		trim = t.trim(k)
	}
	switch {
	case trim != nil:
		_ = inf.SetTransform(trimmed(trim))
	case t.slim != nil && t.slim(k):
		_ = inf.SetTransform(slim)
	case t.pack != nil && t.pack(k):
		_ = inf.SetTransform(pack)
	default:
		_ = inf.SetTransform(compact)
	}
	// Added before the informer runs (it refuses indexers afterwards).
	_ = inf.AddIndexers(cache.Indexers{controllerIndex: controllerUID})
	ctx, cancel := context.WithCancel(t.ctx)
	e := &entry{informer: inf, cancel: cancel, users: map[string]struct{}{}}
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		e.errMu.Lock()
		repeated := e.lastErr != nil && e.lastErr.Error() == err.Error()
		e.lastErr = err
		e.errMu.Unlock()
		if refused(err) && !repeated {
			// A right missing from RBAC: not the passing noise of an
			// outage or a removed kind, and nothing else would say it
			// when only the watch is refused (the informer re-lists, so
			// its objects arrive late, at each retry). Once per message.
			klog.ErrorS(err, "watch refused: its objects are seen only when the informer lists again", "watch", k.String())
			return
		}
		klog.V(1).InfoS("watch error", "watch", k.String(), "err", err.Error())
	})
	e.handler, _ = inf.AddEventHandler(t.handlerFor(k, e))
	t.entries[k] = e
	go inf.RunWithContext(ctx)
	klog.V(2).InfoS("started watch", "watch", k.String())
	return e
}

// refused is true for an error that says the identity of a list or watch
// lacks the right (RBAC), which no retry fixes.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}

// keySet is the watches one user holds: a short list (a reconcile uses a
// few) of handles to one shared copy of each Key, 8 bytes each where a
// map per user cost ~900 bytes (10,000 owners: 9 MiB of the steady heap).
type keySet []unique.Handle[Key]

func (s keySet) has(k Key) bool { return slices.Contains(s, unique.Make(k)) }

// with returns s with k, appended if it is not there.
func (s keySet) with(k Key) keySet {
	if h := unique.Make(k); !slices.Contains(s, h) {
		return append(s, h)
	}
	return s
}

// dropLocked removes k from the watches of user.
func (t *Tracker) dropLocked(user string, k Key) {
	s, ok := t.byUser[user]
	if !ok {
		return
	}
	h := unique.Make(k)
	if s = slices.DeleteFunc(s, func(x unique.Handle[Key]) bool { return x == h }); len(s) == 0 {
		delete(t.byUser, user)
		return
	}
	t.byUser[user] = s
}

// releaseLocked drops user from k's users, and returns stopped with k's
// entry added when that stopped the watch (to fence once unlocked).
func (t *Tracker) releaseLocked(k Key, user string, stopped []*entry) []*entry {
	e, ok := t.entries[k]
	if !ok {
		return stopped
	}
	delete(e.users, user)
	if len(e.users) == 0 {
		e.cancel()
		delete(t.entries, k)
		klog.V(2).InfoS("stopped watch: no users left", "watch", k.String())
		return append(stopped, e)
	}
	return stopped
}

func (t *Tracker) handlerFor(k Key, e *entry) cache.ResourceEventHandler {
	deliver := func(ev Event) {
		e.fence.RLock()
		defer e.fence.RUnlock()
		if !e.stopped {
			t.handler(ev)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := unpack(obj); ok {
				deliver(Event{Key: k, Type: Added, Obj: u})
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			om, ok1 := metaOf(oldObj)
			nm, ok2 := metaOf(newObj)
			if !ok1 || !ok2 || om.GetResourceVersion() == nm.GetResourceVersion() {
				return // a resync: nothing changed
			}
			o, ok1 := unpack(oldObj)
			n, ok2 := unpack(newObj)
			if ok1 && ok2 {
				deliver(Event{Key: k, Type: Updated, Obj: n, Old: o})
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := unpack(obj); ok {
				deliver(Event{Key: k, Type: Deleted, Obj: u})
			}
		},
	}
}
