package tracking

import (
	"encoding/json"
	"fmt"
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

const serviceAccountSample = `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"builder","namespace":"dev-%05d","uid":"6f1c2a4e-0000-4000-8000-%012d",
	"resourceVersion":"%d","creationTimestamp":"2025-01-01T00:00:00Z","labels":{"app.kubernetes.io/part-of":"ci"},
	"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\"}","eks.amazonaws.com/role-arn":"arn:aws:iam::123456789012:role/builder"},
	"managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","time":"2025-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{}}}}]},
	"secrets":[{"name":"builder-token"}],"imagePullSecrets":[{"name":"registry"}]}`

func serviceAccount(t testing.TB, i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(fmt.Appendf(nil, serviceAccountSample, i, i, i)))
	return u
}

func TestSlimKeepsOnlyWhatSaysItExists(t *testing.T) {
	item, err := slim(serviceAccount(t, 7))
	require.NoError(t, err)
	got, ok := unpack(item)
	require.True(t, ok)
	assert.Equal(t, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{
		"name": "builder", "namespace": "dev-00007", "uid": "6f1c2a4e-0000-4000-8000-000000000007", "resourceVersion": "7"}}, got.Object)
	key, err := cache.MetaNamespaceKeyFunc(item)
	require.NoError(t, err)
	assert.Equal(t, "dev-00007/builder", key)
	m, ok := metaOf(item)
	require.True(t, ok)
	assert.Equal(t, "6f1c2a4e-0000-4000-8000-000000000007", string(m.GetUID()))
}

// BenchmarkServiceAccountCache reports the heap one cached ServiceAccount
// keeps, slim (what Kontinue caches) and compacted (a full decoded copy,
// as other watches keep), over 10,000 accounts in 10,000 namespaces.
func BenchmarkServiceAccountCache(b *testing.B) {
	const n = 10000
	for _, mode := range []struct {
		name      string
		transform func(any) (any, error)
	}{{"slim", slim}, {"compact", compact}} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportMetric(heapPerItem(b, n, func(i int) (any, error) { return mode.transform(serviceAccount(b, i)) }), "B/account")
		})
	}
}
