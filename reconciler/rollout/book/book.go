// Package book keeps, for the owners of one kind, what a chain's roll-out
// decides on (reconciler/rollout: the chain an owner's status names, its
// labels, the revision it recorded, Ready for its generation), as the
// owners' watch events show them. A chain's roll-out reads its owners from
// here without decoding one, and is woken when one of them changes instead
// of looking at them all every second: a wave that waits on its owners
// costs nothing while they do not move.
package book

import (
	"maps"
	"sync"

	"kontinue.dev/kontinue/reconciler/rollout"
)

// Book is the owners of one kind, by the chain their status names.
type Book struct {
	mu      sync.Mutex
	chainOf map[string]string                   // owner (namespace/name) → chain
	byChain map[string]map[string]rollout.Owner // chain → owner → facts
	watched map[string]bool                     // chains whose roll-out waits on its owners
}

// New returns an empty book.
func New() *Book {
	return &Book{chainOf: map[string]string{}, byChain: map[string]map[string]rollout.Owner{}, watched: map[string]bool{}}
}

// Set records an owner's facts and the chain its status names ("": none).
// It returns the watched chains the change concerns (the chain it names,
// the one it named before): none when nothing a roll-out reads changed
// (a status write about its steps). Map work only: it runs on informer
// goroutines.
func (b *Book) Set(chain string, o rollout.Owner) (wake []string) {
	key := o.Key()
	b.mu.Lock()
	defer b.mu.Unlock()
	old, had := b.chainOf[key]
	if had && old == chain {
		prev := b.byChain[chain][key]
		if same(prev, o) {
			return nil
		}
		if maps.Equal(prev.Labels, o.Labels) {
			o.Labels = prev.Labels // one map per owner kept, not one per event
		}
	}
	if had && old != chain {
		wake = b.removeLocked(old, key, wake)
	}
	if chain == "" {
		return wake
	}
	owners := b.byChain[chain]
	if owners == nil {
		owners = map[string]rollout.Owner{}
		b.byChain[chain] = owners
	}
	owners[key] = o
	b.chainOf[key] = chain
	if b.watched[chain] {
		wake = append(wake, chain)
	}
	return wake
}

// Delete forgets an owner; it returns the chain it named if watched.
func (b *Book) Delete(namespace, name string) (wake []string) {
	key := namespace + "/" + name
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, had := b.chainOf[key]; had {
		wake = b.removeLocked(old, key, nil)
	}
	return wake
}

func (b *Book) removeLocked(chain, key string, wake []string) []string {
	delete(b.chainOf, key)
	if owners := b.byChain[chain]; owners != nil {
		delete(owners, key)
		if len(owners) == 0 {
			delete(b.byChain, chain)
		}
	}
	if b.watched[chain] {
		wake = append(wake, chain)
	}
	return wake
}

// Watch returns the owners whose status names chain, and watches chain:
// from now on Set and Delete report a change of one of them, until
// Unwatch. Both under one lock, so that no change falls between the read
// and the watch. The owners share their Labels with the book: read only.
func (b *Book) Watch(chain string) []rollout.Owner {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watched[chain] = true
	owners := b.byChain[chain]
	out := make([]rollout.Owner, 0, len(owners))
	for _, o := range owners {
		out = append(out, o)
	}
	return out
}

// Unwatch stops reporting changes of chain's owners (no roll-out under
// way, the chain gone).
func (b *Book) Unwatch(chain string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.watched, chain)
}

// Watched reports whether chain is watched.
func (b *Book) Watched(chain string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.watched[chain]
}

func same(a, b rollout.Owner) bool {
	return a.Revision == b.Revision && a.Ready == b.Ready && a.Current == b.Current && maps.Equal(a.Labels, b.Labels)
}
