package tracking

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// testdata: a Workload of the bench's 3-step chain with the status
// Kontinue wrote, and one of the ConfigMaps it stamped, as the API server
// served them (managedFields included).
func sample(t testing.TB, file string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(b))
	return u
}

// cachedJSON is obj as the cache holds it before compression.
func cachedJSON(t testing.TB, obj *unstructured.Unstructured) []byte {
	t.Helper()
	c := obj.DeepCopy()
	Compact(c)
	doc, err := json.Marshal(c.Object)
	require.NoError(t, err)
	return doc
}

func TestCompressRoundTrip(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 100<<10)
	for i := range noise {
		noise[i] = byte(rnd.Uint32())
	}
	for _, tt := range []struct {
		name string
		doc  []byte
	}{
		{"empty", nil},
		{"shortest object", []byte(`{}`)},
		{"workload", cachedJSON(t, sample(t, "workload.json"))},
		{"configmap", cachedJSON(t, sample(t, "configmap.json"))},
		{"not JSON, incompressible", noise},
		{"over the dictionary's reach and the scratch bound", bytes.Repeat(cachedJSON(t, sample(t, "configmap.json")), 400)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := compress(tt.doc)
			for _, dst := range []struct {
				name string
				buf  []byte
			}{{"nil", nil}, {"too small", make([]byte, 0, 1)}, {"large enough", make([]byte, 0, len(tt.doc)+1)}} {
				got, err := decompress(dst.buf, c)
				require.NoError(t, err, dst.name)
				assert.True(t, bytes.Equal(tt.doc, got), "%s: %d bytes back of %d", dst.name, len(got), len(tt.doc))
				if dst.name == "large enough" && len(got) > 0 {
					assert.Same(t, &dst.buf[:1][0], &got[0], "decompressed into the buffer given")
				}
			}
			// What the cache keeps is its own: a later compression does not
			// write over it (the scratch buffer is reused).
			kept := bytes.Clone(c)
			compress(noise[:len(noise)/2])
			assert.Equal(t, kept, c)
		})
	}
}

func TestDecompressRefusesDamagedInput(t *testing.T) {
	good := compress(cachedJSON(t, sample(t, "workload.json")))
	for _, tt := range []struct {
		name string
		c    []byte
	}{
		{"empty", nil},
		{"truncated", good[:len(good)/2]},
		{"length only", good[:2]},
		{"garbage", []byte("\xff\xff\xff\xff\xff\x0fnot s2")},
		{"an offset before the dictionary", []byte{0x10, 0xfe, 0xff, 0xff, 0x00}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decompress(nil, tt.c)
			assert.Error(t, err)
		})
	}
}

// The dictionary is what makes the cached objects small: the vocabulary
// every object repeats is in it, not in each object.
func TestDictionaryShrinksCachedObjects(t *testing.T) {
	for _, tt := range []struct {
		file string
		max  float64 // compressed / JSON
	}{
		{"workload.json", 0.25},
		{"configmap.json", 0.4},
	} {
		doc := cachedJSON(t, sample(t, tt.file))
		c := compress(doc)
		plain := s2.Encode(nil, doc)
		t.Logf("%s: JSON %d bytes, s2 alone %d, with the dictionary %d", tt.file, len(doc), len(plain), len(c))
		assert.Less(t, float64(len(c))/float64(len(doc)), tt.max, tt.file)
		assert.Less(t, float64(len(c)), 0.7*float64(len(plain)), "%s: the dictionary saves at least 30%% over s2 alone", tt.file)
	}
}

// Packed objects round-trip through every reader: the decoded object
// (Get, List, events), the JSON (EachJSON's scan of owners), the
// metadata the informer and the indexers read.
func TestPackedRealObjectsRoundTrip(t *testing.T) {
	for _, file := range []string{"workload.json", "configmap.json"} {
		t.Run(file, func(t *testing.T) {
			u := sample(t, file)
			want := u.DeepCopy()
			Compact(want)
			item, err := pack(u.DeepCopy())
			require.NoError(t, err)
			p := item.(*packed)

			got, ok := unpack(item)
			require.True(t, ok)
			assert.Equal(t, want.Object, got.Object)

			doc, ok := jsonOf(item, nil)
			require.True(t, ok)
			assert.JSONEq(t, string(cachedJSON(t, u)), string(doc))

			m, ok := metaOf(item)
			require.True(t, ok)
			assert.Equal(t, u.GetName(), m.GetName())
			assert.Equal(t, u.GetNamespace(), m.GetNamespace())
			assert.Equal(t, u.GetUID(), m.GetUID())
			assert.Equal(t, u.GetResourceVersion(), m.GetResourceVersion())
			assert.Equal(t, u.GetOwnerReferences(), m.GetOwnerReferences())
			assert.Nil(t, m.GetLabels(), "not kept: the decoded object has them")

			c := item.(*packed).DeepCopyObject().(*packed)
			c.meta.owners = append(c.meta.owners[:0:0], c.meta.owners...)
			assert.Equal(t, p.meta, c.meta)
		})
	}
}

// Reads share scratch buffers: each decoded object must own its strings,
// never point into a buffer that the next read overwrites.
func TestUnpackedObjectsOutliveTheScratchBuffer(t *testing.T) {
	var items []any
	var want []map[string]any
	for i := range 20 {
		u := sample(t, []string{"workload.json", "configmap.json"}[i%2])
		u.SetName(strings.Repeat("n", i+1))
		c := u.DeepCopy()
		Compact(c)
		want = append(want, c.Object)
		item, err := pack(u)
		require.NoError(t, err)
		items = append(items, item)
	}
	var got []*unstructured.Unstructured
	for _, it := range items {
		u, ok := unpack(it)
		require.True(t, ok)
		got = append(got, u)
		jsonOf(it, make([]byte, 0, 64<<10)) // more reads, other buffers
		runtime.GC()                        // the pool may hand the buffers on
	}
	for i := range got {
		assert.Equal(t, want[i], got[i].Object, "object %d", i)
	}
}

// Whatever bytes come in, what is compressed decompresses to them.
func FuzzCompress(f *testing.F) {
	f.Add([]byte(nil))
	f.Add([]byte(packedSample))
	f.Add(cachedJSON(f, sample(f, "workload.json")))
	f.Add(cachedJSON(f, sample(f, "configmap.json")))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := decompress(nil, compress(doc))
		require.NoError(t, err)
		require.True(t, bytes.Equal(doc, got))
	})
}

// Whatever object the API server sends, the cache gives back the JSON it
// kept (compacted, as marshalled), and decodes it as UnmarshalJSON does.
func FuzzPack(f *testing.F) {
	f.Add([]byte(packedSample))
	for _, file := range []string{"workload.json", "configmap.json"} {
		b, err := os.ReadFile("testdata/" + file)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{"kind":"X","apiVersion":"v1","metadata":{"name":"\u00e9\u0000","ownerReferences":[{"uid":"u","controller":true}]},"spec":[1e400]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(in) != nil {
			return // the API machinery refuses it before any cache
		}
		want := cachedJSON(t, u)
		item, err := pack(u)
		require.NoError(t, err)
		doc, ok := jsonOf(item, nil)
		require.True(t, ok)
		require.Equal(t, string(want), string(doc))
		got, ok := unpack(item)
		require.True(t, ok)
		again := &unstructured.Unstructured{}
		require.NoError(t, again.UnmarshalJSON(want))
		require.Equal(t, again.Object, got.Object)
	})
}

// BenchmarkPacked measures what packing and reading one cached object
// costs, against the JSON decode every read does anyway (decode-json) and
// the marshal every pack does: compress and decompress are the codec's
// own share. It reports the bytes the cache keeps for the object (JSON:
// before compression).
func BenchmarkPacked(b *testing.B) {
	for _, file := range []string{"workload.json", "configmap.json"} {
		u := sample(b, file)
		doc := cachedJSON(b, u)
		c := compress(doc)
		item, err := pack(u.DeepCopy())
		require.NoError(b, err)
		buf := make([]byte, 0, 8<<10)
		name := strings.TrimSuffix(file, ".json")
		b.Run(name+"/compress", func(b *testing.B) {
			for b.Loop() {
				compress(doc)
			}
			b.ReportMetric(float64(len(doc)), "JSON-bytes")
			b.ReportMetric(float64(len(c)), "kept-bytes")
		})
		b.Run(name+"/decompress", func(b *testing.B) {
			for b.Loop() {
				if _, err := decompress(buf, c); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/decode-json", func(b *testing.B) {
			for b.Loop() {
				if err := (&unstructured.Unstructured{}).UnmarshalJSON(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/marshal-json", func(b *testing.B) {
			for b.Loop() {
				if _, err := json.Marshal(u.Object); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/pack", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pack(u.DeepCopy()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/unpack", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := unpack(item); !ok {
					b.Fatal("unpack")
				}
			}
		})
	}
}

// BenchmarkPackedCache reports the heap one cached object keeps (the
// packed item: its metadata and its compressed JSON) over 10,000 copies
// with their own names and UIDs, as an informer keeps them.
func BenchmarkPackedCache(b *testing.B) {
	const n = 10000
	for _, file := range []string{"workload.json", "configmap.json"} {
		b.Run(strings.TrimSuffix(file, ".json"), func(b *testing.B) {
			objs := distinctSamples(b, file, n)
			b.ReportMetric(heapPerItem(b, n, func(i int) (any, error) { return pack(objs[i].DeepCopy()) }), "B/object")
		})
	}
}

// distinctSamples are n copies of the sample file with their own names and
// UIDs.
func distinctSamples(b *testing.B, file string, n int) []*unstructured.Unstructured {
	objs := make([]*unstructured.Unstructured, n)
	for i := range objs {
		u := sample(b, file)
		u.SetName(u.GetName() + "-" + string(rune('a'+i%26)) + strings.Repeat("x", i%7))
		u.SetUID(types.UID(string(u.GetUID())[:30] + types6(i)))
		objs[i] = u
	}
	return objs
}

// heapPerItem is the heap that n items made by item keep, per item, as an
// informer keeps only what its transform returned (measured in b.Loop).
func heapPerItem(b *testing.B, n int, item func(i int) (any, error)) float64 {
	var per float64
	for b.Loop() {
		kept := make([]any, n)
		for i := range kept {
			it, err := item(i)
			if err != nil {
				b.Fatal(err)
			}
			kept[i] = it
		}
		var with, without runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&with)
		runtime.KeepAlive(kept)
		runtime.GC()
		runtime.ReadMemStats(&without)
		per = float64(int64(with.HeapAlloc)-int64(without.HeapAlloc)) / float64(n)
	}
	return per
}

// types6 is i as six hex digits: the end of a distinct UID.
func types6(i int) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 6)
	for k := 5; k >= 0; k-- {
		out[k] = hex[i&15]
		i >>= 4
	}
	return string(out)
}
