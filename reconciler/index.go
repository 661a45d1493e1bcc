package reconciler

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"unique"
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
//
// It keeps one entry per owner and no reverse maps: a chain, template or
// account change walks the owners (10,000: well under a millisecond, and
// rare), where a set per chain and per template cost ~300 bytes per owner.
// Owners that use the same chain, templates and account (most do) share
// one copy of what they use (unique.Make).
type index struct {
	mu      sync.Mutex
	byOwner map[Key]unique.Handle[used]
}

// used is ownerRefs in a comparable form: templates as one string.
type used struct {
	chain     chainRef
	templates string // each template as kind, NUL, name, NUL; in order
	account   accountRef
}

func usedOf(refs ownerRefs) used {
	var b strings.Builder
	for _, t := range refs.templates {
		b.WriteString(t.kind)
		b.WriteByte(0)
		b.WriteString(t.name)
		b.WriteByte(0)
	}
	return used{chain: refs.chain, templates: b.String(), account: refs.account}
}

// uses reports whether the owner used template t (kinds and names hold no
// NUL: Kubernetes names cannot).
func (u used) uses(t templateKey) bool {
	rest := u.templates
	for rest != "" {
		kind, r, _ := strings.Cut(rest, "\x00")
		name, r, _ := strings.Cut(r, "\x00")
		if kind == t.kind && name == t.name {
			return true
		}
		rest = r
	}
	return false
}

func newIndex() *index {
	return &index{byOwner: map[Key]unique.Handle[used]{}}
}

// set records what owner uses.
func (x *index) set(owner Key, refs ownerRefs) {
	h := unique.Make(usedOf(refs))
	x.mu.Lock()
	defer x.mu.Unlock()
	x.byOwner[owner] = h
}

func (x *index) forget(owner Key) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.byOwner, owner)
}

// owners returns, sorted, the owners whose use matches; match is asked
// once per distinct use.
func (x *index) owners(match func(used) bool) []Key {
	x.mu.Lock()
	defer x.mu.Unlock()
	seen := map[unique.Handle[used]]bool{}
	var out []Key
	for k, h := range x.byOwner {
		m, ok := seen[h]
		if !ok {
			m = match(h.Value())
			seen[h] = m
		}
		if m {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b Key) int { return cmp.Compare(a.String(), b.String()) })
	return out
}

func (x *index) ownersOfChain(kind, name string) []Key {
	c := chainRef{kind, name}
	return x.owners(func(u used) bool { return u.chain == c })
}

func (x *index) ownersOfTemplate(kind, name string) []Key {
	t := templateKey{kind, name}
	return x.owners(func(u used) bool { return u.uses(t) })
}

// ownersOfAccount are the owners whose last reconcile stamped (or would
// have stamped) as the account.
func (x *index) ownersOfAccount(namespace, name string) []Key {
	a := accountRef{namespace, name}
	return x.owners(func(u used) bool { return u.account == a })
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

// gated reports whether the chain an owner used last (of kind) has a
// roll-out (gate: chain.Gate), whose waves wake the owner, not an edit.
func (x *index) gated(kind string, gate func(chain string) bool) func(owner Key) bool {
	return func(owner Key) bool {
		x.mu.Lock()
		h, ok := x.byOwner[owner]
		x.mu.Unlock()
		var c chainRef
		if ok {
			c = h.Value().chain
		}
		return c.kind == kind && gate(c.name)
	}
}
