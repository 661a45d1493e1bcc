package paths

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchDoc is the test workload as the API server or json.Marshal write it
// (compact), about 3.3 KB.
func benchDoc(b *testing.B) []byte {
	var buf bytes.Buffer
	require.NoError(b, json.Compact(&buf, []byte(workload)))
	return buf.Bytes()
}

// measure runs f b.N times and reports CPU time per op next to wall time.
func measure(b *testing.B, f func()) {
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	for b.Loop() {
		f()
	}
	if start > 0 {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

// benchGet compares Get on the raw document with client-go's jsonpath on the
// same document decoded once (the jsonpath expression is parsed once too).
// clientGoExpr is client-go's spelling of expr. "client-go+decode" adds the
// decoding client-go needs when, as for Get, the input is JSON bytes.
func benchGet(b *testing.B, expr, clientGoExpr, want string) {
	doc := benchDoc(b)

	b.Run("paths", func(b *testing.B) {
		p := MustCompile(expr)
		r, err := p.Get(doc)
		require.NoError(b, err)
		require.Equal(b, want, r.String())
		measure(b, func() {
			if _, err := p.Get(doc); err != nil {
				b.Fatal(err)
			}
		})
	})

	b.Run("client-go", func(b *testing.B) {
		jp := newClientGo(b, clientGoExpr, false)
		obj := decodeUnstructured(b, string(doc))
		res, err := jp.FindResults(obj)
		require.NoError(b, err)
		require.Len(b, res, 1)
		require.Len(b, res[0], 1)
		require.Equal(b, want, res[0][0].Interface())
		measure(b, func() {
			if _, err := jp.FindResults(obj); err != nil {
				b.Fatal(err)
			}
		})
	})

	b.Run("client-go+decode", func(b *testing.B) {
		jp := newClientGo(b, clientGoExpr, false)
		measure(b, func() {
			var obj any
			if err := json.Unmarshal(doc, &obj); err != nil {
				b.Fatal(err)
			}
			if _, err := jp.FindResults(obj); err != nil {
				b.Fatal(err)
			}
		})
	})
}

func BenchmarkGetSimple(b *testing.B) {
	benchGet(b, ".status.latestImage", ".status.latestImage", "registry.example.com/petclinic@sha256:abc")
}

func BenchmarkGetFilter(b *testing.B) {
	expr := `.status.conditions[?(@.type=="Ready")].status`
	benchGet(b, expr, expr, "True")
}

func BenchmarkGetBracket(b *testing.B) {
	benchGet(b, `.metadata.labels['app.kubernetes.io/name']`, `.metadata.labels.app\.kubernetes\.io/name`, "petclinic")
}

// BenchmarkGetEarly reads a field near the start of the document, where the
// scan Get does is short: the cost of Get grows with the bytes before the
// value, client-go's does not (it works on a decoded object).
func BenchmarkGetEarly(b *testing.B) {
	benchGet(b, ".metadata.name", ".metadata.name", "petclinic")
}

// BenchmarkCompileCached is the cost of Compile on an expression already in
// the cache, as callers that compile on every use pay it.
func BenchmarkCompileCached(b *testing.B) {
	const expr = `.status.conditions[?(@.type=="Ready")].status`
	MustCompile(expr)
	measure(b, func() {
		if _, err := Compile(expr); err != nil {
			b.Fatal(err)
		}
	})
}
