package tracking

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/rollout"
	"kontinue.dev/kontinue/reconciler/rollout/book"
)

// What a replica pays for an owner of another shard while a chain has a
// roll-out policy (the Manager's others' watch, trimmed by rollout.Trim):
// its cache entry, and the work of each of its watch events.

// BenchmarkTrimmedOwnerCache reports the heap one owner of another shard
// keeps in the trimmed watch's cache (its packed, trimmed item) over
// 10,000 owners with their own names and UIDs, against the packed whole
// owner its own shard's watch keeps (BenchmarkPackedCache/workload).
func BenchmarkTrimmedOwnerCache(b *testing.B) {
	const n = 10000
	transform := trimmed(rollout.Trim)
	objs := distinctSamples(b, "workload.json", n)
	b.ReportMetric(heapPerItem(b, n, func(i int) (any, error) { return transform(objs[i].DeepCopy()) }), "B/owner")
}

// BenchmarkTrimmedOwnerEvent is the work one update of an owner of
// another shard costs the replica: the informer's decode of the object
// the API server sent (decode: the whole owner, as every watch decodes
// it), the transform (trim, marshal, compress), and the handler's part
// (the old and new items unpacked, their facts read, the book told).
// The sub-benchmark decode alone is the share that does not depend on
// trimming.
func BenchmarkTrimmedOwnerEvent(b *testing.B) {
	u := sample(b, "workload.json")
	doc, err := u.MarshalJSON()
	require.NoError(b, err)
	transform := trimmed(rollout.Trim)
	old, err := transform(u.DeepCopy())
	require.NoError(b, err)
	bk := book.New()
	bk.Watch("bench")
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := (&unstructured.Unstructured{}).UnmarshalJSON(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("event", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(doc); err != nil {
				b.Fatal(err)
			}
			item, err := transform(obj)
			if err != nil {
				b.Fatal(err)
			}
			o, ok1 := unpack(old)
			n, ok2 := unpack(item)
			if !ok1 || !ok2 || o == nil {
				b.Fatal("unpack")
			}
			chain, facts := rollout.ReadOwner(n.Object, rollout.RefSupplyChain)
			bk.Set(book.Others, n.GetResourceVersion(), chain, facts)
		}
	})
}

// TestTrimmedOwnerReadsAlike: the sample owner, trimmed and packed as the
// others' watch caches it, reads as the whole owner does.
func TestTrimmedOwnerReadsAlike(t *testing.T) {
	u := sample(t, "workload.json")
	item, err := trimmed(rollout.Trim)(u.DeepCopy())
	require.NoError(t, err)
	got, ok := unpack(item)
	require.True(t, ok)
	c1, o1 := rollout.ReadOwner(u.Object, rollout.RefSupplyChain)
	c2, o2 := rollout.ReadOwner(got.Object, rollout.RefSupplyChain)
	require.Equal(t, c1, c2)
	require.NotEmpty(t, c1)
	require.Equal(t, o1, o2)
	require.Equal(t, u.GetResourceVersion(), got.GetResourceVersion())
	require.Equal(t, u.GetUID(), got.GetUID())
	require.Nil(t, got.Object["spec"])
}
