package jsonlibs

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strconv"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	gojson "github.com/goccy/go-json"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	apijson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"kontinue.dev/kontinue/jsonvalue"
)

// docs are the bench's Workload and a stamped Deployment with its
// managedFields, compact as the API server sends them.
func docs(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, n := range []string{"workload", "deployment"} {
		d, err := os.ReadFile("../../tracking/testdata/" + n + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, d); err != nil {
			t.Fatal(err)
		}
		out[n] = c.Bytes()
	}
	return out
}

// Each decoder gives the values apimachinery's unstructured decoding
// gives: integers that fit as int64, other numbers as float64.
var decoders = map[string]func([]byte) (any, error){
	"jsonvalue": func(d []byte) (any, error) {
		m, ok := jsonvalue.DecodeObject(d)
		if !ok {
			return nil, errors.New("not decoded")
		}
		return m, nil
	},
	"jsontext-tree":   jsontextTree,
	"v2-Unmarshal-fn": v2Unmarshal,
	"goccy":           goccy,
	"apimachinery-Unmarshal": func(d []byte) (any, error) {
		var m map[string]any
		return m, utiljson.Unmarshal(d, &m)
	},
	"apimachinery-serializer": func(d []byte) (any, error) {
		o, err := runtime.Decode(unstructured.UnstructuredJSONScheme, d)
		if err != nil {
			return nil, err
		}
		return o.(*unstructured.Unstructured).Object, nil
	},
}

var encoders = map[string]func(any) ([]byte, error){
	"jsonvalue":     jsonvalue.Marshal,
	"encoding-json": json.Marshal,
	"goccy":         gojson.Marshal,
	"v2-options": func(v any) ([]byte, error) {
		return jsonv2.Marshal(v, jsonv2.Deterministic(true), jsontext.EscapeForHTML(true), jsontext.EscapeForJS(true), jsontext.AllowInvalidUTF8(true))
	},
}

func TestSameValues(t *testing.T) {
	for name, doc := range docs(t) {
		var want map[string]any
		if err := utiljson.Unmarshal(doc, &want); err != nil {
			t.Fatal(err)
		}
		for lib, f := range decoders {
			got, err := f(doc)
			if err != nil || !reflect.DeepEqual(any(want), got) {
				t.Errorf("%s decodes %s otherwise: %v", lib, name, err)
			}
		}
		text, _ := json.Marshal(want)
		for lib, f := range encoders {
			if got, err := f(want); err != nil || !bytes.Equal(got, text) {
				t.Errorf("%s encodes %s otherwise: %v", lib, name, err)
			}
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	for name, doc := range docs(b) {
		for lib, f := range decoders {
			b.Run(name+"/"+lib, func(b *testing.B) {
				loop(b, func() {
					if _, err := f(doc); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	for name, doc := range docs(b) {
		m, _ := jsonvalue.DecodeObject(doc)
		for lib, f := range encoders {
			b.Run(name+"/"+lib, func(b *testing.B) {
				loop(b, func() {
					if _, err := f(m); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

// loop reports CPU time per op (all threads, GC included) beside wall
// time, which is unreliable on a loaded machine.
func loop(b *testing.B, f func()) {
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// number is the one rule (jsonvalue's): an integer literal that fits is
// an int64, any other number a float64.
func number(raw []byte) (any, error) {
	if !bytes.ContainsAny(raw, ".eE") {
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return n, nil
		}
	}
	return strconv.ParseFloat(string(raw), 64)
}

var treeOpts = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// jsontextTree builds the values on encoding/json/v2's tokenizer.
func jsontextTree(doc []byte) (any, error) {
	d := jsontext.NewDecoder(bytes.NewReader(doc), treeOpts)
	v, err := treeValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, errors.New("after the value")
	}
	return v, nil
}

func treeValue(d *jsontext.Decoder) (any, error) {
	switch d.PeekKind() {
	case '{':
		if _, err := d.ReadToken(); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for d.PeekKind() == '"' {
			k, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			name := k.String()
			if m[name], err = treeValue(d); err != nil {
				return nil, err
			}
		}
		_, err := d.ReadToken()
		return m, err
	case '[':
		if _, err := d.ReadToken(); err != nil {
			return nil, err
		}
		a := []any{}
		for k := d.PeekKind(); k != ']' && k != 0; k = d.PeekKind() {
			v, err := treeValue(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.ReadToken()
		return a, err
	case '0':
		raw, err := d.ReadValue()
		if err != nil {
			return nil, err
		}
		return number(raw)
	}
	t, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch t.Kind() {
	case '"':
		return t.String(), nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	}
	return nil, nil
}

// skipFunc is what a function returns to leave a value to the default:
// errors.ErrUnsupported for github.com/go-json-experiment/json; with
// GOEXPERIMENT=jsonv2 that module is an alias of the standard library's,
// whose go1.26 version wants its own SkipFunc (stdv2_test.go).
var skipFunc = errors.ErrUnsupported

// v2Unmarshal is encoding/json/v2's Unmarshal with a function for numbers.
var v2Opts = jsonv2.JoinOptions(treeOpts, jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(d *jsontext.Decoder, v *any) error {
	if d.PeekKind() != '0' {
		return skipFunc
	}
	raw, err := d.ReadValue()
	if err != nil {
		return err
	}
	*v, err = number(raw)
	return err
})))

func v2Unmarshal(doc []byte) (any, error) {
	var m map[string]any
	err := jsonv2.Unmarshal(doc, &m, v2Opts)
	return m, err
}

// goccy decodes with json.Number, then converts them by the rule.
func goccy(doc []byte) (any, error) {
	dec := gojson.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return numbers(m)
}

func numbers(v any) (any, error) {
	var err error
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if x[k], err = numbers(e); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, e := range x {
			if x[i], err = numbers(e); err != nil {
				return nil, err
			}
		}
	case gojson.Number:
		return number([]byte(x))
	}
	return v, nil
}

// A watch stream of 100 events of the Workload, framed and decoded as
// tracking.NewDynamic does (jsonvalue's NewFrameReader, SplitEvent,
// DecodeObject) and as client-go does without it (apimachinery's framer
// and decoders).
func BenchmarkWatchEvent(b *testing.B) {
	var stream []byte
	for range 100 {
		stream = append(append(append(stream, `{"type":"MODIFIED","object":`...), docs(b)["workload"]...), "}\n"...)
	}
	read := func(r io.ReadCloser, each func([]byte) error) {
		buf := make([]byte, 64<<10)
		n := 0
		for {
			k, err := r.Read(buf)
			if err == io.EOF {
				break
			}
			if err == nil {
				err = each(buf[:k])
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 100 {
			b.Fatalf("%d events", n)
		}
	}
	b.Run("jsonvalue", func(b *testing.B) {
		loop(b, func() {
			read(jsonvalue.NewFrameReader(io.NopCloser(bytes.NewReader(stream))), func(frame []byte) error {
				_, obj, ok := jsonvalue.SplitEvent(frame)
				if ok {
					_, ok = jsonvalue.DecodeObject(obj)
				}
				if !ok {
					return errors.New("not decoded")
				}
				return nil
			})
		})
	})
	b.Run("apimachinery", func(b *testing.B) {
		loop(b, func() {
			read(apijson.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream))), func(frame []byte) error {
				var ev metav1.WatchEvent
				if err := utiljson.Unmarshal(frame, &ev); err != nil {
					return err
				}
				_, err := runtime.Decode(unstructured.UnstructuredJSONScheme, ev.Object.Raw)
				return err
			})
		})
	})
}
