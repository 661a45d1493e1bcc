package reconciler

import (
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
	assert.Empty(t, x.byTemplate)
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
