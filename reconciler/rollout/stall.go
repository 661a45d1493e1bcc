package rollout

// Owners nothing will move. A wave waits for its owners to render with the
// target, and each of them moves when its replica reconciles it. Some
// never will, for a fact about the owner that no roll-out, and no replica,
// changes: its shard is served by no running replica, it is being deleted
// (Kontinue reconciles no owner with a deletionTimestamp; another
// finalizer holds it), or its status says no chain renders it (no chain
// selects it any more, or two do, or its spec cannot be read: the walk
// stops before a revision is chosen, and the status keeps naming the chain
// it had). Waiting for those would hold the wave, and every later one,
// for as long as the owner's own people please. So a wave counts only the
// owners that can move, and names the rest (Status.PassedOver): one rule,
// Stand, which the controller and `kontinue rollout status` share.

import (
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/selector"
)

// Why an admitted owner is passed over (PassedOwner.Reason), besides the
// reason of its own chain condition (see detached).
const (
	// ReasonUnserved: its kontinue.dev/shard names a shard that no running
	// replica serves (no live Lease, docs/operations.md#sharding), or is
	// empty or no shard name, which no replica can serve.
	ReasonUnserved = "Unserved"
	// ReasonDeleting: it is being deleted.
	ReasonDeleting = "Deleting"
)

// detached are the reasons of an owner's SupplyChainReady (DeliveryReady)
// condition that say its walk stopped before it chose a revision, for a
// cause of its own: no chain, or more than one, selects it; its spec
// cannot be read ("InvalidSpec", reconciler/owner). Its status keeps the
// chain it had, but the chain renders it no longer: it left. An invalid
// chain (InvalidChain) is no such cause: that is the chain's, which a fix
// (a new revision) changes.
var detached = map[string]bool{
	selector.ReasonWorkloadLabelsMissing: true, selector.ReasonDeliverableLabelsMissing: true,
	selector.ReasonSupplyChainNotFound: true, selector.ReasonDeliveryNotFound: true,
	selector.ReasonMultipleSupplyChainMatches: true, selector.ReasonMultipleDeliveryMatches: true,
	"InvalidSpec": true,
}

// Standing is where an admitted owner stands on a roll-out's target.
type Standing int

// Standings.
const (
	Moving     Standing = iota // not yet Ready on the target: the wave waits for it
	Updated                    // Ready on the target
	Failed                     // failed on the target
	PassedOver                 // nothing will move it: the wave does not wait for it
)

// Stand places an admitted owner o on target, with served the shards that
// running replicas serve ("" the default shard; nil: not known, every
// shard name counts as served). why is the reason when PassedOver. What
// its status says happened on the target counts first (Ready or failed on
// it, whatever now stops it from moving again), but for an owner that
// left the chain: its failure is its own, not the target's.
func Stand(o Owner, target string, served map[string]bool) (s Standing, why string) {
	if o.Current && detached[o.ChainReason] {
		return PassedOver, o.ChainReason
	}
	on := o.Revision == target && o.Current
	switch {
	case on && o.Ready == "True":
		return Updated, ""
	case on && o.Ready == "False":
		return Failed, ""
	}
	if why := Stalled(o, served); why != "" {
		return PassedOver, why
	}
	return Moving, ""
}

// Stalled says why nothing will move owner o (served as for Stand), or ""
// when its replica moves it once woken.
func Stalled(o Owner, served map[string]bool) string {
	switch {
	case o.Deleting:
		return ReasonDeleting
	case o.Current && detached[o.ChainReason]:
		return o.ChainReason
	case !Served(o.Labels, served):
		return ReasonUnserved
	}
	return ""
}

// Served reports whether a running replica serves an owner with labels:
// that of its shard (the default shard's when it has no
// kontinue.dev/shard), by served (nil: every shard name counts as served;
// else it holds shard names only, "" for the default shard).
// A label that is empty or no shard name is served by no replica,
// whatever runs: --shard refuses such names, and the default shard's
// replicas select the owners without the label.
func Served(labels map[string]string, served map[string]bool) bool {
	v, ok := labels[api.ShardLabel]
	switch {
	case ok && v == "":
		return false
	case served != nil:
		return served[v] // only shard names are served: a map lookup, not a validation per owner
	}
	return api.ValidShard(v) == nil
}

// PassedOwner is an admitted owner a roll-out does not wait for.
type PassedOwner struct {
	Owner  string `json:"owner"` // namespace/name
	Reason string `json:"reason"`
}
