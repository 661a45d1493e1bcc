package reconciler

import (
	"cmp"
	"maps"
	"slices"
	"sync"
)

// ownerRefs is what one owner used in its last reconcile.
type ownerRefs struct {
	chain     chainRef // zero when it has none
	templates []templateKey
	account   accountRef // the service account it stamps as
}

// accountRef names a service account.
type accountRef struct{ namespace, name string }

// chainRef names a chain by kind and name: a ClusterSupplyChain and a
// ClusterDelivery may share a name.
type chainRef struct{ kind, name string }

type templateKey struct{ kind, name string }

// index maps chains and templates to the owners that use them, so that a
// change re-reconciles only those owners. It is rebuilt by reconciles: every
// owner is reconciled once at start.
type index struct {
	mu         sync.Mutex
	byOwner    map[Key]ownerRefs
	byChain    map[chainRef]map[Key]struct{}
	byTemplate map[templateKey]map[Key]struct{}
}

func newIndex() *index {
	return &index{byOwner: map[Key]ownerRefs{}, byChain: map[chainRef]map[Key]struct{}{}, byTemplate: map[templateKey]map[Key]struct{}{}}
}

// set records what owner uses.
func (x *index) set(owner Key, refs ownerRefs) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forgetLocked(owner)
	x.byOwner[owner] = refs
	if refs.chain.name != "" {
		addTo(x.byChain, refs.chain, owner)
	}
	for _, t := range refs.templates {
		addTo(x.byTemplate, t, owner)
	}
}

func (x *index) forget(owner Key) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forgetLocked(owner)
}

func (x *index) forgetLocked(owner Key) {
	old, ok := x.byOwner[owner]
	if !ok {
		return
	}
	removeFrom(x.byChain, old.chain, owner)
	for _, t := range old.templates {
		removeFrom(x.byTemplate, t, owner)
	}
	delete(x.byOwner, owner)
}

func (x *index) ownersOfChain(kind, name string) []Key {
	x.mu.Lock()
	defer x.mu.Unlock()
	return sortedKeys(x.byChain[chainRef{kind, name}])
}

func (x *index) ownersOfTemplate(kind, name string) []Key {
	x.mu.Lock()
	defer x.mu.Unlock()
	return sortedKeys(x.byTemplate[templateKey{kind, name}])
}

// ownersOfAccount are the owners whose last reconcile stamped (or would
// have stamped) as the account. A walk over every owner: it runs only when
// an account is created or deleted, which is rare, and saves a second map
// entry per owner.
func (x *index) ownersOfAccount(namespace, name string) []Key {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Key
	for k, refs := range x.byOwner {
		if refs.account == (accountRef{namespace, name}) {
			out = append(out, k)
		}
	}
	return out
}

func addTo[K, V comparable](m map[K]map[V]struct{}, k K, v V) {
	s := m[k]
	if s == nil {
		s = map[V]struct{}{}
		m[k] = s
	}
	s[v] = struct{}{}
}

func removeFrom[K, V comparable](m map[K]map[V]struct{}, k K, v V) {
	if s := m[k]; s != nil {
		delete(s, v)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

func sortedKeys(s map[Key]struct{}) []Key {
	return slices.SortedFunc(maps.Keys(s), func(a, b Key) int { return cmp.Compare(a.String(), b.String()) })
}

// gated reports whether the chain an owner used last (of kind) has a
// roll-out (gate: chain.Gate), whose waves wake the owner, not an edit.
func (x *index) gated(kind string, gate func(chain string) bool) func(owner Key) bool {
	return func(owner Key) bool {
		x.mu.Lock()
		c := x.byOwner[owner].chain
		x.mu.Unlock()
		return c.kind == kind && gate(c.name)
	}
}
