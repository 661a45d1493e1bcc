package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/blocked"
	"kontinue.dev/kontinue/reconciler/dora"
	"kontinue.dev/kontinue/reconciler/gate"
	"kontinue.dev/kontinue/reconciler/history"
	"kontinue.dev/kontinue/reconciler/owner"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/shard"
	"kontinue.dev/kontinue/reconciler/spans"
	"kontinue.dev/kontinue/reconciler/specs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/verify/check"
	"kontinue.dev/kontinue/tracking"
)

// Options configure a Manager.
type Options struct {
	Workers int
	// FIFOQueue gives every controller client-go's single FIFO queue
	// instead of the fair one (to compare; --fair-queue=false).
	FIFOQueue bool
	Resync    time.Duration
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
	// Shard is the shard this manager serves (api.ShardLabel; "": owners
	// without the label): its watches of owners and stamped objects select
	// only the shard's (shard.go).
	Shard string
	// OnReconcile, when set, is told of every key a controller takes from
	// its queue (tests: which events wake which owner).
	OnReconcile func(Key)
	// HistoryRevisions is how many input revisions each owner's history
	// keeps (reconciler/history): 0 the default, negative none.
	HistoryRevisions int
	// Spans, when set, is told of each owner's status write: the
	// OpenTelemetry spans of what ended (reconciler/spans).
	Spans func(o spans.Owner, prev, next []st.Resource)
	// Attest, when set, adds signed attestations to owners' histories
	// (attest.Signer): it needs the history on.
	Attest history.Extras
	// Written, when set, is told of every owner's status write
	// (notifications: notify.Hook). It must only enqueue.
	Written func(owner.Written)
	// Leases is where the shards' Leases are: a roll-out does not wait for
	// the owners of a shard no live Lease serves (shard/served.go).
	Leases LeaseOptions
	// Verify configures the verification of steps' inputs (verify.go).
	Verify VerifyOptions
}

// VerifyOptions configure the verification of steps' inputs.
type VerifyOptions struct {
	// Key is Kontinue's attestation key: the kontinue rule checks its
	// statements with it (nil: that rule refuses).
	Key *attest.Key
	// Transport reaches registries (nil: the default).
	Transport http.RoundTripper
	// Options bound the verifier (check.Options).
	Options check.Options
	// OnDecision is told of each decision (metrics).
	OnDecision func(outcome string, took time.Duration)
	// OnRefused is told of each input a step newly refused (metrics).
	OnRefused func(chain, step, rule string)
}

// LeaseOptions say where the shards' Leases are (shard.LeaseOptions).
type LeaseOptions = shard.LeaseOptions

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
	presence  *shard.Presence // the shards served (nil: not known)
	runnables *runnableReconciler
	gate      *gate.APIGate // one outage of the API server, for controllers and watches

	// blocked owners and Runnables wait for RBAC or discovery news.
	blocked *blocked.Keys[Key]
	// slotWait: owners waiting for their namespace's render slots.
	slotWait *slotWaiters

	synced   bool
	syncedMu sync.RWMutex

	verifier  *check.Runner     // steps' inputs against their chains' policies (verify.go)
	templates *specs.Templates  // decoded templates, compiled options
	schemas   *schemas          // the owner kinds' served schemas (schemas.go)
	history   *history.Recorder // owners' histories (nil: none kept)

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
	// OnInputSetEnded, when set, is told of each input set of a step that
	// succeeded (with its lead time, negative when its start is unknown), failed
	// or was superseded, once its owner's status says so.
	OnInputSetEnded func(chain, step, outcome string, lead time.Duration)
	// OnChainDelivered, when set, is told of each end-to-end lead time
	// (st.ChainLeadTimes) an owner's status write shows.
	OnChainDelivered func(chain string, lead time.Duration)
	// OnDeployment, when set, is told of each DORA deployment an owner's
	// status write shows (reconciler/dora): of kind, on chain, in
	// namespace; owner is the owner's name when it opted in to series of
	// its own (dora.OwnerAnnotation), else empty.
	OnDeployment func(chain, namespace, kind, owner string, d dora.Deployment)
	dora         *dora.Observer
	// OnForeign, when set, is told of each object of another shard a
	// sharded watch delivered (none while the API server filters).
	OnForeign func()
	// OnFight, when set, is told of each write Kontinue stopped because
	// another writer sets a field back after each of its writes
	// (stamp.Fights).
	OnFight func()
}

// noteApply counts applies and skipped no-op applies (metrics).
func (m *Manager) noteApply(applied bool) {
	if m.OnApply != nil {
		m.OnApply(applied)
	}
}

// statusConflict reports a status write of kind refused as a conflict.
func (m *Manager) statusConflict(kind string) {
	if m.OnStatusConflict != nil {
		m.OnStatusConflict(kind)
	}
}

// inputSetsEnded reports what the provenance of an owner's steps says
// ended between the status it read and the one it wrote (metrics).
func (m *Manager) inputSetsEnded(chain string, prev, next []st.Resource) {
	if m.OnInputSetEnded != nil {
		for _, t := range st.Transitions(prev, next) {
			m.OnInputSetEnded(chain, t.Step, strings.ToLower(t.Outcome), t.LeadTime)
		}
	}
	if m.OnChainDelivered != nil {
		for _, d := range st.ChainLeadTimes(prev, next) {
			m.OnChainDelivered(chain, d)
		}
	}
}

// NewManager builds a manager from a client config.
func NewManager(cfg *rest.Config, opts Options) (*Manager, error) {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	// One client-side budget for Kontinue's own requests and those of every
	// service account it impersonates (none with a negative QPS).
	cfg = stamp.SharedRateLimiter(cfg)
	dyn, err := tracking.NewDynamic(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if opts.Attest != nil && opts.HistoryRevisions < 0 {
		return nil, errors.New("attestations are kept in the owners' history ConfigMaps: turn the history on")
	}
	m := &Manager{
		engines: map[string]render.Engine{render.FieldHelm: render.HelmWith(opts.Helm)},
		dyn:     dyn,
		mapper:  tracking.NewMapper(dc),
		clients: stamp.NewClients(cfg, opts.MaxClients),
		opts:    opts,
		history: history.ForRevisions(opts.HistoryRevisions),
		dora:    dora.NewObserver(),

		owners: map[string]*ownerReconciler{},
	}
	if m.history != nil && opts.Attest != nil {
		m.history.Extra, m.history.Merge = opts.Attest.Extra, opts.Attest.Merge
	}
	m.verifier = m.newVerifier()
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
	evDyn, err := tracking.NewDynamic(evCfg)
	if err != nil {
		return nil, err
	}
	// Watches as an account are made under the tracker's lock: their users
	// (a Runnable's selector) check the account first (accountExists).
	m.tracker = tracking.New(dyn, m.clients.Unchecked, opts.Resync, m.route)
	// The many objects are cached as compressed JSON; chains and templates, read in
	// bulk by every reconcile, stay decoded.
	m.tracker.PackWhen(func(k tracking.Key) bool {
		return k.Selector == api.StampedSelector || (k.Selector == "" && (k.GVR == api.WorkloadGVR || k.GVR == api.DeliverableGVR))
	})
	// Each shard's replica caches only its owners and what they stamped.
	m.tracker.FilterWith(func(k tracking.Key) string { return shard.Selector(opts.Shard, k) })
	// Of service accounts Kontinue only needs to know which exist, and of
	// an object watched by its name (a write's blocker) that it changed.
	m.tracker.SlimWhen(func(k tracking.Key) bool { return k.GVR == ServiceAccountGVR || k.Name != "" })
	m.clients.Exists = m.accountExists
	events := stamp.NewEvents(evDyn)
	events.Dropped = func(reason string) {
		if m.OnEventDropped != nil {
			m.OnEventDropped(reason)
		}
	}
	m.w = stamp.NewWriter(dyn, m.mapper, m.tracker, events, m.noteApply)
	m.w.Shard = opts.Shard
	m.w.Fights.Declared = func() {
		if m.OnFight != nil {
			m.OnFight()
		}
	}
	m.templates = specs.NewTemplates(m.tracker)
	m.schemas = newSchemas(m.tracker)
	m.blocked = blocked.New(m.enqueueFanOut)
	m.slotWait = &slotWaiters{wake: func(k Key) {
		if o := m.owners[k.Kind]; o != nil {
			o.edited(k)
		}
	}}
	idx := newIndex()
	for _, f := range []*api.Flavor{api.WorkloadFlavor, api.DeliverableFlavor} {
		m.owners[f.OwnerKind] = newOwnerReconciler(m, f, idx)
	}
	if m.presence, err = shard.NewPresence(m.tracker, cfg, opts.Leases, opts.Shard, func() { m.chains.enqueueAll() }); err != nil {
		return nil, err
	}
	m.chains = newChainReconciler(m)
	// ...and the other shards' owners, for roll-outs, trimmed (chain/route.go).
	m.tracker.TrimWith(m.chains.rec.Trim)
	m.runnables = newRunnableReconciler(m)
	g := gate.New(func(ctx context.Context) error {
		return dc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	})
	// Watches wait out an outage at the same gate, and reconnect before
	// the workers go on: reconciles after an outage read caches that
	// caught up.
	m.tracker.WaitOutages(g)
	g.Settle = m.tracker.AwaitReconnect
	m.gate = g
	for _, c := range m.Controllers() {
		if opts.FIFOQueue {
			c.UseFIFO()
		}
		c.Gate = g
		c.OnReconcile = opts.OnReconcile
	}
	for _, o := range m.owners {
		o.ctrl.Echo = m.w.Echoes.Back
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
	for _, f := range []*api.Flavor{api.WorkloadFlavor, api.DeliverableFlavor} {
		out = append(out, m.owners[f.OwnerKind].ctrl)
	}
	return out
}

// permanentWatches are Kontinue's own kinds and what it must see to react.
func permanentWatches() []tracking.Key {
	keys := []tracking.Key{
		{GVR: api.WorkloadGVR}, {GVR: api.DeliverableGVR}, {GVR: api.SupplyChainGVR}, {GVR: api.DeliveryGVR},
		{GVR: api.RunTemplateGVR}, {GVR: CRDGVR}, {GVR: api.RunnableGVR}, {GVR: ServiceAccountGVR},
	}
	for _, gvr := range specs.TemplateGVRs() {
		keys = append(keys, tracking.Key{GVR: gvr})
	}
	for _, gvr := range RBACGVRs {
		keys = append(keys, tracking.Key{GVR: gvr})
	}
	return keys
}

// primeStorage asks the API server for one object of each custom kind
// Kontinue watches from the start, all at once, before the watches start.
// The API server makes a custom resource's storage on the first request for
// it, and until that storage's watch cache has filled it refuses watches
// with 429 and "Retry-After: 1", which client-go obeys: on a fresh or
// restarted API server, Kontinue's first start waited a second for the kinds
// nobody had asked for yet (Deliverables, Runnables in a cluster without
// them). A plain list is answered from etcd while that cache fills, so it
// does not wait and starts the filling a few milliseconds before the watch
// asks. Failures do not matter here: the watches report them.
func (m *Manager) primeStorage(ctx context.Context, keys []tracking.Key) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, k := range keys {
		if k.GVR.Group != api.Group {
			continue // built in: its storage exists with the API server
		}
		wg.Add(1)
		go func(gvr schema.GroupVersionResource) {
			defer wg.Done()
			_, _ = m.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		}(k.GVR)
	}
	wg.Wait()
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
	m.primeStorage(ctx, keys)
	for _, k := range keys {
		m.tracker.Ensure(k, tracking.Permanent)
	}
	if err := m.tracker.WaitSynced(ctx, keys); err != nil {
		return fmt.Errorf("caches did not sync: %w", err)
	}
	m.syncedMu.Lock()
	m.synced = true
	m.syncedMu.Unlock()
	klog.InfoS("caches synced; starting controllers", "workers", m.opts.Workers)

	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer m.slotWait.watch()()
	m.runVerifier(work)
	if m.presence != nil {
		// This replica's shard is served while its controllers run.
		serving, stopServing := context.WithCancel(context.WithoutCancel(ctx))
		released := m.presence.Start(serving)
		defer func() { stopServing(); <-released; m.presence.Stop() }()
	}
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
