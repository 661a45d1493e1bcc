package owner

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Written is an owner's status write as the hooks after it see it
// (Env.Written: the DORA metrics, notifications). Everything in it is
// read-only: a hook copies what it keeps, and only enqueues (it runs on
// the reconcile's worker).
type Written struct {
	// Owner is the owner as it was read (its status is the one before the
	// write: Prev).
	Owner *unstructured.Unstructured
	Kind  string
	// Chain is the chain's name; Spec its spec (nil when the owner has
	// no chain).
	Chain string
	Spec  *api.ChainSpec
	// Prev and Next are the owner's status before and after the write.
	Prev, Next *st.OwnerStatus
}

// written is op's status write for Env.Written.
func written(obj *unstructured.Unstructured, op *pass) Written {
	w := Written{Owner: obj, Kind: op.env.Flavor.OwnerKind, Chain: op.chainName, Prev: &op.prev, Next: &op.status}
	if op.chain != nil && op.chain.Err == nil {
		w.Spec = &op.chain.Spec
	}
	return w
}
