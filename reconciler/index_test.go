package reconciler

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/api"
)

// A ClusterSupplyChain and a ClusterDelivery of the same name: a change to
// one must wake only the owners of its own flavor.
func TestIndexKeepsChainKindsApart(t *testing.T) {
	x := newIndex()
	w := Key{Kind: api.KindWorkload, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "app"}}
	d := Key{Kind: api.KindDeliverable, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "app"}}
	x.set(w, ownerRefs{chain: chainRef{api.KindClusterSupplyChain, "same"}, templates: []templateKey{{api.KindClusterTemplate, "t"}}})
	x.set(d, ownerRefs{chain: chainRef{api.KindClusterDelivery, "same"}, templates: []templateKey{{api.KindClusterTemplate, "t"}}})

	assert.Equal(t, []Key{w}, x.ownersOfChain(api.KindClusterSupplyChain, "same"))
	assert.Equal(t, []Key{d}, x.ownersOfChain(api.KindClusterDelivery, "same"))
	assert.Equal(t, []Key{d, w}, x.ownersOfTemplate(api.KindClusterTemplate, "t"), "templates are shared by both flavors")

	x.set(w, ownerRefs{chain: chainRef{api.KindClusterSupplyChain, "other"}})
	assert.Empty(t, x.ownersOfChain(api.KindClusterSupplyChain, "same"))
	assert.Equal(t, []Key{d}, x.ownersOfTemplate(api.KindClusterTemplate, "t"))
	x.forget(d)
	assert.Empty(t, x.ownersOfChain(api.KindClusterDelivery, "same"))
	assert.Empty(t, x.ownersOfTemplate(api.KindClusterTemplate, "t"))
}

// Owners that use the same things share one copy of them; each question
// finds exactly the owners that used what it names.
func TestIndexSharesWhatOwnersUse(t *testing.T) {
	x := newIndex()
	refs := func() ownerRefs { // a fresh copy per owner, as reconciles make them
		return ownerRefs{chain: chainRef{api.KindClusterSupplyChain, "c"}, account: accountRef{"ns", "default"},
			templates: []templateKey{{api.KindClusterSourceTemplate, "src"}, {api.KindClusterImageTemplate, "img"}, {api.KindClusterTemplate, "app"}}}
	}
	var all []Key
	for i := range 50 {
		k := Key{Kind: api.KindWorkload, NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("w-%02d", i)}}
		all = append(all, k)
		x.set(k, refs())
	}
	other := Key{Kind: api.KindWorkload, NamespacedName: types.NamespacedName{Namespace: "other", Name: "w"}}
	x.set(other, ownerRefs{chain: chainRef{api.KindClusterSupplyChain, "c2"}, account: accountRef{"other", "default"},
		templates: []templateKey{{api.KindClusterTemplate, "ap"}, {api.KindClusterImageTemplate, "app"}}})

	shared := map[any]bool{}
	for _, k := range all {
		shared[x.byOwner[k]] = true
	}
	assert.Len(t, shared, 1, "one copy of what 50 owners use")

	for _, tt := range []struct {
		name string
		got  []Key
		want []Key
	}{
		{"chain", x.ownersOfChain(api.KindClusterSupplyChain, "c"), all},
		{"other chain", x.ownersOfChain(api.KindClusterSupplyChain, "c2"), []Key{other}},
		{"chain of another kind", x.ownersOfChain(api.KindClusterDelivery, "c"), nil},
		{"first template", x.ownersOfTemplate(api.KindClusterSourceTemplate, "src"), all},
		{"last template", x.ownersOfTemplate(api.KindClusterTemplate, "app"), all},
		{"a name's prefix is not the name", x.ownersOfTemplate(api.KindClusterTemplate, "ap"), []Key{other}},
		{"same name, other kind", x.ownersOfTemplate(api.KindClusterImageTemplate, "app"), []Key{other}},
		{"unused template", x.ownersOfTemplate(api.KindClusterTemplate, "none"), nil},
		{"account", x.ownersOfAccount("ns", "default"), all},
		{"account elsewhere", x.ownersOfAccount("other", "default"), []Key{other}},
	} {
		assert.Equal(t, tt.want, tt.got, tt.name)
	}

	x.forget(all[0])
	assert.Equal(t, all[1:], x.ownersOfChain(api.KindClusterSupplyChain, "c"))
	x.set(all[1], ownerRefs{})
	assert.Equal(t, all[2:], x.ownersOfTemplate(api.KindClusterSourceTemplate, "src"), "a new use replaces the old")
	gated := x.gated(api.KindClusterSupplyChain, func(chain string) bool { return chain == "c" })
	assert.True(t, gated(all[2]))
	assert.False(t, gated(all[1]), "uses no chain now")
	assert.False(t, gated(other))
}

// BenchmarkIndexOwners reports the heap the index keeps per owner (a chain,
// three templates, an account, as the bench's Workloads), over 10,000.
func BenchmarkIndexOwners(b *testing.B) {
	const n = 10000
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{Kind: api.KindWorkload, NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("w-%05d", i)}}
	}
	var per float64
	var keep []*index
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := newIndex()
		for _, k := range keys {
			x.set(k, ownerRefs{chain: chainRef{api.KindClusterSupplyChain, "bench"}, account: accountRef{"bench", "default"},
				templates: []templateKey{{api.KindClusterSourceTemplate, "bench-source"}, {api.KindClusterImageTemplate, "bench-image"}, {api.KindClusterTemplate, "bench-app"}}})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
		keep = append(keep, x)
	}
	runtime.KeepAlive(keep)
	b.ReportMetric(per, "B/owner")
}

func TestKeyString(t *testing.T) {
	k := Key{Kind: api.KindWorkload, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a/b"}}
	got, ok := parseKey(k.String())
	assert.True(t, ok)
	assert.Equal(t, k, got)
	c := Key{Kind: api.KindClusterSupplyChain, NamespacedName: types.NamespacedName{Name: "c"}}
	got, ok = parseKey(c.String())
	assert.True(t, ok)
	assert.Equal(t, c, got)
	_, ok = parseKey("nonsense")
	assert.False(t, ok)
}
