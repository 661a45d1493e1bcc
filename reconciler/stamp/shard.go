package stamp

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/apply"
	"kontinue.dev/kontinue/reconciler/shard"
)

// Runs of an owner that moved shard (docs/operations.md#moving-an-owner)
// still carry the old shard's label: the new shard's watch does not show
// them, so the API server's list (LoadRuns' confirmation) is what finds
// them. They are adopted as they are (same object, same UID: never run
// again) and relabelled, so that the new shard's cache holds them from
// then on. An applied object a step applies again gets the new label with
// that apply; the others (of a step renamed or gone, never recorded in
// status) are found by AdoptMoved once per move.

// shardPatch is the merge patch that puts the object of uid in shard. The
// UID is a precondition: the API server refuses the patch (metadata.uid
// is immutable) when the name now holds another object.
func shardPatch(shard string, uid types.UID) []byte {
	var v any // null removes the label: the default shard
	if shard != "" {
		v = shard
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "labels": map[string]any{api.ShardLabel: v}}})
	return b
}

// adoptRuns relabels the runs in list that are not in shard (the
// writer's), as q's service account. A failure is logged and left: the run is still
// found (live) and never created again; the next confirmation tries again.
func adoptRuns(ctx context.Context, shard string, q RunQuery, gvr schema.GroupVersionResource, list []*unstructured.Unstructured) {
	for i, o := range list {
		if api.ShardOf(o.GetLabels()) == shard || q.Client == nil {
			continue
		}
		cl, err := q.Client()
		if err != nil {
			klog.V(1).InfoS("could not relabel a run of another shard", "run", o.GetNamespace()+"/"+o.GetName(), "err", err.Error())
			return
		}
		got, err := resource(cl, gvr, o.GetNamespace()).Patch(ctx, o.GetName(), types.MergePatchType, shardPatch(shard, o.GetUID()), metav1.PatchOptions{FieldManager: FieldManager})
		if err != nil {
			klog.V(1).InfoS("could not relabel a run of another shard", "run", o.GetNamespace()+"/"+o.GetName(), "err", err.Error())
			continue
		}
		klog.InfoS("adopted a run of another shard", "run", o.GetNamespace()+"/"+o.GetName(), "uid", o.GetUID(), "from", api.ShardOf(o.GetLabels()), "shard", shard)
		list[i] = got
	}
}

// AdoptMoved relabels into the writer's shard the objects of gvr in
// namespace that an owner which moved shard left in other shards:
// labelled for the owner (owner: its stamped and owner labels) and in
// another shard, which the writer's watches do not show, and controlled by
// controller (the owner's UID). What carries the owner's labels but not its
// controller reference (a person's, another owner's, a predecessor's of the
// same name) is left as it is. Once relabelled, the writer's cache holds
// them and decides as for any object of the owner: a run stays a run, an
// object no status names and no step wants goes (owner/cleanup.go). The
// list is the API server's, as Kontinue; the patches are cl's (the owner's
// service account), with the object's UID as precondition. It reports how
// many it relabelled and the first error (the caller looks again).
func (s *Session) AdoptMoved(ctx context.Context, cl func() (dynamic.Interface, error), gvr schema.GroupVersionResource, namespace string,
	owner labels.Set, controller types.UID) (int, error) {
	sel := labels.SelectorFromSet(owner).String() + "," + shard.Others(s.Shard)
	l, err := resource(s.dyn, gvr, namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return 0, nil
	}
	if err != nil {
		return 0, s.Note(err)
	}
	n := 0
	for i := range l.Items {
		o := &l.Items[i]
		if c := metav1.GetControllerOfNoCopy(o); c == nil || c.UID != controller || o.GetDeletionTimestamp() != nil {
			continue
		}
		c, err := cl()
		if err != nil {
			return n, err
		}
		_, err = resource(c, gvr, o.GetNamespace()).Patch(ctx, o.GetName(), types.MergePatchType, shardPatch(s.Shard, o.GetUID()), metav1.PatchOptions{FieldManager: FieldManager})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			continue // gone, or another object at the name since
		case err != nil:
			return n, s.Note(err)
		}
		n++
		klog.InfoS("adopted an object of another shard", "object", gvr.Resource+"/"+o.GetNamespace()+"/"+o.GetName(), "uid", o.GetUID(),
			"step", o.GetLabels()[api.LabelResourceName], "from", api.ShardOf(o.GetLabels()), "shard", s.Shard)
	}
	return n, nil
}

// upToDate says whether live holds desired (apply.UpToDate) in desired's
// shard: an object of the default shard leaves the label out, which a live
// object in another shard still "contains".
func upToDate(desired, live *unstructured.Unstructured) bool {
	return apply.UpToDate(unridden(desired, live), live) && api.ShardOf(desired.GetLabels()) == api.ShardOf(live.GetLabels())
}

// movedOnly says whether writing desired over live changes nothing but its
// shard (an owner that moved: shard.go): a gated step must not wait for
// the object to report on "new inputs" it does not have, and no event says
// it was applied.
func movedOnly(desired, live *unstructured.Unstructured) bool {
	if live == nil || api.ShardOf(desired.GetLabels()) == api.ShardOf(live.GetLabels()) {
		return false
	}
	d := unridden(desired, live).DeepCopy()
	l := d.GetLabels()
	delete(l, api.ShardLabel)
	d.SetLabels(l)
	return apply.UpToDate(d, live)
}
