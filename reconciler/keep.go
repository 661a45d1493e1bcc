package reconciler

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	st "kontinue.dev/kontinue/reconciler/status"
)

// keepSet is what orphan and stale-run removal must leave alone after one
// reconcile of an owner: the objects its steps point at, the runs retention
// keeps, and the steps that reached their runs (or Runnable) this time, so
// that a step that failed early keeps what it had.
type keepSet struct {
	refs    map[refKey]bool
	runs    map[refKey]bool
	reached map[string]bool
}

func newKeepSet() *keepSet {
	return &keepSet{refs: map[refKey]bool{}, runs: map[refKey]bool{}, reached: map[string]bool{}}
}

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
