package tracking

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/watch"
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
		strings.Repeat(`{"a":`, depth-1) + "1" + strings.Repeat("}", depth-1) + "}"
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

// A watch through NewDynamic reads every object the API server sends,
// however deep (10,000 levels, the event one more), and goes on with the
// next event.
func TestWatchReadsTheDeepestObject(t *testing.T) {
	deep := deepObject(10000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", deep)
		fmt.Fprint(w, `{"type":"ADDED","object":{"apiVersion":"v1","kind":"X","metadata":{"name":"next"}}}`+"\n")
	}))
	defer srv.Close()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "xs"}
	for _, c := range []struct {
		name string
		new  func(*rest.Config) (dynamic.Interface, error)
		ok   bool
	}{
		{"NewDynamic", func(c *rest.Config) (dynamic.Interface, error) { return NewDynamic(c) }, true},
		{"apimachinery's", func(c *rest.Config) (dynamic.Interface, error) { return dynamic.NewForConfig(c) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := c.new(&rest.Config{Host: srv.URL})
			require.NoError(t, err)
			w, err := cl.Resource(gvr).Namespace("ns").Watch(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			defer w.Stop()
			ev := <-w.ResultChan()
			if !c.ok {
				assert.Equal(t, watch.Error, ev.Type, "apimachinery's framer refuses the event")
				return
			}
			require.Equal(t, watch.Added, ev.Type, "%v", ev.Object)
			assert.Equal(t, "deep", ev.Object.(*unstructured.Unstructured).GetName())
			ev = <-w.ResultChan()
			require.Equal(t, watch.Added, ev.Type)
			assert.Equal(t, "next", ev.Object.(*unstructured.Unstructured).GetName())
		})
	}
}

// frames reads every frame of stream with the framer f, through a buffer
// of size n (small: frames come in parts), as a watch's decoder does.
func frames(f runtime.Framer, stream []byte, n int) (out []string, err error) {
	r := f.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	buf := make([]byte, n)
	var frame []byte
	for {
		k, err := r.Read(buf)
		frame = append(frame, buf[:k]...)
		if err == io.ErrShortBuffer {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(frame))
		frame = nil
	}
}

var frameStreams = []string{
	`{"type":"ADDED","object":{"a":"}]\"\\"}}` + "\n" + `{"type":"DELETED","object":{"b":[1,{"c":null}]}}` + "\n",
	` {"a":1} [1,2]  {"b":"x y"}`,
	`{"a":[{"b":"\u00e9\\\""}]}{}[]`,
	"{\"a\":\"\xff\"}\r\n\t{\"b\":1}",
	`"x" 1 true {"a":1}`,
	``, `   `, `{"a":1`, `{"a":"x`,
}

// Frames are apimachinery's, for every stream its framer reads.
func FuzzEventFramer(f *testing.F) {
	_, fast := serializers(f)
	base := json.Framer
	for _, s := range frameStreams {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, stream []byte, n int) {
		n = 1 + (n&0xff)%64
		want, wantErr := frames(base, stream, n)
		got, err := frames(fast.StreamSerializer.Framer, stream, n)
		for i, w := range want {
			if w[0] != '{' && w[0] != '[' {
				// Not an event: the watch ends there (either event decoder
				// refuses it), whatever follows.
				want, wantErr = append([]string(nil), want[:i]...), nil
				break
			}
		}
		if wantErr == io.EOF {
			require.Equal(t, io.EOF, err, "%q", stream)
			assert.Equal(t, want, got)
			return
		}
		// A stream apimachinery's framer cannot read (bad JSON): the frames
		// before it are the same.
		require.GreaterOrEqual(t, len(got), len(want), "%q", stream)
		assert.Equal(t, want, append([]string(nil), got[:len(want)]...))
	})
}

func TestEventFramer(t *testing.T) {
	for _, s := range frameStreams {
		for _, n := range []int{1, 3, 64} {
			want, wantErr := frames(json.Framer, []byte(s), n)
			got, err := frames(eventFramer{}, []byte(s), n)
			if wantErr == io.EOF {
				assert.Equal(t, io.EOF, err, "%q", s)
				assert.Equal(t, want, got, "%q", s)
				continue
			}
			assert.Equal(t, want, append([]string(nil), got[:min(len(want), len(got))]...), "%q", s)
		}
	}
	deep := `{"type":"ADDED","object":` + deepObject(10000) + "}\n"
	_, err := frames(json.Framer, []byte(deep), 4096)
	assert.ErrorContains(t, err, "exceeded max depth", "apimachinery's framer")
	got, err := frames(eventFramer{}, []byte(deep+deep), 4096)
	assert.Equal(t, io.EOF, err)
	assert.Equal(t, []string{strings.TrimSpace(deep), strings.TrimSpace(deep)}, got)
}

func BenchmarkEventFramer(b *testing.B) {
	doc, err := os.ReadFile("testdata/workload.json")
	require.NoError(b, err)
	var stream []byte
	for range 100 {
		stream = append(append(append(stream, `{"type":"MODIFIED","object":`...), bytes.TrimSpace(doc)...), "}\n"...)
	}
	for name, f := range map[string]runtime.Framer{"apimachinery": json.Framer, "fast": eventFramer{}} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				if got, err := frames(f, stream, 64<<10); err != io.EOF || len(got) != 100 {
					b.Fatal(len(got), err)
				}
			}
		})
	}
}
