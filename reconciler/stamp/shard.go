package stamp

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/apply"
)

// Runs of an owner that moved shard (docs/operations.md#moving-an-owner)
// still carry the old shard's label: the new shard's watch does not show
// them, so the API server's list (LoadRuns' confirmation) is what finds
// them. They are adopted as they are (same object, same UID: never run
// again) and relabelled, so that the new shard's cache holds them from
// then on. Applied objects need nothing of this: their next apply carries
// the new label.

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
