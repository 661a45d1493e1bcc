package reconciler

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/stamp"
	"kontinue.dev/kontinue/tracking"
)

// Options configure a Manager.
type Options struct {
	Workers int
	Resync  time.Duration
	// ShutdownGrace bounds how long in-flight reconciles may run after stop.
	ShutdownGrace time.Duration
	// KstatusConditions adds Reconciling and Stalled to owners' conditions
	// (kstatus). Off by default: Cartographer's status has exactly four
	// conditions, and tools comparing the whole list (its own suite does)
	// would see a difference.
	KstatusConditions bool
	// Helm bounds what helm templates can make Kontinue fetch: private
	// addresses and plain http are refused unless allowed here. The
	// manager's own helm engine has them; other managers are unaffected.
	Helm render.HelmOptions
	// MaxClients bounds the impersonating clients kept (one per service
	// account; stamp.DefaultMaxClients when 0).
	MaxClients int
	// RenderTimeout, when set, bounds each render below the engines' own
	// bound (render/bounds.go): tests make a render time out cheaply.
	RenderTimeout time.Duration
	// OnReconcile, when set, is told of every key a controller takes from
	// its queue (tests: which events wake which owner).
	OnReconcile func(Key)
}

// Manager wires Kontinue together: the tracker, the controllers and the
// routing of watch events to their queues.
type Manager struct {
	dyn     dynamic.Interface
	mapper  *tracking.Mapper
	tracker *tracking.Tracker
	clients *stamp.Clients
	w       *stamp.Writer // every write of a stamped object, and events
	opts    Options

	owners    map[string]*ownerReconciler // by owner kind
	chains    *chainReconciler
	runnables *runnableReconciler
	gate      *APIGate // one outage of the API server, for controllers and watches

	// blocked owners are re-reconciled when RBAC or discovery changes; they
	// are not retried on a timer, which would only repeat the failure.
	blockedMu sync.Mutex
	blocked   map[Key]blockCause
	// lastNews is when RBAC or discovery last changed, by cause; recheck is
	// set while a delayed second look for that cause is pending.
	lastNews map[blockCause]time.Time
	recheck  map[blockCause]bool

	synced   bool
	syncedMu sync.RWMutex

	tmplMu    sync.Mutex
	tmplCache map[string]*cachedTemplate
	optMu     sync.Mutex
	optCache  map[string]cachedOptions

	// OnApply, when set, is told of every apply (true) and every apply
	// skipped because the live object was up to date (false).
	OnApply func(applied bool)
	// engines replace the registered render engines for this manager: its
	// helm engine has its options (Options.Helm).
	engines map[string]render.Engine
	// OnEventDropped, when set, is told of each Normal event dropped
	// because its namespace's event budget was spent.
	OnEventDropped func(reason string)
	// OnStatusConflict, when set, is told of each status write (of an
	// owner, Runnable or chain kind) refused as a conflict.
	OnStatusConflict func(kind string)
}

// statusConflict reports a status write of kind refused as a conflict.
func (m *Manager) statusConflict(kind string) {
	if m.OnStatusConflict != nil {
		m.OnStatusConflict(kind)
	}
}

type blockCause int

const (
	blockedRBAC blockCause = iota + 1
	blockedDiscovery
)

// blockCauseOf is the one place a reconcile's key is found blocked: from
// the class of the failures its stamp Session saw (0: not blocked).
func blockCauseOf(s *stamp.Session) blockCause {
	switch f, ok := s.Blocked(); {
	case !ok:
		return 0
	case f == failure.Forbidden:
		return blockedRBAC
	case f == failure.NotServed:
		return blockedDiscovery
	}
	return 0
}

// NewManager builds a manager from a client config.
func NewManager(cfg *rest.Config, opts Options) (*Manager, error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	// One client-side budget for Kontinue's own requests and those of every
	// service account it impersonates (none with a negative QPS).
	cfg = stamp.SharedRateLimiter(cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		engines: map[string]render.Engine{render.FieldHelm: render.HelmWith(opts.Helm)},
		dyn:     dyn,
		mapper:  tracking.NewMapper(dc),
		clients: stamp.NewClients(cfg, opts.MaxClients),
		opts:    opts,
		owners:  map[string]*ownerReconciler{},
		blocked: map[Key]blockCause{},
	}
	// Events get their own client, with a rate limit of the same size but
	// its own: they are the most frequent writes, and must not slow down
	// stamping or status writes.
	evCfg := rest.CopyConfig(cfg)
	evCfg.RateLimiter = nil
	if evCfg.QPS <= 0 {
		// No client-side limit for stamping and status (the API server's
		// Priority and Fairness bounds them); events, which nobody waits
		// for, stay bounded so that a burst of them never competes.
		evCfg.QPS, evCfg.Burst = 50, 100
	}
	evDyn, err := dynamic.NewForConfig(evCfg)
	if err != nil {
		return nil, err
	}
	// Watches as an account are made under the tracker's lock: their users
	// (a Runnable's selector) check the account first (accountExists).
	m.tracker = tracking.New(dyn, m.clients.Unchecked, opts.Resync, m.route)
	// The many objects are cached as JSON; chains and templates, read in
	// bulk by every reconcile, stay decoded.
	m.tracker.PackWhen(func(k tracking.Key) bool {
		return k.Selector == StampedSelector || (k.Selector == "" && (k.GVR == WorkloadGVR || k.GVR == DeliverableGVR))
	})
	// Of service accounts Kontinue only needs to know which exist.
	m.tracker.SlimWhen(func(k tracking.Key) bool { return k.GVR == ServiceAccountGVR })
	m.clients.Exists = m.accountExists
	events := stamp.NewEvents(evDyn)
	events.Dropped = func(reason string) {
		if m.OnEventDropped != nil {
			m.OnEventDropped(reason)
		}
	}
	m.w = stamp.NewWriter(dyn, m.mapper, m.tracker, events, m.noteApply)
	idx := newIndex()
	for _, f := range []*Flavor{WorkloadFlavor, DeliverableFlavor} {
		m.owners[f.OwnerKind] = newOwnerReconciler(m, f, idx)
	}
	m.chains = newChainReconciler(m)
	m.runnables = newRunnableReconciler(m)
	gate := NewAPIGate(func(ctx context.Context) error {
		return dc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	})
	// Watches wait out an outage at the same gate, and reconnect before
	// the workers go on: reconciles after an outage read caches that
	// caught up.
	m.tracker.WaitOutages(gate)
	gate.Settle = m.tracker.AwaitReconnect
	m.gate = gate
	for _, c := range m.Controllers() {
		c.Gate = gate
		c.OnReconcile = opts.OnReconcile
	}
	return m, nil
}

// Clients is how many impersonating clients are kept (metrics, tests).
func (m *Manager) Clients() int { return m.clients.Len() }

// Tracker exposes the tracker (metrics, tests).
func (m *Manager) Tracker() *tracking.Tracker { return m.tracker }

// Controllers returns every controller (metrics).
func (m *Manager) Controllers() []*Controller {
	out := []*Controller{m.chains.ctrl, m.runnables.ctrl}
	for _, f := range []*Flavor{WorkloadFlavor, DeliverableFlavor} {
		out = append(out, m.owners[f.OwnerKind].ctrl)
	}
	return out
}

// permanentWatches are Kontinue's own kinds and what it must see to react.
func permanentWatches() []tracking.Key {
	keys := []tracking.Key{
		{GVR: WorkloadGVR}, {GVR: DeliverableGVR}, {GVR: SupplyChainGVR}, {GVR: DeliveryGVR},
		{GVR: RunTemplateGVR}, {GVR: CRDGVR}, {GVR: RunnableGVR}, {GVR: ServiceAccountGVR},
	}
	for _, gvr := range templateGVRByKind {
		keys = append(keys, tracking.Key{GVR: gvr})
	}
	for _, gvr := range RBACGVRs {
		keys = append(keys, tracking.Key{GVR: gvr})
	}
	return keys
}

// Synced reports whether the permanent caches have synced (readiness).
func (m *Manager) Synced() bool {
	m.syncedMu.RLock()
	defer m.syncedMu.RUnlock()
	return m.synced
}

// Run starts the watches, waits for Kontinue's own caches (at start only;
// workers never wait), then runs the controllers until ctx is done and they
// have drained.
func (m *Manager) Run(ctx context.Context) error {
	m.gate.Start(ctx)
	m.tracker.Start(ctx)
	keys := permanentWatches()
	for _, k := range keys {
		m.tracker.Ensure(k, tracking.Permanent)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		all := true
		for _, k := range keys {
			all = all && m.tracker.Synced(k)
		}
		if all {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("caches did not sync: %w", ctx.Err())
		case <-tick.C:
		}
	}
	m.syncedMu.Lock()
	m.synced = true
	m.syncedMu.Unlock()
	klog.InfoS("caches synced; starting controllers", "workers", m.opts.Workers)

	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		<-ctx.Done()
		grace := m.opts.ShutdownGrace
		if grace <= 0 {
			grace = 30 * time.Second
		}
		klog.InfoS("stopping: no new work; in-flight reconciles may finish", "grace", grace)
		time.AfterFunc(grace, cancel)
	}()
	var wg sync.WaitGroup
	for _, c := range m.Controllers() {
		wg.Add(1)
		go func(c *Controller) {
			defer wg.Done()
			c.Run(ctx, work, m.opts.Workers)
		}(c)
	}
	wg.Wait()
	m.w.Events.Shutdown()
	return nil
}

// route turns a watch event into queue keys. It runs on informer goroutines:
// it must not block, list a cache or marshal an object; work that needs to is
// handed to a worker as a key of its own (a chain or template key).
func (m *Manager) route(ev tracking.Event) {
	gvr := ev.Key.GVR
	m.runnables.route(ev) // Runnables, run templates, runs, selected objects
	if ev.Key.Selector == StampedSelector {
		m.routeStamped(ev)
		return
	}
	switch {
	case gvr == WorkloadGVR || gvr == DeliverableGVR:
		if ev.Type == tracking.Updated && !ownerChanged(ev.Old, ev.Obj) {
			return // our own status write, or nothing we read
		}
		f := flavorOfOwner(gvr)
		k := keyOf(f.OwnerKind, ev.Obj)
		if ev.Type == tracking.Updated && reconcileRequested(ev.Old, ev.Obj) {
			// A person asked for a reconcile now (`kontinue reconcile`):
			// whatever the owner waited for (RBAC, discovery, a backoff),
			// it is looked at at once, and a new failure backs off from
			// the start again.
			m.unblockOne(k)
			m.owners[f.OwnerKind].ctrl.Forget(k)
		}
		m.owners[f.OwnerKind].ctrl.Enqueue(k)
	case gvr == SupplyChainGVR || gvr == DeliveryGVR:
		if ev.Type == tracking.Updated && !specOrLabelsChanged(ev.Old, ev.Obj) {
			return
		}
		for _, o := range m.owners {
			if o.flavor.ChainGVR == gvr {
				k := keyOf(o.flavor.ChainKind, ev.Obj)
				m.chains.ctrl.Enqueue(k)
				o.ctrl.Enqueue(k) // the owner controller finds the owners concerned
			}
		}
	case templateKindByGVR[gvr] != "":
		kind := templateKindByGVR[gvr]
		for _, o := range m.owners {
			o.templateChanged(kind, ev.Obj.GetName())
		}
		m.chains.ctrl.Enqueue(keyOf(kind, ev.Obj)) // re-checks every chain
	case gvr == CRDGVR:
		m.crdChanged(ev)
	case gvr.Group == rbacGroupVersion.Group:
		m.unblock(blockedRBAC)
	case gvr == ServiceAccountGVR:
		// An account created or deleted: its owners and Runnables say so
		// (or write at last). Updates (its secrets) change nothing. The
		// first list at start is not news: every owner is reconciled then.
		if ev.Type != tracking.Updated && m.Synced() {
			m.runnables.ctrl.Enqueue(Key{Kind: kindServiceAccount, NamespacedName: types.NamespacedName{Namespace: ev.Obj.GetNamespace(), Name: ev.Obj.GetName()}})
		}
	}
}

// kindServiceAccount is the queue key of a service account created or
// deleted: a worker finds its owners and Runnables (accountChanged).
const kindServiceAccount = "ServiceAccount"

// accountExists reports whether the service account exists, from the
// cache of the permanent watch (synced before any worker runs). Kontinue
// writes nothing as an account it does not know: the API server does not
// check that an impersonated account exists, so a deleted account whose
// RoleBindings remain (or a permissive authorizer) would still write.
func (m *Manager) accountExists(namespace, name string) bool {
	return m.tracker.UID(tracking.Key{GVR: ServiceAccountGVR}, namespace, name) != ""
}

// accountChanged wakes the owners and Runnables that stamp as the account:
// the owners of the index (every owner records its account), the Runnables
// of its namespace that name it.
func (m *Manager) accountChanged(namespace, name string) {
	for _, k := range m.owners[WorkloadFlavor.OwnerKind].idx.ownersOfAccount(namespace, name) {
		m.enqueue(k)
	}
	rns, _ := m.tracker.List(tracking.Key{GVR: RunnableGVR}, namespace)
	for _, rn := range rns {
		sa, _, _ := unstructured.NestedString(rn.Object, "spec", "serviceAccountName")
		if sa == "" {
			sa = "default"
		}
		if sa == name {
			m.runnables.ctrl.Enqueue(keyOf(api.KindRunnable, rn))
		}
	}
}

// routeStamped sends an event about a stamped object to its owner: the
// one its controller reference names, in its own namespace, if that owner
// is the one in the cache (same UID). Labels alone decide nothing: anyone
// who may write an object can set them, and an object in another
// namespace carrying them must not wake (or keep busy) someone else's
// owner. The owner the object had before an update is told too: a hand
// edit must reach the owner that stamped the object, to be undone.
func (m *Manager) routeStamped(ev tracking.Event) {
	for _, obj := range []*unstructured.Unstructured{ev.Obj, ev.Old} {
		if obj == nil {
			continue
		}
		if k, ok := m.stampedBy(obj); ok {
			m.owners[k.Kind].ctrl.Enqueue(k)
		}
	}
}

// stampedBy is the owner that stamped obj: its controller reference names
// an owner kind, and the owner of that name in obj's namespace has that
// UID. A map lookup in the owners' cache, no listing: route may call it.
func (m *Manager) stampedBy(obj *unstructured.Unstructured) (Key, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return Key{}, false
	}
	o := m.owners[ref.Kind]
	if o == nil {
		return Key{}, false
	}
	if uid := m.tracker.UID(tracking.Key{GVR: o.flavor.OwnerGVR}, obj.GetNamespace(), ref.Name); uid == "" || uid != ref.UID {
		return Key{}, false
	}
	return Key{Kind: o.flavor.OwnerKind, NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}, true
}

func (m *Manager) crdChanged(ev tracking.Event) {
	m.mapper.Reset(true)
	if ev.Type == tracking.Deleted {
		group, _, _ := unstructured.NestedString(ev.Obj.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(ev.Obj.Object, "spec", "names", "plural")
		for _, user := range m.tracker.StopResource(schema.GroupResource{Group: group, Resource: plural}) {
			if k, ok := parseKey(user); ok {
				m.enqueue(k)
			}
		}
	}
	m.unblock(blockedDiscovery)
}

// An owner that blocks soon after news of its cause may have raced the
// news: it came while the owner was being reconciled (the unblock found
// nothing to release), or the API server had not acted on it yet (its RBAC
// cache and discovery lag the watch). Such owners get a second look after
// recheckDelay. Only real news opens the window, so this is bounded: at most
// a few extra reconciles per burst of news, never a timer loop.
const (
	newsWindow   = 5 * time.Second
	recheckDelay = 2 * time.Second // the mapper refreshes discovery at most this often
)

// block remembers that the owner or Runnable user waits for cause.
func (m *Manager) block(user Key, cause blockCause) {
	m.blockedMu.Lock()
	defer m.blockedMu.Unlock()
	m.blocked[user] = cause
	if m.recheck == nil {
		m.recheck = map[blockCause]bool{}
	}
	if time.Since(m.lastNews[cause]) < newsWindow && !m.recheck[cause] {
		m.recheck[cause] = true
		time.AfterFunc(recheckDelay, func() {
			m.blockedMu.Lock()
			m.recheck[cause] = false
			m.blockedMu.Unlock()
			m.release(cause)
		})
	}
}

func (m *Manager) unblockOne(user Key) {
	m.blockedMu.Lock()
	defer m.blockedMu.Unlock()
	delete(m.blocked, user)
}

// unblock is news of cause: the owners waiting for it are reconciled.
func (m *Manager) unblock(cause blockCause) {
	m.blockedMu.Lock()
	if m.lastNews == nil {
		m.lastNews = map[blockCause]time.Time{}
	}
	m.lastNews[cause] = time.Now()
	m.blockedMu.Unlock()
	m.release(cause)
}

// release enqueues the owners blocked on cause.
func (m *Manager) release(cause blockCause) {
	m.blockedMu.Lock()
	var users []Key
	for u, c := range m.blocked {
		if c == cause {
			users = append(users, u)
			delete(m.blocked, u)
		}
	}
	m.blockedMu.Unlock()
	for _, u := range users {
		m.enqueue(u)
	}
}

// enqueue sends an owner or Runnable key to its controller.
func (m *Manager) enqueue(k Key) {
	if o := m.owners[k.Kind]; o != nil {
		o.ctrl.Enqueue(k)
	}
	if k.Kind == api.KindRunnable {
		m.runnables.ctrl.Enqueue(k)
	}
}

// flavorOfOwner is the flavor whose owners live in gvr.
func flavorOfOwner(gvr schema.GroupVersionResource) *Flavor {
	if gvr == DeliverableGVR {
		return DeliverableFlavor
	}
	return WorkloadFlavor
}

// ownerChanged reports whether anything an owner's reconcile reads changed:
// anything but its status and bookkeeping metadata.
func ownerChanged(old, cur *unstructured.Unstructured) bool {
	if old == nil {
		return true
	}
	if old.GetGeneration() != cur.GetGeneration() ||
		!reflect.DeepEqual(old.GetLabels(), cur.GetLabels()) ||
		!reflect.DeepEqual(old.GetAnnotations(), cur.GetAnnotations()) ||
		(old.GetDeletionTimestamp() == nil) != (cur.GetDeletionTimestamp() == nil) {
		return true
	}
	return !reflect.DeepEqual(old.Object["spec"], cur.Object["spec"])
}

// reconcileRequested reports whether the reconcile request annotation
// changed.
func reconcileRequested(old, cur *unstructured.Unstructured) bool {
	return old != nil && old.GetAnnotations()[annotations.ReconcileRequest] != cur.GetAnnotations()[annotations.ReconcileRequest]
}

func specOrLabelsChanged(old, cur *unstructured.Unstructured) bool {
	return old == nil || old.GetGeneration() != cur.GetGeneration() ||
		!reflect.DeepEqual(old.GetLabels(), cur.GetLabels()) ||
		!reflect.DeepEqual(old.Object["spec"], cur.Object["spec"])
}
