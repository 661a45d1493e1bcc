// Package book keeps, for the owners of one kind, what a chain's roll-out
// decides on (reconciler/rollout: the chain an owner's status names, its
// labels, the revision it recorded, Ready for its generation), as the
// owners' watch events show them. A chain's roll-out reads its owners from
// here without decoding one, and is woken when one of them changes instead
// of looking at them all every second: a wave that waits on its owners
// costs nothing while they do not move.
//
// Two watches tell a sharded replica of its owners (docs/rollouts.md#shards):
// its own shard's (Own) and, while a chain has a roll-out policy, the
// other shards' (Others). An owner moved between shards leaves one and
// enters the other, and the two watches' events are not ordered with each
// other: the book keeps, of each owner, the facts of the newest
// resourceVersion, and lets a delete remove only what its own watch told.
package book

import (
	"maps"
	"strconv"
	"sync"

	"kontinue.dev/kontinue/reconciler/rollout"
)

// Source is the watch an owner's facts came from.
type Source uint8

// Sources.
const (
	Own    Source = iota // the replica's own shard's owners
	Others               // every other shard's owners
)

// Book is the owners of one kind, by the chain their status names.
type Book struct {
	mu      sync.Mutex
	chainOf map[string]ref                      // owner (namespace/name) → chain, and who told
	byChain map[string]map[string]rollout.Owner // chain → owner → facts
	watched map[string]bool                     // chains whose roll-out waits on its owners
}

// ref is where an owner is filed and which event filed it.
type ref struct {
	chain   string
	src     Source
	version uint64 // its resourceVersion; 0 when not a number
}

// New returns an empty book.
func New() *Book {
	return &Book{chainOf: map[string]ref{}, byChain: map[string]map[string]rollout.Owner{}, watched: map[string]bool{}}
}

// Set records an owner's facts as of resourceVersion version, told by the
// watch src, and the chain its status names ("": none). It returns the
// watched chains the change concerns (the chain it names, the one it
// named before): none when nothing a roll-out reads changed (a status
// write about its steps), or when the book holds a newer version (the
// other watch's: the owner moved between shards). Map work only: it runs
// on informer goroutines.
func (b *Book) Set(src Source, version, chain string, o rollout.Owner) (wake []string) {
	key := o.Key()
	v := number(version)
	b.mu.Lock()
	defer b.mu.Unlock()
	old, had := b.chainOf[key]
	if had && v != 0 && old.version > v {
		return nil // an older version than the book's, from the watch it left
	}
	if had && old.chain == chain {
		b.chainOf[key] = ref{chain, src, v}
		prev := b.byChain[chain][key]
		if chain == "" || same(prev, o) {
			return nil
		}
		if maps.Equal(prev.Labels, o.Labels) {
			o.Labels = prev.Labels // one map per owner kept, not one per event
		}
	}
	if had && old.chain != chain {
		wake = b.removeLocked(old.chain, key, wake)
	}
	// Owners that name no chain are kept too (as the version seen last),
	// so that a late event of the watch an owner left is known as late.
	b.chainOf[key] = ref{chain, src, v}
	if chain == "" {
		return wake
	}
	owners := b.byChain[chain]
	if owners == nil {
		owners = map[string]rollout.Owner{}
		b.byChain[chain] = owners
	}
	owners[key] = o
	if b.watched[chain] {
		wake = append(wake, chain)
	}
	return wake
}

// Delete forgets an owner if the watch src told of it last (a watch that
// an owner left to the other says so after the other may have told of
// its new version); it returns the chain it named if watched.
func (b *Book) Delete(src Source, namespace, name string) (wake []string) {
	key := namespace + "/" + name
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, had := b.chainOf[key]; had && old.src == src {
		delete(b.chainOf, key)
		wake = b.removeLocked(old.chain, key, nil)
	}
	return wake
}

// Forget forgets every owner the watch src told of last (it stopped); it
// returns the watched chains they named, once each.
func (b *Book) Forget(src Source) (wake []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]bool{}
	for key, r := range b.chainOf {
		if r.src != src {
			continue
		}
		delete(b.chainOf, key)
		for _, c := range b.removeLocked(r.chain, key, nil) {
			if !seen[c] {
				seen[c] = true
				wake = append(wake, c)
			}
		}
	}
	return wake
}

// removeLocked takes key out of chain's owners ("": none).
func (b *Book) removeLocked(chain, key string, wake []string) []string {
	if chain == "" {
		return wake
	}
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
	return a.Revision == b.Revision && a.Ready == b.Ready && a.Current == b.Current && a.Deleting == b.Deleting &&
		a.ChainReason == b.ChainReason && maps.Equal(a.Labels, b.Labels)
}

// number reads a resourceVersion: etcd's revision, a number that only
// grows (the API server's watch cache compares them so). 0 when it is not
// one: such events are taken in the order they come.
func number(version string) uint64 {
	n, err := strconv.ParseUint(version, 10, 64)
	if err != nil {
		return 0
	}
	return n
}
