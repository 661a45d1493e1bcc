package tracking

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// serializers returns the JSON serializer and stream serializer of the
// dynamic client (base) and of NewDynamic's (fast).
func serializers(t testing.TB) (base, fast runtime.SerializerInfo) {
	ns := dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer
	for _, i := range ns.SupportedMediaTypes() {
		if i.MediaType == runtime.ContentTypeJSON {
			base = i
		}
	}
	for _, i := range newFastSerializer(ns).SupportedMediaTypes() {
		if i.MediaType == runtime.ContentTypeJSON {
			fast = i
		}
	}
	require.NotNil(t, base.Serializer)
	require.NotNil(t, fast.Serializer)
	return base, fast
}

var objectCases = []string{
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"1"}}`,
	`{"apiVersion":"carto.run/v1alpha1","kind":"Workload","metadata":{"name":"w","generation":3},"status":{"conditions":[]}}`,
	`{"apiVersion":"v1","kind":"Status","status":"Failure","message":"gone","reason":"NotFound","code":404}`,
	`{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a"}}]}`,
	`{"kind":"ConfigMap","metadata":{"name":"no version"}}`,
	`{"apiVersion":"v1","metadata":{"name":"no kind"}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","data":{"n":1e400}}`,
	`{"apiVersion":"v1","kind":"ConfigMap",}`,
	`null`, `[]`, ``,
	// apimachinery reads kind and apiVersion with encoding/json first.
	`{"apiVersion":5,"kind":"X"}`,
	`{"apiVersion":["v1"],"kind":"X"}`,
	`{"apiVersion":null,"kind":"X"}`,
	`{"apiVersion":"v1","kind":"X","Kind":5}`,
	`{"apiVersion":"v1","kind":"X","\u212aind":5}`,
	`{"apiVersion":"v1","kind":"X","APIVERSION":1}`,
	`{"apiVersion":"v1","kind":"X","KIND":"Status"}`,
	`{"apiVersion":"v1","kind":"X","Kind":"Y"}`,
	// Kinds apimachinery types by name, whatever the apiVersion.
	`{"apiVersion":"g/v","kind":"Status","code":410}`,
	`{"apiVersion":"g/v","kind":"APIGroup","name":"g"}`,
}

func TestObjectDecoderAsDynamic(t *testing.T) {
	base, fast := serializers(t)
	for _, c := range objectCases {
		t.Run(c, func(t *testing.T) {
			for _, into := range []func() runtime.Object{
				func() runtime.Object { return nil },
				func() runtime.Object { return &unstructured.Unstructured{} },
				func() runtime.Object { return &metav1.Status{} },
			} {
				want, wantGVK, wantErr := base.Serializer.Decode([]byte(c), nil, into())
				got, gotGVK, err := fast.Serializer.Decode([]byte(c), nil, into())
				require.Equal(t, wantErr, err)
				assert.Equal(t, want, got)
				assert.Equal(t, wantGVK, gotGVK)
			}
		})
	}
}

func TestEventDecoderAsDynamic(t *testing.T) {
	base, fast := serializers(t)
	for _, c := range []string{
		`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}}`,
		`{"object":{"kind":"ConfigMap","metadata":{"name":"x","a":[1,{"b":"\u00e9\n"}]}} , "type":"MODIFIED"}` + "\n",
		`{"type":"ERROR","object":{"apiVersion":"v1","kind":"Status","status":"Failure","code":410,"reason":"Expired"}}`,
		`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
		`{"type":"DELETED","object":null}`,
		`{"type":"ADDED"}`,
		`{"type":"ADDED","object":{"a":"\q"}}`,
		`{"type":"ADDED","object":{"a":1},"extra":true}`,
		`{"type":"ADDED","object":{"a":1}} x`,
		`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap"},}`,
		`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap"} , }`,
		`{"type":"ADDED","object":{"kind":"X","a":` + strings.Repeat("[", 9997) + "[]" + strings.Repeat("]", 9997) + `}}`,
		`{"type":"ADDED","object":{"kind":"X","a":` + strings.Repeat("[", 9998) + "1" + strings.Repeat("]", 9998) + `}}`,
	} {
		t.Run(c, func(t *testing.T) {
			var want, got metav1.WatchEvent
			_, _, wantErr := base.StreamSerializer.Serializer.Decode([]byte(c), nil, &want)
			_, _, err := fast.StreamSerializer.Serializer.Decode([]byte(c), nil, &got)
			require.Equal(t, wantErr == nil, err == nil, "base: %v, fast: %v", wantErr, err)
			assert.Equal(t, want, got)
			if len(want.Object.Raw) == 0 {
				return
			}
			// The event's object decodes the same.
			wantObj, _, wantErr := base.Serializer.Decode(want.Object.Raw, nil, nil)
			gotObj, _, err := fast.Serializer.Decode(got.Object.Raw, nil, nil)
			require.Equal(t, wantErr, err)
			assert.Equal(t, wantObj, gotObj)
		})
	}
}

// deepObject is a ConfigMap-like object whose JSON nests depth levels (the
// object itself is one).
func deepObject(depth int) string {
	return `{"apiVersion":"v1","kind":"X","metadata":{"name":"deep"},"spec":` +
		strings.Repeat(`{"a":`, depth-2) + "1" + strings.Repeat("}", depth-2) + "}"
}

// The API server reads and sends objects up to 10,000 levels deep, and
// sends one in a watch event one level deeper, which apimachinery's
// decoder refuses for the whole event (and so for the watch). An event's
// object decodes here whenever apimachinery decodes the object alone.
func TestEventDecoderDecodesWhatTheAPIServerSends(t *testing.T) {
	base, fast := serializers(t)
	for _, depth := range []int{9998, 9999, 10000, 10001} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			obj := deepObject(depth)
			wantObj, _, wantErr := base.Serializer.Decode([]byte(obj), nil, nil)
			frame := `{"type":"MODIFIED","object":` + obj + "}"
			var ev metav1.WatchEvent
			_, _, err := fast.StreamSerializer.Serializer.Decode([]byte(frame), nil, &ev)
			if wantErr != nil {
				require.Error(t, err, "an object apimachinery cannot read alone is not one the API server sends")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "MODIFIED", ev.Type)
			assert.Equal(t, obj, string(ev.Object.Raw))
			got, _, err := fast.Serializer.Decode(ev.Object.Raw, nil, nil)
			require.NoError(t, err)
			assert.True(t, reflect.DeepEqual(wantObj, got), "the event's object decodes as apimachinery decodes it alone")
		})
	}
}

func BenchmarkObjectDecoder(b *testing.B) {
	doc, err := os.ReadFile("testdata/workload.json")
	require.NoError(b, err)
	base, fast := serializers(b)
	for name, s := range map[string]runtime.Serializer{"apimachinery": base.Serializer, "fast": fast.Serializer} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, _, err := s.Decode(doc, nil, &unstructured.Unstructured{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func FuzzEventDecoder(f *testing.F) {
	base, fast := serializers(f)
	f.Add([]byte(`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}}`))
	f.Add([]byte(`{"object":{"kind":"K","a":["\u00e9",1.5,null]},"type":"MODIFIED"}`))
	f.Add([]byte(`{"type":"ERROR","object":{"apiVersion":"v1","kind":"Status","code":410}}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"K"},}`))
	f.Fuzz(func(t *testing.T, frame []byte) {
		var want, got metav1.WatchEvent
		_, _, wantErr := base.StreamSerializer.Serializer.Decode(frame, nil, &want)
		_, _, err := fast.StreamSerializer.Serializer.Decode(frame, nil, &got)
		if wantErr != nil && err == nil && strings.Contains(wantErr.Error(), "exceeded max depth") {
			// Only the event's one level more: its object reads alone.
			var v any
			require.NoError(t, utiljson.Unmarshal(got.Object.Raw, &v), "%q", frame)
			return
		}
		if (wantErr == nil) != (err == nil) {
			t.Fatalf("base: %v, fast: %v: %q", wantErr, err, frame)
		}
		assert.Equal(t, want, got)
	})
}

func FuzzObjectDecoder(f *testing.F) {
	base, fast := serializers(f)
	for _, c := range objectCases {
		f.Add([]byte(c), false)
	}
	f.Fuzz(func(t *testing.T, doc []byte, intoU bool) {
		into := func() runtime.Object {
			if intoU {
				return &unstructured.Unstructured{}
			}
			return nil
		}
		want, wantGVK, wantErr := base.Serializer.Decode(doc, nil, into())
		got, gotGVK, err := fast.Serializer.Decode(doc, nil, into())
		if (wantErr == nil) != (err == nil) {
			t.Fatalf("base: %v, fast: %v: %q", wantErr, err, doc)
		}
		assert.Equal(t, want, got)
		assert.Equal(t, wantGVK, gotGVK)
	})
}

func TestObjectEncoderAsDynamic(t *testing.T) {
	base, fast := serializers(t)
	docs := []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"html":"<a>&</a>","sep":"\u2028","f":"1e21"}}`,
		`{"kind":"K","spec":{"n":[1,2.5,1e-7,-0.0,null,true],"e":{},"a":[]}}`,
	}
	for _, f := range []string{"testdata/workload.json", "testdata/configmap.json"} {
		doc, err := os.ReadFile(f)
		require.NoError(t, err)
		docs = append(docs, string(doc))
	}
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON([]byte(doc)))
		var want, got strings.Builder
		require.NoError(t, base.Serializer.Encode(u, &want))
		require.NoError(t, fast.Serializer.Encode(u, &got))
		assert.Equal(t, want.String(), got.String())
	}
	// Not an Unstructured: apimachinery's.
	var want, got strings.Builder
	st := &metav1.Status{Message: "<gone>"}
	require.NoError(t, base.Serializer.Encode(st, &want))
	require.NoError(t, fast.Serializer.Encode(st, &got))
	assert.Equal(t, want.String(), got.String())
}
