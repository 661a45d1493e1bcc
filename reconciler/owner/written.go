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

// written is the owner's status write (status, over l's) for Env.Written.
func written(env *Env, obj *unstructured.Unstructured, l *loaded, status *st.OwnerStatus) Written {
	w := Written{Owner: obj, Kind: env.Flavor.OwnerKind, Chain: l.chainName, Prev: &l.prev, Next: status}
	if l.chain != nil && l.chain.Err == nil {
		w.Spec = &l.chain.Spec
	}
	return w
}
