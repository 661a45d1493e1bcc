package tracking

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

const packedSample = `{"apiVersion":"carto.run/v1alpha1","kind":"Workload","metadata":{"name":"app","namespace":"dev","uid":"u-1","resourceVersion":"42",
	"labels":{"app":"x"},"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","keep":"me"},
	"ownerReferences":[{"apiVersion":"v1","kind":"Thing","name":"t","uid":"o-1","controller":true}],
	"managedFields":[{"manager":"kontinue","operation":"Update","fieldsV1":{"f:spec":{}}}]},
	"spec":{"replicas":3,"ratio":0.5,"list":[1,"a",true,null]},"status":{"observedGeneration":2}}`

func TestPackedRoundTrip(t *testing.T) {
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON([]byte(packedSample)))
	want := u.DeepCopy()
	Compact(want)

	item, err := pack(u)
	require.NoError(t, err)
	p, ok := item.(*packed)
	require.True(t, ok)
	assert.Less(t, len(p.raw), len(packedSample), "the cache keeps no managedFields nor last-applied copy")

	got, ok := unpack(item)
	require.True(t, ok)
	assert.Equal(t, want.Object, got.Object, "decoded as the API machinery decodes (int64 stays int64)")
	assert.IsType(t, int64(0), got.Object["spec"].(map[string]any)["replicas"])
	assert.True(t, HasUpdateEntry(got), "whether Kontinue created it survives packing")

	again, _ := unpack(item)
	again.Object["spec"] = "changed"
	third, _ := unpack(item)
	assert.Equal(t, want.Object["spec"], third.Object["spec"], "every read is its own copy")

	// What the informer and the indexers read, without decoding.
	key, err := cache.MetaNamespaceKeyFunc(item)
	require.NoError(t, err)
	assert.Equal(t, "dev/app", key)
	ns, err := cache.MetaNamespaceIndexFunc(item)
	require.NoError(t, err)
	assert.Equal(t, []string{"dev"}, ns)
	uids, err := controllerUID(item)
	require.NoError(t, err)
	assert.Equal(t, []string{"o-1"}, uids)
	m, ok := metaOf(item.(*packed).DeepCopyObject())
	require.True(t, ok)
	assert.Equal(t, "42", m.GetResourceVersion())
	assert.Equal(t, "u-1", string(m.GetUID()))
}

func BenchmarkPackAndRead(b *testing.B) {
	raw := []byte(packedSample)
	b.ReportAllocs()
	for b.Loop() {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(raw, &u.Object); err != nil {
			b.Fatal(err)
		}
		item, err := pack(u)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := unpack(item); !ok {
			b.Fatal("unpack")
		}
	}
}
