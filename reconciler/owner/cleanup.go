package owner

// The cleanup stage of an owner's reconcile, after its steps: orphans
// (objects its status pointed at that no step stamps now), objects applied
// but never recorded, runs of immutable steps that no longer create them,
// and generated ClusterRunTemplates no step generates. keep.go decides
// what goes; this deletes it through stamp, with UID preconditions.

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/runs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/tracking"
)

// cleaned is what the cleanup stage leaves in the owner's status: what it
// could not delete (status.orphans), the records of generated
// ClusterRunTemplates whose objects are not gone; and whether to look
// again soon for objects never recorded (sweepRetry), the first error.
type cleaned struct {
	orphans []st.StampedRef
	records []st.GeneratedRunTemplate
	shard   string // status.shard: where the owner's objects are
	// shadows are the unrecorded shadows of steps that did not render,
	// by step: their entries name them (fateOf, nameIt).
	shadows    map[string]st.StampedRef
	sweepLater bool
	err        error
}

// cleanup is the cleanup stage of one owner's reconcile: what the previous
// status listed (prev) and the status the steps left (status), deleted
// through the port x (what its keep set keeps stays).
type cleanup struct {
	x      *ownerIO
	flavor *api.Flavor
	prev   st.OwnerStatus
	status st.OwnerStatus
	// removeRunTemplate deletes a generated ClusterRunTemplate the record
	// names, as Kontinue (RemoveRunTemplate).
	removeRunTemplate func(rec st.GeneratedRunTemplate, why string) error
	// stampedKinds are the kinds whose stamped objects this replica
	// watches (for any owner): where a moved owner's objects are looked
	// for besides its own steps' kinds (adoptMoved).
	stampedKinds func() []schema.GroupVersionResource
	out          cleaned
}

// clean runs the cleanup stage over status, the steps' outcome.
func clean(env *Env, x *ownerIO, l *loaded, status st.OwnerStatus) cleaned {
	c := &cleanup{x: x, flavor: env.Flavor, prev: l.prev, status: status,
		removeRunTemplate: func(rec st.GeneratedRunTemplate, why string) error {
			return RemoveRunTemplate(x.ctx, env.Tracker, env.Writer, env.Dynamic, rec, why)
		},
		stampedKinds: func() []schema.GroupVersionResource { return stampedKinds(env.Tracker.Active()) }}
	c.out.records = status.GeneratedRunTemplates
	c.out.shard = l.prev.Shard
	c.out.err = c.removeOrphans()
	if err := c.adoptMoved(env.Writer.Shard); err != nil && c.out.err == nil {
		c.out.err = err
	}
	return c.out
}

// adoptMoved brings into this replica's shard the objects the owner left
// in other shards, once, after it moved (status.shard is not this shard):
// objects its steps apply again are relabelled by that apply, and orphans
// its status names are read from the API server (deleteOrphan), but an
// object no status names (applied, then the record lost; a step refused
// at its new name while the owner moved: robustness seed 6) is in no cache
// of this shard, and no other shard serves the owner any more. They are
// looked for in the kinds the steps stamp now, the status named, and this
// replica stamps for any owner (a step the move's edit renamed or removed
// most likely stamps what other owners of its chain do); found,
// each is relabelled (stamp.Session.AdoptMoved), its event wakes the owner,
// and the cleanup of the next reconcile keeps or removes it as any other
// object of the owner. Until every kind was looked at, status.shard keeps
// the shard it named, so that the next reconcile looks again.
func (op *cleanup) adoptMoved(shard string) error {
	if op.prev.Shard == shard {
		return nil
	}
	x := op.x
	kinds := map[schema.GroupVersionResource]bool{}
	for _, gvr := range x.keep.wantedKinds() {
		kinds[gvr] = true
	}
	for _, res := range op.prev.Resources {
		for _, ref := range refsOf(res) {
			kinds[refKeyOf(ref).gvr] = true
		}
	}
	for _, ref := range op.prev.Orphans {
		kinds[refKeyOf(ref).gvr] = true
	}
	if op.stampedKinds != nil {
		for _, gvr := range op.stampedKinds() {
			kinds[gvr] = true
		}
	}
	delete(kinds, api.RunTemplateGVR) // cluster-scoped, found by their records (status.generatedRunTemplates)
	for gvr := range kinds {
		if _, err := x.w.AdoptMoved(x.ctx, x.client, gvr, x.owner.GetNamespace(), x.labels, x.owner.GetUID()); err != nil {
			klog.InfoS("could not adopt the objects an owner left in another shard; will retry", "owner", x.user,
				"kind", resourceString(gvr), "err", err.Error())
			if apierrors.IsForbidden(err) {
				return nil // looked at again when RBAC changes, not on a timer
			}
			return err
		}
	}
	op.out.shard = shard
	return nil
}

// removeOrphans deletes objects the previous status listed (in its steps or
// as orphans) that no step stamps any more, when they still carry this
// owner's labels. What cannot be deleted stays in status.orphans.
func (op *cleanup) removeOrphans() error {
	var firstErr error
	orphans := op.x.keep.orphans(op.prev)
	for _, c := range orphans {
		if err := op.deleteOrphan(c.key, c.ref, c.step); err != nil {
			klog.InfoS("could not remove orphaned object; will retry", "owner", op.x.user,
				"object", c.ref.Kind+"/"+c.ref.Name, "err", err.Error())
			op.out.orphans = append(op.out.orphans, c.ref)
			if apierrors.IsForbidden(err) {
				continue // retried when RBAC changes, not on a timer
			}
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if err := op.removeUnrecorded(); err != nil && firstErr == nil {
		firstErr = err
	}
	if err := op.removeStaleRuns(); err != nil && firstErr == nil {
		firstErr = err // runs are found by label again on retry
	}
	return firstErr
}

// sweepRetry is when an owner looks again for objects never recorded in
// status, after a reconcile found the cache of their kind not synced yet
// (a watch started with this reconcile, at a start): the sync takes about
// as long as a list of that kind.
const sweepRetry = time.Second

// removeUnrecorded deletes the owner's objects that were applied but never
// recorded in status, once no step wants them (keepSet.unrecorded and
// fateOf decide): every one when every step was submitted, else those of
// steps the chain no longer has or that rendered without naming them; a
// step that did not render keeps its own, and its entry names its shadow.
// They are found in the caches of the kinds the steps stamp; Runnables and
// run templates are stale-run removal's. What cannot be deleted is listed
// in status.orphans, so that it is retried like any orphan.
func (op *cleanup) removeUnrecorded() error {
	// While a step failed or waits, only objects no step can want go
	// (robustness seed 210: a Workload moved to a chain whose step failed
	// kept, unnamed, what its old chain's steps had stamped in a reconcile
	// whose status write was lost). An object of a step that did not
	// render may be what that step, once it renders again, takes back.
	all := sweepsUnrecorded(op.status)
	x := op.x
	sel := labels.SelectorFromSet(x.labels)
	var firstErr error
	for _, gvr := range x.keep.wantedKinds() {
		if gvr == api.RunnableGVR || gvr == api.RunTemplateGVR {
			continue
		}
		key := tracking.Key{GVR: gvr, Selector: api.StampedSelector}
		// Kept, not glanced: a kind read here and let go at the end of the
		// reconcile is not synced at the next, which looks again a second
		// later, and again, for as long as the owner's steps do not watch
		// it themselves: a step failing before its apply and pointing at an
		// object of a kind no other step stamps (robustness seed 735), an
		// owner whose chain is gone (seed 762, once a second for minutes).
		if x.watch != nil {
			x.watch(key)
		}
		objs, synced := x.cache.ListControlledBy(key, x.owner.GetUID())
		if !synced {
			// Its watch was just started (or restarted): nothing may wake
			// this owner again, since an object never recorded in status
			// is nothing its steps watch. Look again shortly, unless the
			// watch fails (RBAC, discovery): those wake the owner when
			// they change, and a timer would only spin.
			op.out.sweepLater = op.out.sweepLater || x.cache.Err(key) == nil
			continue
		}
		for _, o := range x.keep.unrecorded(op.prev, x.owner.GetUID(), sel, gvr, objs) {
			ref := st.StampedRef{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), Resource: resourceString(gvr)}
			switch fateOf(o, gvr, op.status.Resources, all) {
			case keepIt:
				continue
			case nameIt:
				if op.out.shadows == nil {
					op.out.shadows = map[string]st.StampedRef{}
				}
				op.out.shadows[o.GetLabels()[api.LabelResourceName]] = ref
				continue
			}
			err := op.deleteUnrecorded(gvr, o)
			if err == nil {
				continue
			}
			klog.InfoS("could not remove an object never recorded in status; will retry", "owner", x.user,
				"object", ref.Kind+"/"+ref.Name, "err", err.Error())
			op.out.orphans = append(op.out.orphans, ref)
			if !apierrors.IsForbidden(err) && firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

func (op *cleanup) deleteUnrecorded(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	step := obj.GetLabels()[api.LabelResourceName]
	return op.x.remove(gvr, obj, fmt.Sprintf("(applied for step [%s] but never recorded in status, no longer wanted)", step))
}

func (op *cleanup) deleteOrphan(k refKey, ref st.StampedRef, step string) error {
	x, f := op.x, op.flavor
	live, err := x.w.Live(x.ctx, tracking.Key{GVR: k.gvr, Selector: api.StampedSelector}, nil, k.namespace, k.name)
	if err == nil && live == nil {
		// Not in this replica's cache is not gone: an owner just moved
		// here from another shard still has objects labelled for that
		// shard, which this replica does not watch.
		live, err = x.w.Read(x.ctx, x.kontinue, k.gvr, k.namespace, k.name)
	}
	if err != nil || live == nil {
		return err
	}
	l := live.GetLabels()
	if l[f.LabelOwnerName] != x.owner.GetName() || l[f.LabelOwnerNS] != x.owner.GetNamespace() || !controlledBy(live, x.owner.GetUID()) {
		return nil // not ours (any more), or made by someone else since: never delete it
	}
	if step == "" {
		step = "(removed earlier)"
	}
	return x.remove(k.gvr, live, fmt.Sprintf("no longer stamped by step [%s]", step))
}

// deleteRun deletes a run as the stamping service account, only if it is
// still the object we saw (UID precondition).
func (op *cleanup) deleteRun(gvr schema.GroupVersionResource, obj *unstructured.Unstructured, why string) error {
	return op.x.remove(gvr, obj, "("+why+")")
}

// removeStaleRuns deletes the runs of immutable steps that no longer need
// them: the step left the chain, was renamed, or its template became
// mutable or stamps another kind. Runs are found by label, not by status
// refs (retention keeps runs that status no longer names). Nothing is
// deleted when the steps were not realized in this reconcile (bad input must
// never delete objects), nor the runs of a step that failed before reaching
// its runs and still points at one.
func (op *cleanup) removeStaleRuns() error {
	if st.Find(op.status.Conditions, st.ResourcesSubmitted) == nil {
		return nil
	}
	err := op.removeStaleRunTemplates()
	if err2 := op.removeStaleRunObjects(); err == nil {
		err = err2
	}
	return err
}

func (op *cleanup) removeStaleRunObjects() error {
	current := map[string]*st.StampedRef{}
	for i := range op.status.Resources {
		current[op.status.Resources[i].Name] = op.status.Resources[i].StampedRef
	}
	// Kinds worth a look: those of a referenced object that is a run, is
	// gone (orphan removal may just have deleted the newest run), or is not
	// known yet. Kinds of live mutable objects cost nothing.
	refs := append([]st.StampedRef(nil), op.prev.Orphans...)
	for _, list := range [][]st.Resource{op.prev.Resources, op.status.Resources} {
		for _, res := range list {
			refs = append(refs, refsOf(res)...)
		}
	}
	gvrs := map[schema.GroupVersionResource]bool{}
	for _, ref := range refs {
		k := refKeyOf(ref)
		if gvrs[k.gvr] {
			continue
		}
		o, synced := op.x.cache.Get(tracking.Key{GVR: k.gvr, Selector: api.StampedSelector}, k.namespace, k.name)
		gvrs[k.gvr] = !synced || o == nil || o.GetLabels()[runs.LabelInputDigest] != ""
	}
	var firstErr error
	for gvr, look := range gvrs {
		if !look {
			continue
		}
		key := tracking.Key{GVR: gvr, Selector: api.StampedSelector}
		objs, err := op.ownerRuns(key)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, o := range objs {
			if !op.x.keep.has(refKey{gvr: gvr, namespace: o.GetNamespace(), name: o.GetName()}) {
				op.x.watch(key) // watch until they are gone
				break
			}
		}
		for _, o := range op.x.keep.staleRuns(gvr, objs, current) {
			step := o.GetLabels()[api.LabelResourceName]
			if err := op.deleteRun(gvr, o, fmt.Sprintf("step [%s] no longer creates runs", step)); err != nil {
				// Listed in status.orphans, so the next reconcile looks again
				// even when no step names this kind any more.
				op.out.orphans = append(op.out.orphans, st.StampedRef{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(),
					Namespace: o.GetNamespace(), Name: o.GetName(), Resource: resourceString(gvr)})
				if !apierrors.IsForbidden(err) && firstErr == nil {
					firstErr = err
				}
			}
		}
	}
	return firstErr
}

// ownerRuns lists the owner's runs of a kind: from the cache, or from the
// API server while the cache is not synced (a kind no step stamps any more
// may have no watch left after a restart).
func (op *cleanup) ownerRuns(key tracking.Key) ([]*unstructured.Unstructured, error) {
	x := op.x
	list, err := x.w.ListRuns(x.ctx, stamp.RunQuery{Kind: key, Watch: x.glance, Namespace: x.owner.GetNamespace(), Controller: x.owner.GetUID(),
		Labels: x.labels})
	out := make([]*unstructured.Unstructured, len(list))
	for i, r := range list {
		out[i] = r.Obj
	}
	return out, err
}

// removeStaleRunTemplates deletes the ClusterRunTemplates recorded for this
// owner whose step no longer generates them (removed, renamed, runnable
// false), unless the step failed before reaching its Runnable and still
// points at it (staleRunTemplate). Only the object the record names is
// deleted; a record goes once its object is gone. Called only when the
// steps were realized.
func (op *cleanup) removeStaleRunTemplates() error {
	current := map[string]*st.StampedRef{}
	for i := range op.status.Resources {
		current[op.status.Resources[i].Name] = op.status.Resources[i].StampedRef
	}
	owner := op.x.owner
	want := func(step string) string {
		return prepare.RunTemplateName(op.flavor.OwnerKind, owner.GetNamespace(), owner.GetName(), step)
	}
	var firstErr error
	var kept []st.GeneratedRunTemplate
	for _, rec := range op.status.GeneratedRunTemplates {
		if !staleRunTemplate(rec, op.x.keep.reached, want, current) {
			kept = append(kept, rec)
			continue
		}
		why := fmt.Sprintf("step [%s] of %s %s/%s no longer generates it", rec.Step, op.flavor.OwnerKind, owner.GetNamespace(), owner.GetName())
		if err := op.removeRunTemplate(rec, why); err != nil {
			kept = append(kept, rec) // retried
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	op.out.records = kept
	return firstErr
}

// stampedKinds are the kinds of the watches of stamped objects among
// active (tracking.Tracker.Active).
func stampedKinds(active map[tracking.Key]int) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for k := range active {
		if k.Selector == api.StampedSelector && k.Namespace == "" && k.Name == "" && k.As == "" {
			out = append(out, k.GVR)
		}
	}
	return out
}
