package reconciler

import (
	"maps"
	"slices"
	"sync"
)

// ownerRefs is what one owner used in its last reconcile.
type ownerRefs struct {
	chain     string
	templates []templateKey
}

type templateKey struct{ kind, name string }

// index maps chains and templates to the owners that use them, so that a
// change re-reconciles only those owners. It is rebuilt by reconciles: every
// owner is reconciled once at start.
type index struct {
	mu         sync.Mutex
	byOwner    map[string]ownerRefs
	byChain    map[string]map[string]struct{}
	byTemplate map[templateKey]map[string]struct{}
}

func newIndex() *index {
	return &index{byOwner: map[string]ownerRefs{}, byChain: map[string]map[string]struct{}{}, byTemplate: map[templateKey]map[string]struct{}{}}
}

// set records what owner uses (chain "" when it has none).
func (x *index) set(owner string, refs ownerRefs) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forgetLocked(owner)
	x.byOwner[owner] = refs
	if refs.chain != "" {
		addTo(x.byChain, refs.chain, owner)
	}
	for _, t := range refs.templates {
		addTo(x.byTemplate, t, owner)
	}
}

func (x *index) forget(owner string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forgetLocked(owner)
}

func (x *index) forgetLocked(owner string) {
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

func (x *index) ownersOfChain(chain string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return keys(x.byChain[chain])
}

func (x *index) ownersOfTemplate(kind, name string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return keys(x.byTemplate[templateKey{kind, name}])
}

func addTo[K comparable](m map[K]map[string]struct{}, k K, owner string) {
	s := m[k]
	if s == nil {
		s = map[string]struct{}{}
		m[k] = s
	}
	s[owner] = struct{}{}
}

func removeFrom[K comparable](m map[K]map[string]struct{}, k K, owner string) {
	if s := m[k]; s != nil {
		delete(s, owner)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

func keys(s map[string]struct{}) []string {
	return slices.Sorted(maps.Keys(s))
}
