// Package dashboard serves a live picture of chains and their owners: an
// HTML page embedded in the binary (no build step, nothing fetched from the
// internet) fed by server-sent events. One set of informers per process,
// started with the caller's identity, feeds every viewer: viewers never
// make the process poll the API server. What the page shows of an owner is
// cli/view's model, the one `kontinue get` prints.
//
// `kontinue dashboard` serves it with the kubeconfig's user; the controller
// serves it read-only (--dashboard-bind-address) as a configured
// ServiceAccount. Either way the page shows what that identity may list,
// and says plainly which kinds it may not.
package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/api"
)

// ReconcileFunc asks for a reconcile of an owner (Workload or Deliverable)
// and returns the value it set on the request annotation.
type ReconcileFunc func(ctx context.Context, ownerKind, namespace, name string) (string, error)

// RolloutFunc pauses, resumes or undoes (verb) the roll-out of a chain
// (ClusterSupplyChain or ClusterDelivery) and says what it did.
type RolloutFunc func(ctx context.Context, verb, chainKind, name string) (string, error)

// Options configure a Server.
type Options struct {
	// Namespace limits the owners shown to one namespace ("": all, which
	// needs rights to list them cluster-wide).
	Namespace string
	// Identity says in the page whose rights it reads with, when the
	// API server cannot tell (SelfSubjectReview).
	Identity string
	// Reconcile backs the page's "reconcile now" button; nil makes the
	// dashboard read-only (no button, the POST is refused).
	Reconcile ReconcileFunc
	// Rollout backs a chain's pause, resume and undo buttons; nil: no
	// buttons, the POST is refused (the controller's read-only page).
	Rollout RolloutFunc
	// LocalOnly refuses requests whose Host is not localhost or an IP
	// address: `kontinue dashboard` listens on loopback with the caller's
	// credentials, and must not answer a site that rebinds its name there.
	LocalOnly bool
}

// KindState is one resource the dashboard watches, and whether it could list it.
type KindState struct {
	Kind       string `json:"kind"`
	Resource   string `json:"resource"`
	Namespaced bool   `json:"namespaced"`
	// Synced is true once the first list arrived; Error is the last list
	// or watch error while not synced, or a refusal after it (forbidden),
	// until the API server accepts a list or watch again.
	Synced bool   `json:"synced"`
	Error  string `json:"error,omitempty"`
	// Forbidden is true when the identity may not list the kind.
	Forbidden bool `json:"forbidden,omitempty"`

	gvr      schema.GroupVersionResource
	informer cache.SharedIndexInformer
}

func gvr(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: resource}
}

// Server holds the informers and the viewers.
type Server struct {
	dyn  dynamic.Interface
	opts Options

	kinds []*KindState // workloads, deliverables, chains, deliveries, runnables

	mu     sync.Mutex
	owners map[string]Entry      // by ownerKey
	sent   map[string][32]byte   // hash of the last event sent for an owner, by ownerKey
	chains map[string]view.Chain // by view.ChainKey, counts not set
	counts map[string]string     // last counts sent (owners, Ready, roll-out waves), by view.ChainKey
	// chainsTimer is the pending send of the chain list, chainsForce
	// whether a chain itself changed since the last one.
	chainsTimer *time.Timer
	chainsForce bool
	who         string // the identity, as the API server names it
	subs        map[chan []byte]struct{}
}

// New makes a server reading with dyn.
func New(dyn dynamic.Interface, opts Options) *Server {
	s := &Server{dyn: dyn, opts: opts, owners: map[string]Entry{}, sent: map[string][32]byte{}, chains: map[string]view.Chain{},
		counts: map[string]string{}, subs: map[chan []byte]struct{}{}}
	for _, k := range []*KindState{
		{Kind: api.KindWorkload, Resource: "workloads", Namespaced: true},
		{Kind: api.KindDeliverable, Resource: "deliverables", Namespaced: true},
		{Kind: api.KindClusterSupplyChain, Resource: "clustersupplychains"},
		{Kind: api.KindClusterDelivery, Resource: "clusterdeliveries"},
		{Kind: api.KindRunnable, Resource: "runnables", Namespaced: true},
	} {
		k.gvr = gvr(k.Resource)
		ns := ""
		if k.Namespaced {
			ns = opts.Namespace
		}
		k.informer = s.newInformer(k, ns)
		// A reader without list rights sees the kind marked, not a
		// failure: the informer keeps retrying (with backoff), so rights
		// granted later show up without a restart.
		_ = k.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { s.failed(k, err) })
		var handler func(obj any, deleted bool)
		switch k.Resource {
		case "workloads", "deliverables":
			handler = s.onOwner
		case "clustersupplychains", "clusterdeliveries":
			handler = s.onChain
		case "runnables":
			handler = s.onRunnable
		}
		_, _ = k.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { handler(obj, false) },
			UpdateFunc: func(_, obj any) { handler(obj, false) },
			DeleteFunc: func(obj any) { handler(obj, true) },
		})
		s.kinds = append(s.kinds, k)
	}
	return s
}

// newInformer is dynamicinformer's informer for k, except that a list or
// watch the API server accepts tells the kind is readable: rights granted
// again after a refusal clear the refusal even when no object changed
// (the reflector calls the error handler on failures only).
func (s *Server) newInformer(k *KindState, namespace string) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list, err := s.dyn.Resource(k.gvr).Namespace(namespace).List(ctx, o)
			if err == nil {
				s.readable(k)
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := s.dyn.Resource(k.gvr).Namespace(namespace).Watch(ctx, o)
			if err == nil {
				s.readable(k)
			}
			return w, err
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, s.dyn),
		&unstructured.Unstructured{}, cache.SharedIndexInformerOptions{ObjectDescription: k.gvr.String()})
}

// failed records a list or watch error of k's informer.
func (s *Server) failed(k *KindState, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	forbidden := apierrors.IsForbidden(err)
	if k.Synced && !forbidden {
		return // a watch that ended; the reflector resumes it
	}
	if msg := err.Error(); msg != k.Error || forbidden != k.Forbidden {
		k.Error, k.Forbidden = msg, forbidden
		s.broadcastLocked("kinds", s.kindsLocked())
	}
}

// readable clears k's error: the API server just accepted a list or watch.
func (s *Server) readable(k *KindState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k.Error != "" || k.Forbidden {
		k.Error, k.Forbidden = "", false
		s.broadcastLocked("kinds", s.kindsLocked())
	}
}

// Run starts the informers and serves events until ctx ends.
func (s *Server) Run(ctx context.Context) {
	for _, k := range s.kinds {
		go k.informer.Run(ctx.Done())
		go s.watchSync(ctx, k)
	}
	go s.whoAmI(ctx)
	<-ctx.Done()
	s.mu.Lock()
	for c := range s.subs {
		close(c)
		delete(s.subs, c)
	}
	s.mu.Unlock()
}

// watchSync marks a kind synced once its informer has listed.
func (s *Server) watchSync(ctx context.Context, k *KindState) {
	if !cache.WaitForCacheSync(ctx.Done(), k.informer.HasSynced) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k.Synced, k.Error, k.Forbidden = true, "", false
	s.broadcastLocked("kinds", s.kindsLocked())
}

// Synced tells whether every kind the identity may list has listed.
func (s *Server) Synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.kinds {
		if !k.Synced && !k.Forbidden {
			return false
		}
	}
	return true
}

// whoAmI asks the API server who the dashboard reads as, to say it in the
// page. Best effort: older servers and some setups refuse it.
func (s *Server) whoAmI(ctx context.Context) {
	review := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := s.dyn.Resource(schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}).
		Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		klog.V(2).InfoS("dashboard: no SelfSubjectReview", "err", err)
		return
	}
	name, _, _ := unstructured.NestedString(got.Object, "status", "userInfo", "username")
	if name == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.who = name
	s.broadcastLocked("identity", s.identityLocked())
}

// Entry is an owner as sent to the page: the view `kontinue get` prints,
// and its steps as a graph (view.ChainOf), which the page draws when the
// identity may not read the chain.
type Entry struct {
	view.Owner
	Graph view.Chain `json:"graph"`
}

func ownerKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

func asUnstructured(obj any) *unstructured.Unstructured {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// runnablesOf returns the Runnables the owner's steps stamped, from the
// cache, for view.Build.
func (s *Server) runnablesOf(v view.Owner) map[string]*unstructured.Unstructured {
	var out map[string]*unstructured.Unstructured
	store := s.kinds[4].informer.GetStore()
	for _, st := range v.Steps {
		if st.Stamped == nil || st.Stamped.Kind != api.KindRunnable {
			continue
		}
		obj, ok, _ := store.GetByKey(st.Stamped.Namespace + "/" + st.Stamped.Name)
		if u := asUnstructured(obj); ok && u != nil {
			if out == nil {
				out = map[string]*unstructured.Unstructured{}
			}
			out[view.RunnableKey(u.GetNamespace(), u.GetName())] = u
		}
	}
	return out
}

func (s *Server) build(u *unstructured.Unstructured) view.Owner {
	v := view.Build(u, nil)
	if r := s.runnablesOf(v); r != nil {
		v = view.Build(u, r)
	}
	return v
}

func (s *Server) onOwner(obj any, deleted bool) {
	u := asUnstructured(obj)
	if u == nil {
		return
	}
	var v Entry
	if !deleted {
		v.Owner = s.build(u)
		v.Graph = view.ChainOf(v.Owner)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ownerKey(u.GetKind(), u.GetNamespace(), u.GetName())
	if deleted {
		delete(s.owners, key)
		delete(s.sent, key)
		s.broadcastLocked("ownerDeleted", map[string]string{"ownerKind": u.GetKind(), "namespace": u.GetNamespace(), "name": u.GetName()})
		s.sendCountsLocked(false)
		return
	}
	s.owners[key] = v
	// An update that changes nothing the page shows (a resourceVersion, a
	// managed field, an annotation the view ignores) sends nothing: with
	// many owners, the pages only draw real changes.
	msg := event("owner", v)
	sum := sha256.Sum256(msg)
	if old, ok := s.sent[key]; ok && old == sum {
		return
	}
	s.sent[key] = sum
	s.broadcastMsgLocked(msg)
	s.sendCountsLocked(false)
}

func (s *Server) onChain(obj any, deleted bool) {
	u := asUnstructured(obj)
	if u == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := view.ChainKey(u.GetKind(), u.GetName())
	if deleted {
		delete(s.chains, key)
	} else {
		s.chains[key] = view.BuildChain(u)
	}
	s.sendCountsLocked(true)
}

// onRunnable rebuilds the owner that controls the Runnable: its step shows
// the runs.
func (s *Server) onRunnable(obj any, _ bool) {
	u := asUnstructured(obj)
	if u == nil {
		return
	}
	ref := metav1.GetControllerOf(u)
	if ref == nil || (ref.Kind != api.KindWorkload && ref.Kind != api.KindDeliverable) {
		return
	}
	k := s.kinds[0]
	if ref.Kind == api.KindDeliverable {
		k = s.kinds[1]
	}
	owner, ok, _ := k.informer.GetStore().GetByKey(u.GetNamespace() + "/" + ref.Name)
	if o := asUnstructured(owner); ok && o != nil {
		s.onOwner(o, false)
	}
}

// chainsLocked is every chain with its counts, sorted.
func (s *Server) chainsLocked() []view.Chain {
	chains := make([]view.Chain, 0, len(s.chains))
	for _, c := range s.chains {
		chains = append(chains, c)
	}
	owners := make([]view.Owner, 0, len(s.owners))
	for _, o := range s.owners {
		owners = append(owners, o.Owner)
	}
	view.Count(chains, owners)
	view.SortChains(chains)
	return chains
}

// chainsDelay coalesces updates of the chain list: a burst of owner
// changes (the first list, a chain change fanning out to its owners) sends
// it once.
const chainsDelay = 200 * time.Millisecond

// sendCountsLocked schedules sending the chain list: always when a chain
// changed (force), else when an owner change moved a count.
func (s *Server) sendCountsLocked(force bool) {
	s.chainsForce = s.chainsForce || force
	if s.chainsTimer != nil {
		return
	}
	s.chainsTimer = time.AfterFunc(chainsDelay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.chainsTimer = nil
		changed := s.chainsForce
		s.chainsForce = false
		chains := s.chainsLocked()
		counts := make(map[string]string, len(chains))
		for _, c := range chains {
			k := view.ChainKey(c.ChainKind, c.Name)
			counts[k] = countsOf(c)
			if old, ok := s.counts[k]; !ok || old != counts[k] {
				changed = true
			}
		}
		changed = changed || len(counts) != len(s.counts)
		s.counts = counts
		if changed {
			s.broadcastLocked("chains", chains)
		}
	})
}

// countsOf is what an owner's change may move in a chain's entry: its
// counts, and during a roll-out the owners of its waves.
func countsOf(c view.Chain) string {
	sig := fmt.Sprintf("%d/%d", c.Owners, c.OwnersReady)
	if c.Rollout != nil && c.Rollout.Target != "" {
		b, _ := json.Marshal(c.Rollout.Plan)
		sig += string(b)
	}
	return sig
}

func (s *Server) kindsLocked() []KindState {
	out := make([]KindState, 0, len(s.kinds))
	for _, k := range s.kinds {
		out = append(out, *k)
	}
	return out
}

// Identity says whose rights the dashboard reads with.
type Identity struct {
	User      string `json:"user,omitempty"`
	Identity  string `json:"identity,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// ReadOnly: no "reconcile now"; Rollout: a chain's roll-out may be
	// paused, resumed and undone from the page.
	ReadOnly bool `json:"readOnly"`
	Rollout  bool `json:"rollout"`
}

func (s *Server) identityLocked() Identity {
	return Identity{User: s.who, Identity: s.opts.Identity, Namespace: s.opts.Namespace, ReadOnly: s.opts.Reconcile == nil, Rollout: s.opts.Rollout != nil}
}

// Snapshot is everything a new viewer needs.
type Snapshot struct {
	Identity Identity     `json:"identity"`
	Kinds    []KindState  `json:"kinds"`
	Chains   []view.Chain `json:"chains"`
	Owners   []Entry      `json:"owners"`
}

func (s *Server) snapshotLocked() Snapshot {
	owners := make([]Entry, 0, len(s.owners))
	for _, o := range s.owners {
		owners = append(owners, o)
	}
	sort.Slice(owners, func(i, j int) bool {
		a, b := owners[i], owners[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.OwnerKind > b.OwnerKind
	})
	return Snapshot{Identity: s.identityLocked(), Kinds: s.kindsLocked(), Chains: s.chainsLocked(), Owners: owners}
}

// Snapshot returns the current state (what /api/state serves).
func (s *Server) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

// event encodes one server-sent event.
func event(name string, data any) []byte {
	b, err := json.Marshal(data)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return []byte(fmt.Sprintf("event: %s\ndata: %s\n\n", name, b))
}

// subBuffer is how many events a viewer may lag behind before it is cut
// off; its browser reconnects and starts again from a snapshot.
const subBuffer = 512

// broadcastLocked sends an event to every viewer, never blocking: a viewer
// whose buffer is full is dropped.
func (s *Server) broadcastLocked(name string, data any) {
	if len(s.subs) == 0 {
		return
	}
	s.broadcastMsgLocked(event(name, data))
}

// broadcastMsgLocked sends an encoded event to every viewer, as broadcastLocked.
func (s *Server) broadcastMsgLocked(msg []byte) {
	for c := range s.subs {
		select {
		case c <- msg:
		default:
			close(c)
			delete(s.subs, c)
		}
	}
}

// subscribe registers a viewer; its first event is the snapshot, so that
// no change falls between the snapshot and the stream.
func (s *Server) subscribe() chan []byte {
	c := make(chan []byte, subBuffer)
	s.mu.Lock()
	defer s.mu.Unlock()
	c <- event("snapshot", s.snapshotLocked())
	s.subs[c] = struct{}{}
	return c
}

func (s *Server) unsubscribe(c chan []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.subs[c]; ok {
		delete(s.subs, c)
		close(c)
	}
}

// Viewers is the number of connected event streams.
func (s *Server) Viewers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// NewForConfig makes a server reading with cfg's identity.
func NewForConfig(cfg *rest.Config, opts Options) (*Server, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return New(dyn, opts), nil
}

// ServiceAccountConfig is cfg impersonating the ServiceAccount ref
// ("namespace/name"): the controller serves the dashboard with that
// account's rights, never its own.
func ServiceAccountConfig(cfg *rest.Config, ref string) (*rest.Config, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("want a ServiceAccount as namespace/name, got %q", ref)
	}
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name}
	return out, nil
}
