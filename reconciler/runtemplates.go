package reconciler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/owner"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/tracking"
)

// generatedSweep removes the ClusterRunTemplates generated for owners that
// are gone (what their last status records), and wakes an owner whose
// generated name another object held once that object is deleted. Its
// keys are ClusterRunTemplate keys of the Runnable controller.
type generatedSweep struct {
	m       *Manager
	enqueue func(Key) // a ClusterRunTemplate key

	mu sync.Mutex
	// The records of deleted owners, by name, until their objects are
	// gone; owners waiting for a name someone else's object holds;
	// objects logged as unproven.
	doomed      map[string][]doomedRunTemplate
	nameWaiters map[string]map[Key]struct{}
	unproven    map[types.UID]struct{}
}

func newGeneratedSweep(m *Manager, enqueue func(Key)) *generatedSweep {
	return &generatedSweep{m: m, enqueue: enqueue,
		doomed: map[string][]doomedRunTemplate{}, nameWaiters: map[string]map[Key]struct{}{}, unproven: map[types.UID]struct{}{}}
}

// doomedRunTemplate is a record of an owner that was deleted.
type doomedRunTemplate struct {
	owner Key
	rec   st.GeneratedRunTemplate
}

// ownerDeleted queues the removal of what a deleted owner's last status
// records (the delete event carries it). It runs on an informer goroutine:
// map updates and Enqueue only.
func (g *generatedSweep) ownerDeleted(owner Key, recs []st.GeneratedRunTemplate) {
	if len(recs) == 0 {
		return
	}
	g.mu.Lock()
	for _, rec := range recs {
		g.doomed[rec.Name] = append(g.doomed[rec.Name], doomedRunTemplate{owner: owner, rec: rec})
	}
	g.mu.Unlock()
	for _, rec := range recs {
		g.enqueue(Key{Kind: api.KindClusterRunTemplate, NamespacedName: types.NamespacedName{Name: rec.Name}})
	}
}

// waitForName wakes owner when the ClusterRunTemplate of that name is
// deleted (a step refused to touch it: the name may then be free).
func (g *generatedSweep) waitForName(name string, owner Key) {
	g.mu.Lock()
	defer g.mu.Unlock()
	addTo(g.nameWaiters, name, owner)
}

// nameFreed returns, and forgets, the owners waiting for the name.
func (g *generatedSweep) nameFreed(name string) []Key {
	g.mu.Lock()
	defer g.mu.Unlock()
	keys := slices.Collect(maps.Keys(g.nameWaiters[name]))
	delete(g.nameWaiters, name)
	return keys
}

// sweep removes what deleted owners recorded under the name (their last
// status), and logs a ClusterRunTemplate that carries Kontinue's labels
// for an owner that is gone but that no record names: Kontinue cannot
// prove it generated it (its owner went while Kontinue was not running,
// or a person wrote it), so it is left as it is.
func (g *generatedSweep) sweep(ctx context.Context, name string) (Result, error) {
	g.mu.Lock()
	doomed := slices.Clone(g.doomed[name])
	g.mu.Unlock()
	for _, d := range doomed {
		if err := owner.RemoveRunTemplate(ctx, g.m.tracker, g.m.w, g.m.dyn, d.rec, fmt.Sprintf("%s %s is gone", d.owner.Kind, d.owner.NamespacedName)); err != nil {
			return Result{}, err // kept: retried with backoff
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
		return Result{}, nil
	}
	crt, synced := g.m.tracker.Get(tracking.Key{GVR: api.RunTemplateGVR}, "", name)
	if crt == nil || !synced {
		return Result{}, nil
	}
	owner, ok := generatedOwner(crt)
	if !ok {
		return Result{}, nil
	}
	f := api.WorkloadFlavor
	if owner.Kind == api.DeliverableFlavor.OwnerKind {
		f = api.DeliverableFlavor
	}
	if o, synced := g.m.tracker.Get(tracking.Key{GVR: f.OwnerGVR}, owner.Namespace, owner.Name); o == nil && synced && g.noteUnproven(crt.GetUID()) {
		klog.InfoS("left a ClusterRunTemplate labelled for an owner that is gone: no record proves Kontinue generated it", "name", name, "uid", crt.GetUID(), "owner", owner.String())
	}
	return Result{}, nil
}

// noteUnproven reports whether an unproven object is seen for the first
// time (logged once per object and process).
func (g *generatedSweep) noteUnproven(uid types.UID) bool {
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
func generatedOwner(crt *unstructured.Unstructured) (Key, bool) {
	l := crt.GetLabels()
	if l[api.StampedLabel] != "true" {
		return Key{}, false
	}
	for _, f := range []*api.Flavor{api.WorkloadFlavor, api.DeliverableFlavor} {
		if n, ns := l[f.LabelOwnerName], l[f.LabelOwnerNS]; n != "" && ns != "" {
			return Key{Kind: f.OwnerKind, NamespacedName: types.NamespacedName{Namespace: ns, Name: n}}, true
		}
	}
	return Key{}, false
}
