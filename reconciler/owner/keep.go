package owner

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/runs"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// keepSet is what orphan and stale-run removal must leave alone after one
// reconcile of an owner: the objects its steps point at, the runs retention
// keeps, the objects the steps rendered (applied or not), and the steps
// that reached their runs (or Runnable) this time, so that a step that
// failed early keeps what it had.
type keepSet struct {
	refs    map[refKey]bool
	runs    map[refKey]bool
	wanted  map[refKey]bool
	reached map[string]bool
}

func newKeepSet() *keepSet {
	return &keepSet{refs: map[refKey]bool{}, runs: map[refKey]bool{}, wanted: map[refKey]bool{}, reached: map[string]bool{}}
}

// want keeps an object a step rendered in this reconcile, whether or not it
// was applied: a step that failed half-way still wants its first objects.
// Unlike refs, resources does not reset it.
func (k *keepSet) want(ref st.StampedRef) { k.wanted[refKeyOf(ref)] = true }

// resource keeps what a step's status points at.
func (k *keepSet) resource(res st.Resource) {
	for _, ref := range refsOf(res) {
		k.refs[refKeyOf(ref)] = true
	}
}

// ref keeps one object.
func (k *keepSet) ref(ref st.StampedRef) { k.refs[refKeyOf(ref)] = true }

// resources keeps exactly what the steps' statuses point at now.
func (k *keepSet) resources(list []st.Resource) {
	k.refs = map[refKey]bool{}
	for _, r := range list {
		k.resource(r)
	}
}

// reach records that step reached its runs or Runnable in this reconcile.
func (k *keepSet) reach(step string) { k.reached[step] = true }

// run keeps a run that retention keeps.
func (k *keepSet) run(ref st.StampedRef) { k.runs[refKeyOf(ref)] = true }

// has reports whether an object must stay.
func (k *keepSet) has(key refKey) bool { return k.refs[key] || k.runs[key] }

// orphan is an object a previous status listed that no step keeps now.
type orphan struct {
	ref  st.StampedRef
	key  refKey
	step string // "": listed in status.orphans
}

// orphans are the objects the previous status listed (in its steps, then
// as orphans) that must go: not kept, each once.
func (k *keepSet) orphans(prev st.OwnerStatus) []orphan {
	var out []orphan
	seen := map[refKey]bool{}
	add := func(ref st.StampedRef, step string) {
		key := refKeyOf(ref)
		if k.has(key) || seen[key] {
			return
		}
		seen[key] = true
		out = append(out, orphan{ref: ref, key: key, step: step})
	}
	for _, res := range prev.Resources {
		for _, ref := range refsOf(res) {
			add(ref, res.Name)
		}
	}
	for _, ref := range prev.Orphans {
		add(ref, "")
	}
	return out
}

// sweepsUnrecorded reports whether objects no status names may be looked
// for and removed after this reconcile (unrecorded): only when every step
// was submitted, so that bad input, a step that cannot render or a
// transient failure never deletes an object a step may still want.
func sweepsUnrecorded(now st.OwnerStatus) bool {
	c := st.Find(now.Conditions, st.ResourcesSubmitted)
	return c != nil && c.Status == metav1.ConditionTrue
}

// unrecordedFate is what becomes of an object of the owner that no status
// names (keepSet.unrecorded), once the steps left their entries (now).
type unrecordedFate int

const (
	// sweepIt: no step wants it. Every step was submitted (all), its step
	// is gone from the chain, or its step rendered in this reconcile and
	// did not name it: a step that renders knows what it wants.
	sweepIt unrecordedFate = iota
	// keepIt: its step did not render (it waits, or was refused) and may
	// take it back once it does (robustness seed 210).
	keepIt
	// nameIt: the shadow of the primary its step, which did not render,
	// still names: stamped in a reconcile whose status write was lost
	// (robustness seed 1035). The status names it (shadowRef) as the
	// write would have, so that it tells the truth while the step waits,
	// and the step keeps or removes it as its own shadow when it renders.
	nameIt
)

// fateOf decides the fate of o, an unrecorded object of kind gvr, after a
// reconcile whose steps' entries are now and in which all steps were
// submitted or not (all).
func fateOf(o *unstructured.Unstructured, gvr schema.GroupVersionResource, now []st.Resource, all bool) unrecordedFate {
	name := o.GetLabels()[api.LabelResourceName]
	if all {
		return sweepIt
	}
	if name == "" {
		return keepIt // whose it is cannot be told: only a sweep of every step's takes it
	}
	var res *st.Resource
	for i := range now {
		if now[i].Name == name {
			res = &now[i]
		}
	}
	switch {
	case res == nil:
		return sweepIt
	case submitted(*res):
		return sweepIt
	case isShadowOf(o, gvr, *res):
		return nameIt
	}
	return keepIt
}

// submitted: the step rendered and applied what it wants in this reconcile.
func submitted(res st.Resource) bool {
	c := st.Find(res.Conditions, st.ResourceSubmitted)
	return c != nil && c.Status == metav1.ConditionTrue
}

// isShadowOf: o is the shadow of the primary res names, and res names no
// shadow.
func isShadowOf(o *unstructured.Unstructured, gvr schema.GroupVersionResource, res st.Resource) bool {
	if res.ShadowRef != nil || res.StampedRef == nil || o.GetLabels()[step.ShadowLabel] != "true" {
		return false
	}
	k := refKeyOf(*res.StampedRef)
	return k.gvr == gvr && k.namespace == o.GetNamespace() && step.ShadowName(k.name) == o.GetName()
}

// wantedKinds are the kinds of the objects the steps rendered or point at:
// where objects applied but never recorded are looked for.
func (k *keepSet) wantedKinds() []schema.GroupVersionResource {
	seen := map[schema.GroupVersionResource]bool{}
	var out []schema.GroupVersionResource
	for _, m := range []map[refKey]bool{k.wanted, k.refs} {
		for key := range m {
			if !seen[key.gvr] {
				seen[key.gvr] = true
				out = append(out, key.gvr)
			}
		}
	}
	return out
}

// unrecorded are the owner's stamped objects of gvr (objs, from the cache)
// that were applied but never recorded in a status (a crash or a status
// conflict between the apply and the status write, a later object of the
// same step rejected), and that no step wants now: labelled for the owner
// (ownerLabels), controlled by this very owner (by UID, so an owner deleted
// and created again never deletes its predecessor's objects, nor anything
// someone else controls), not a run (staleRuns decides those), not named
// by the previous status (orphans decides those), not kept, not rendered in
// this reconcile, not already being deleted.
func (k *keepSet) unrecorded(prev st.OwnerStatus, owner types.UID, ownerLabels labels.Selector, gvr schema.GroupVersionResource, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	named := map[refKey]bool{}
	for _, res := range prev.Resources {
		for _, ref := range refsOf(res) {
			named[refKeyOf(ref)] = true
		}
	}
	for _, ref := range prev.Orphans {
		named[refKeyOf(ref)] = true
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		key := refKey{gvr: gvr, namespace: o.GetNamespace(), name: o.GetName()}
		l := o.GetLabels()
		switch {
		case !ownerLabels.Matches(labels.Set(l)), l[runs.LabelInputDigest] != "", o.GetDeletionTimestamp() != nil:
			continue
		case named[key], k.has(key), k.wanted[key]:
			continue
		}
		if c := metav1.GetControllerOfNoCopy(o); c == nil || c.UID != owner {
			continue
		}
		out = append(out, o)
	}
	return out
}

// staleRuns are the owner's runs of gvr (objs) that must go: not kept, and
// not the history of a step that failed before reaching its runs this time
// and still points at one of them (current: each step's stampedRef now).
func (k *keepSet) staleRuns(gvr schema.GroupVersionResource, objs []*unstructured.Unstructured, current map[string]*st.StampedRef) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if k.has(refKey{gvr: gvr, namespace: o.GetNamespace(), name: o.GetName()}) {
			continue
		}
		step := o.GetLabels()[api.LabelResourceName]
		if !k.reached[step] && pointsAtRun(current[step], gvr, objs) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// pointsAtRun reports whether a step's current stampedRef is one of the
// owner's runs of gvr (objs).
func pointsAtRun(ref *st.StampedRef, gvr schema.GroupVersionResource, objs []*unstructured.Unstructured) bool {
	if ref == nil || refKeyOf(*ref).gvr != gvr {
		return false
	}
	for _, o := range objs {
		if o.GetName() == ref.Name && o.GetNamespace() == ref.Namespace {
			return true
		}
	}
	return false
}

type refKey struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

func refsOf(res st.Resource) []st.StampedRef {
	var out []st.StampedRef
	if res.StampedRef != nil {
		out = append(out, *res.StampedRef)
	}
	for _, r := range res.StampedObjects {
		if res.StampedRef == nil || r != *res.StampedRef {
			out = append(out, r)
		}
	}
	if res.ShadowRef != nil {
		out = append(out, *res.ShadowRef)
	}
	return out
}

func refKeyOf(ref st.StampedRef) refKey {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return refKey{gvr: gvrFromResource(gv, ref.Resource), namespace: ref.Namespace, name: ref.Name}
}

// gvrFromResource rebuilds a GVR from an apiVersion and the status'
// "plural.group" resource string.
func gvrFromResource(gv schema.GroupVersion, resource string) schema.GroupVersionResource {
	plural := resource
	if gv.Group != "" && len(resource) > len(gv.Group)+1 && resource[len(resource)-len(gv.Group)-1:] == "."+gv.Group {
		plural = resource[:len(resource)-len(gv.Group)-1]
	}
	return gv.WithResource(plural)
}

func resourceString(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource
	}
	return gvr.Resource + "." + gvr.Group
}
