package book

import (
	"fmt"
	"runtime"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/rollout"
)

func owner(name, rev, ready string, labels map[string]string) rollout.Owner {
	return rollout.Owner{Namespace: "ns", Name: name, Labels: labels, Revision: rev, Ready: ready, Current: true}
}

// TestBook: a chain is woken by a change of what its roll-out decides on
// of one of its owners (revision, Ready, generation, labels, its
// deletionTimestamp, its chain condition's reason, which chain the owner
// names, its deletion), only while it is watched, and not by an
// event that changes none of them.
func TestBook(t *testing.T) {
	canary := map[string]string{"canary": "true"}
	type step struct {
		name   string
		do     func(b *Book) []string
		wake   []string
		owners map[string][]string // chain → its owners after the step
	}
	set := func(chain string, o rollout.Owner) func(b *Book) []string {
		return func(b *Book) []string { return b.Set(Own, "", chain, o) }
	}
	steps := []step{
		{name: "owners of an unwatched chain: no news", do: set("web", owner("a", "A", "True", canary)),
			owners: map[string][]string{"web": {"ns/a"}}},
		{name: "another", do: set("web", owner("b", "A", "True", nil)),
			owners: map[string][]string{"web": {"ns/a", "ns/b"}}},
		{name: "a change while unwatched: recorded, no news", do: set("web", owner("b", "B", "Unknown", nil)),
			owners: map[string][]string{"web": {"ns/a", "ns/b"}}},
		{name: "watch", do: func(b *Book) []string { b.Watch("web"); return nil },
			owners: map[string][]string{"web": {"ns/a", "ns/b"}}},
		{name: "the same facts (a status write about steps): no news", do: set("web", owner("b", "B", "Unknown", nil))},
		{name: "the same labels in another map: no news", do: set("web", owner("a", "A", "True", map[string]string{"canary": "true"}))},
		{name: "Ready on the target", do: set("web", owner("b", "B", "True", nil)), wake: []string{"web"}},
		{name: "an older generation's status", do: set("web", rollout.Owner{Namespace: "ns", Name: "b", Revision: "B", Ready: "True"}), wake: []string{"web"}},
		{name: "relabelled", do: set("web", owner("a", "A", "True", nil)), wake: []string{"web"}},
		{name: "being deleted (another finalizer holds it)", do: set("web", func() rollout.Owner { o := owner("a", "A", "True", nil); o.Deleting = true; return o }()), wake: []string{"web"}},
		{name: "its chain condition says no chain selects it", do: set("web", func() rollout.Owner {
			o := owner("a", "A", "False", nil)
			o.Deleting, o.ChainReason = true, "SupplyChainNotFound"
			return o
		}()), wake: []string{"web"}},
		{name: "the same again: no news", do: set("web", func() rollout.Owner {
			o := owner("a", "A", "False", nil)
			o.Deleting, o.ChainReason = true, "SupplyChainNotFound"
			return o
		}())},
		{name: "selected again", do: set("web", owner("a", "A", "True", nil)), wake: []string{"web"}},
		{name: "a new owner", do: set("web", owner("c", "", "", nil)), wake: []string{"web"},
			owners: map[string][]string{"web": {"ns/a", "ns/b", "ns/c"}}},
		{name: "an owner that names no chain yet: none to wake", do: set("", owner("d", "", "", nil)),
			owners: map[string][]string{"web": {"ns/a", "ns/b", "ns/c"}}},
		{name: "moved to an unwatched chain: the chain it left", do: set("api", owner("c", "", "", nil)), wake: []string{"web"},
			owners: map[string][]string{"web": {"ns/a", "ns/b"}, "api": {"ns/c"}}},
		{name: "a change of the other chain's owner: no news", do: set("api", owner("c", "A", "True", nil))},
		{name: "deleted", do: func(b *Book) []string { return b.Delete(Own, "ns", "a") }, wake: []string{"web"},
			owners: map[string][]string{"web": {"ns/b"}, "api": {"ns/c"}}},
		{name: "deleted twice, or never known: no news", do: func(b *Book) []string { return append(b.Delete(Own, "ns", "a"), b.Delete(Own, "ns", "zz")...) }},
		{name: "names no chain any more", do: set("", owner("b", "", "", nil)), wake: []string{"web"},
			owners: map[string][]string{"web": nil, "api": {"ns/c"}}},
		{name: "unwatched: no news", do: func(b *Book) []string { b.Unwatch("web"); return b.Set(Own, "", "web", owner("b", "B", "True", nil)) },
			owners: map[string][]string{"web": {"ns/b"}}},
	}
	b := New()
	for _, s := range steps {
		require.Equal(t, s.wake, s.do(b), s.name)
		for chain, want := range s.owners {
			watched := b.Watched(chain)
			var got []string
			for _, o := range b.Watch(chain) {
				got = append(got, o.Key())
			}
			if !watched {
				b.Unwatch(chain)
			}
			sort.Strings(got)
			require.Equal(t, want, got, "%s: owners of %s", s.name, chain)
		}
	}
}

// TestBookFacts: Watch gives back the facts Set recorded, the latest.
func TestBookFacts(t *testing.T) {
	b := New()
	b.Set(Own, "", "web", owner("a", "A", "True", map[string]string{"x": "1"}))
	b.Set(Own, "", "web", owner("a", "B", "False", map[string]string{"x": "2"}))
	require.Equal(t, []rollout.Owner{owner("a", "B", "False", map[string]string{"x": "2"})}, b.Watch("web"))
}

// TestBookSources: an owner moved between shards leaves one watch (a
// delete) and enters the other (an add, a later resourceVersion); a
// replica sees the two watches' events in any order, and the owner's
// events from before the move may come after its add. Whatever the
// order, the book ends with the owner's newest facts, and the other
// watch stopping forgets only what it told last.
func TestBookSources(t *testing.T) {
	type ev struct {
		src     Source
		version string // "": a delete
		rev     string
	}
	do := func(b *Book, e ev) {
		if e.version == "" {
			b.Delete(e.src, "ns", "mover")
			return
		}
		b.Set(e.src, e.version, "web", owner("mover", e.rev, "True", nil))
	}
	// Out of shard a into b, seen by a's replica: its own watch has the
	// last version before the move, then the delete; the others' watch
	// adds the moved owner. Each watch's events come in order.
	own := []ev{{Own, "5", "A"}, {Own, "", ""}}
	oth := []ev{{Others, "6", "B"}, {Others, "7", "C"}}
	// Every interleaving of the two streams.
	var orders func(a, b []ev) [][]ev
	orders = func(a, b []ev) [][]ev {
		if len(a) == 0 || len(b) == 0 {
			return [][]ev{append(append([]ev{}, a...), b...)}
		}
		var out [][]ev
		for _, o := range orders(a[1:], b) {
			out = append(out, append([]ev{a[0]}, o...))
		}
		for _, o := range orders(a, b[1:]) {
			out = append(out, append([]ev{b[0]}, o...))
		}
		return out
	}
	for _, into := range []bool{false, true} { // out of the shard, or into it
		first, second := own, oth
		if into {
			// Into shard a: the others' watch held it, its own adds it.
			first = []ev{{Others, "5", "A"}, {Others, "", ""}}
			second = []ev{{Own, "6", "B"}, {Own, "7", "C"}}
		}
		all := orders(first, second)
		require.Len(t, all, 6)
		for _, order := range all {
			b := New()
			b.Set(first[0].src, "4", "web", owner("mover", "Z", "True", nil))
			for _, e := range order {
				do(b, e)
			}
			got := b.Watch("web")
			require.Equal(t, []rollout.Owner{owner("mover", "C", "True", nil)}, got, "into %v, order %v", into, order)
			b.Forget(first[0].src) // the watch it left stops: the owner stays
			require.Len(t, b.Watch("web"), 1, "into %v, order %v", into, order)
			require.Equal(t, []string{"web"}, b.Forget(second[0].src), "the watch that told of it last stops: forgotten, the watched chain woken")
			require.Empty(t, b.Watch("web"))
		}
	}
	// Versions that are not numbers are taken in the order they come.
	b := New()
	b.Set(Own, "x", "web", owner("a", "A", "True", nil))
	b.Set(Others, "y", "web", owner("a", "B", "True", nil))
	b.Set(Own, "", "web", owner("a", "C", "True", nil))
	require.Equal(t, []rollout.Owner{owner("a", "C", "True", nil)}, b.Watch("web"))
}

// fleet is a book of n owners of chain web, three labels each (as decoded
// from an event: their own strings), and the chain's policy.
func fleet(b *testing.B, n int) (*Book, *rollout.Compiled) {
	bk := New()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("app-%05d", i)
		bk.Set(Own, fmt.Sprint(i+1), "web", rollout.Owner{Namespace: fmt.Sprintf("team-%02d", i%50), Name: name, Revision: "aaaaaaaaaaaa", Ready: "True", Current: true,
			Labels: map[string]string{"app.example.com/chain": "web", "app.kubernetes.io/name": name, "canary": fmt.Sprint(i%100 == 0)}})
	}
	pct := 50
	c, err := rollout.Compile(&rollout.Policy{Waves: []rollout.Wave{
		{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}}, {Percent: &pct}}})
	require.NoError(b, err)
	return bk, c
}

// BenchmarkDecide: one look of a chain's roll-out at 5,000 owners, from
// the book (no owner decoded): Watch and rollout.Next, wave 1 of 3.
func BenchmarkDecide(b *testing.B) {
	bk, c := fleet(b, 5000)
	prev := rollout.Status{Stable: "aaaaaaaaaaaa", Target: "bbbbbbbbbbbb", Wave: 1, Phase: rollout.PhaseProgressing,
		Revisions: []rollout.Revision{{Name: "aaaaaaaaaaaa"}, {Name: "bbbbbbbbbbbb"}}}
	live := &rollout.Revision{Name: "bbbbbbbbbbbb"}
	b.ReportAllocs()
	for b.Loop() {
		rollout.Next(rollout.Input{Policy: c, Prev: prev, Live: live, Owners: bk.Watch("web")})
	}
}

// BenchmarkBookMemory: what the book holds per owner.
func BenchmarkBookMemory(b *testing.B) {
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		bk, _ := fleet(b, 10000)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/10000, "bytes/owner")
		runtime.KeepAlive(bk)
	}
}
