package owner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/tracking"
)

// OwnerRef names an owner.
type OwnerRef struct{ Kind, Namespace, Name string }

func (o OwnerRef) String() string { return o.Kind + "/" + o.Namespace + "/" + o.Name }

// Sweep removes the ClusterRunTemplates generated for owners that are gone
// (what their last status records), and wakes an owner whose generated
// name another object held once that object is deleted. The Manager routes
// the events (OwnerDeleted, NameFreed) and runs it under a
// ClusterRunTemplate's key (Run).
type Sweep struct {
	tracker *tracking.Tracker
	writer  *stamp.Writer
	dyn     dynamic.Interface
	enqueue func(name string) // a ClusterRunTemplate's key

	mu sync.Mutex
	// The records of deleted owners, by name, until their objects are
	// gone; owners waiting for a name someone else's object holds;
	// objects logged as unproven.
	doomed      map[string][]doomedRunTemplate
	nameWaiters map[string]map[OwnerRef]struct{}
	unproven    map[types.UID]struct{}
}

// NewSweep sweeps as Kontinue (dyn) through w, reading tr; enqueue asks
// for Run under a ClusterRunTemplate's name.
func NewSweep(tr *tracking.Tracker, w *stamp.Writer, dyn dynamic.Interface, enqueue func(name string)) *Sweep {
	return &Sweep{tracker: tr, writer: w, dyn: dyn, enqueue: enqueue,
		doomed: map[string][]doomedRunTemplate{}, nameWaiters: map[string]map[OwnerRef]struct{}{}, unproven: map[types.UID]struct{}{}}
}

// doomedRunTemplate is a record of an owner that was deleted.
type doomedRunTemplate struct {
	owner OwnerRef
	uid   types.UID
	rec   st.GeneratedRunTemplate
}

// OwnerDeleted queues the removal of what a deleted owner's last status
// records (the delete event carries it), unless Run finds the owner (uid)
// still there. It runs on an informer goroutine: map updates and Enqueue
// only.
func (g *Sweep) OwnerDeleted(owner OwnerRef, uid types.UID, recs []st.GeneratedRunTemplate) {
	if len(recs) == 0 {
		return
	}
	g.mu.Lock()
	for _, rec := range recs {
		g.doomed[rec.Name] = append(g.doomed[rec.Name], doomedRunTemplate{owner: owner, uid: uid, rec: rec})
	}
	g.mu.Unlock()
	for _, rec := range recs {
		g.enqueue(rec.Name)
	}
}

// WaitForName wakes owner when the ClusterRunTemplate of that name is
// deleted (a step refused to touch it: the name may then be free).
func (g *Sweep) WaitForName(name string, owner OwnerRef) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.nameWaiters[name] == nil {
		g.nameWaiters[name] = map[OwnerRef]struct{}{}
	}
	g.nameWaiters[name][owner] = struct{}{}
}

// NameFreed returns, and forgets, the owners waiting for the name.
func (g *Sweep) NameFreed(name string) []OwnerRef {
	g.mu.Lock()
	defer g.mu.Unlock()
	keys := slices.Collect(maps.Keys(g.nameWaiters[name]))
	delete(g.nameWaiters, name)
	return keys
}

// Run removes what deleted owners recorded under the name (their last
// status), and logs a ClusterRunTemplate that carries Kontinue's labels
// for an owner that is gone but that no record names: Kontinue cannot
// prove it generated it (its owner went while Kontinue was not running,
// or a person wrote it), so it is left as it is.
func (g *Sweep) Run(ctx context.Context, name string) error {
	g.mu.Lock()
	doomed := slices.Clone(g.doomed[name])
	g.mu.Unlock()
	for _, d := range doomed {
		left, err := g.ownerLeft(ctx, d)
		if err != nil {
			return err // kept: retried with backoff
		}
		if left {
			klog.InfoS("kept a generated ClusterRunTemplate: its owner left this replica's shard, it was not deleted", "name", name, "owner", d.owner.String(), "uid", d.uid)
		} else if err := RemoveRunTemplate(ctx, g.tracker, g.writer, g.dyn, d.rec, fmt.Sprintf("%s %s/%s is gone", d.owner.Kind, d.owner.Namespace, d.owner.Name)); err != nil {
			return err // kept: retried with backoff
		}
		g.mu.Lock()
		if i := slices.Index(g.doomed[name], d); i >= 0 {
			g.doomed[name] = slices.Delete(g.doomed[name], i, i+1)
		}
		if len(g.doomed[name]) == 0 {
			delete(g.doomed, name)
		}
		g.mu.Unlock()
	}
	if len(doomed) > 0 {
		return nil
	}
	crt, synced := g.tracker.Get(tracking.Key{GVR: api.RunTemplateGVR}, "", name)
	if crt == nil || !synced {
		return nil
	}
	owner, ok := generatedOwner(crt)
	if !ok {
		return nil
	}
	f := api.FlavorOf(owner.Kind)
	if o, synced := g.tracker.Get(tracking.Key{GVR: f.OwnerGVR}, owner.Namespace, owner.Name); o == nil && synced && g.noteUnproven(crt.GetUID()) {
		klog.InfoS("left a ClusterRunTemplate labelled for an owner that is gone: no record proves Kontinue generated it", "name", name, "uid", crt.GetUID(), "owner", owner.String())
	}
	return nil
}

// ownerLeft reports whether the owner of a record still exists (same UID,
// not being deleted): it left this replica's watch without being deleted,
// moved to another shard (api.ShardLabel), whose replica keeps what it
// generated. The API server answers, not the cache that saw it go.
func (g *Sweep) ownerLeft(ctx context.Context, d doomedRunTemplate) (bool, error) {
	if d.uid == "" {
		return false, nil
	}
	o, err := g.writer.Session().Read(ctx, g.dyn, api.FlavorOf(d.owner.Kind).OwnerGVR, d.owner.Namespace, d.owner.Name)
	if err != nil || o == nil {
		return false, err
	}
	return o.GetUID() == d.uid && o.GetDeletionTimestamp() == nil, nil
}

// noteUnproven reports whether an unproven object is seen for the first
// time (logged once per object and process).
func (g *Sweep) noteUnproven(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, seen := g.unproven[uid]; seen {
		return false
	}
	g.unproven[uid] = struct{}{}
	return true
}

// generatedOwner is the owner a ClusterRunTemplate's labels name (for the
// log of sweep only: labels prove nothing).
func generatedOwner(crt *unstructured.Unstructured) (OwnerRef, bool) {
	l := crt.GetLabels()
	if l[api.StampedLabel] != "true" {
		return OwnerRef{}, false
	}
	for _, f := range []*api.Flavor{api.WorkloadFlavor, api.DeliverableFlavor} {
		if n, ns := l[f.LabelOwnerName], l[f.LabelOwnerNS]; n != "" && ns != "" {
			return OwnerRef{Kind: f.OwnerKind, Namespace: ns, Name: n}, true
		}
	}
	return OwnerRef{}, false
}
