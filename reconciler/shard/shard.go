// Package shard narrows a replica's watches to its shard
// (docs/operations.md#sharding): a replica serves the owners of one shard
// (api.ShardLabel) and caches only them and what they stamped. The
// watches keep their keys (every reader names the stamped watch by
// api.StampedSelector); only what the API server is asked for narrows.
package shard

import (
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/tracking"
)

// Selector is the label selector the API server filters the watch k by in
// shard: owners (Workloads, Deliverables, Runnables) and stamped objects
// are narrowed to the shard; chains, templates, run templates and the
// rest are shared by every shard and stay whole. The watches of a
// Runnable's selector (As) read what the Runnable selects, whatever its
// shard.
func Selector(shard string, k tracking.Key) string {
	if Narrowed(k) {
		return api.WithShard(k.Selector, shard)
	}
	return k.Selector
}

// Narrowed reports whether the watch k holds only one shard's objects.
func Narrowed(k tracking.Key) bool {
	if k.As != "" {
		return false
	}
	if k.Selector == api.StampedSelector {
		return true
	}
	return k.Selector == "" && k.Namespace == "" && (k.GVR == api.WorkloadGVR || k.GVR == api.DeliverableGVR || k.GVR == api.RunnableGVR)
}

// Others is the label selector of the owners that are not in shard: those
// a replica of shard does not serve (their label names another shard, or
// is empty; for the default shard: any label). Together with its own
// watch they are every owner, without one twice: a replica watches them,
// trimmed, only while a chain's roll-out needs every owner's facts
// (reconciler/chain/route.go). Of stamped objects: those a moved owner
// left in other shards (stamp.Session.AdoptMoved).
func Others(shard string) string {
	if shard == "" {
		return api.ShardLabel
	}
	return api.ShardLabel + "!=" + shard
}

// Foreign reports an object of another shard delivered by a narrowed
// watch. It never happens while the API server filters: it is logged and
// counted (seen, when set) so that a test or an operator can see a
// replica caching beyond its shard.
func Foreign(shard string, ev tracking.Event, seen func()) bool {
	if ev.Type == tracking.Deleted || !Narrowed(ev.Key) || api.ShardOf(ev.Obj.GetLabels()) == shard {
		return false
	}
	klog.ErrorS(nil, "a watch delivered an object of another shard", "watch", ev.Key.String(), "object", ev.Obj.GetNamespace()+"/"+ev.Obj.GetName(),
		"shard", shard, "objectShard", api.ShardOf(ev.Obj.GetLabels()))
	if seen != nil {
		seen()
	}
	return true
}
