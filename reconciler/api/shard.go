package api

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Sharding: owners (Workloads, Deliverables, Runnables) carry ShardLabel
// to be served by the replicas started with --shard=<value>; owners without
// it are served by replicas started without --shard. Everything Kontinue
// stamps carries its owner's value, so that each replica's watches select
// its shard on the API server and its caches hold only its shard.
const ShardLabel = "kontinue.dev/shard"

// ShardSelector is the label selector of a shard's owners and of what they
// stamped: ShardLabel=shard, or, for the default shard (""), objects
// without ShardLabel.
func ShardSelector(shard string) string {
	if shard == "" {
		return "!" + ShardLabel
	}
	return ShardLabel + "=" + shard
}

// WithShard narrows a label selector (possibly empty) to a shard.
func WithShard(selector, shard string) string {
	if selector == "" {
		return ShardSelector(shard)
	}
	return selector + "," + ShardSelector(shard)
}

// ShardOf is the shard labels put an object in ("": the default shard).
func ShardOf(labels map[string]string) string { return labels[ShardLabel] }

// SetShard makes labels carry shard (removing ShardLabel for the default
// shard): a stamped object lands in its owner's shard whatever its template
// rendered.
func SetShard(labels map[string]string, shard string) {
	if shard == "" {
		delete(labels, ShardLabel)
		return
	}
	labels[ShardLabel] = shard
}

// ValidShard says why a shard name cannot be used: it is a label value and
// part of the Lease's name, so it must be a DNS label.
func ValidShard(shard string) error {
	if shard == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(shard); len(errs) > 0 {
		return fmt.Errorf("shard %q: %s", shard, errs[0])
	}
	return nil
}

// ShardLease is the Lease a shard's replicas elect their leader on: id (the
// --leader-election-id) for the default shard, which keeps the Lease it
// always had, and <id>-shard-<shard> for a shard.
func ShardLease(id, shard string) string {
	if shard == "" {
		return id
	}
	return id + "-shard-" + shard
}

// LeaseShard is the shard whose Lease is named name (ShardLease(id, shard)),
// and false for a name that is no shard's Lease.
func LeaseShard(id, name string) (string, bool) {
	if name == id {
		return "", true
	}
	shard, ok := strings.CutPrefix(name, id+"-shard-")
	if !ok || shard == "" || ValidShard(shard) != nil {
		return "", false
	}
	return shard, true
}
