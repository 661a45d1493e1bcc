package jsonvalue

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// reference decodes as apimachinery does; ok as DecodeObject must say it.
func reference(data []byte) (map[string]any, bool) {
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

var decodeCases = []string{
	`{}`,
	` {"a":1} `,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"a":"b"}},"data":{"k":"v"}}`,
	`{"i":9223372036854775807,"big":9223372036854775808,"neg":-9223372036854775808,"f":1.5,"e":1e3,"E":2E-2,"z":-0,"zf":-0.0,"p":1e+2}`,
	`{"a":[],"b":[1,"x",null,true,false,{"c":[[]]}],"n":null}`,
	`{"s":"tab\tnew\nquote\"slash\\/ \u00e9 \ud83d\ude00 \ud800 \udc00x"}`,
	`{"s":"é ü 中文"}`,
	"{\"s\":\"\xff\xfe bad utf8\"}",
	`{"a":1,"a":2}`,
	"{\"a\"\t:\n1\r,\"b\" : [ 1 , 2 ] }",
	// invalid
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`,
	`{"a":1,}`, `{,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1} x`, `{"a":1}}`,
	`{"a":[1,]}`, `{"a":[1 2]}`, `{"a":tru}`, `{"a":nul}`, `{"a":"x}`, `{"a":"\x"}`,
	"{\"a\":\"\x01\"}", `{"a":1e400}`, `{"a":-1e400}`, `{"a":"\u12"}`, `{"a":"\`,
	`[]`, `null`, `"x"`, `1`, ``, ` `, `{`, `{"a":[`, "\xef\xbb\xbf{}",
}

func TestDecodeObjectAsApimachinery(t *testing.T) {
	for _, c := range decodeCases {
		t.Run(c, func(t *testing.T) {
			want, wantOK := reference([]byte(c))
			got, ok := DecodeObject([]byte(c))
			require.Equal(t, wantOK, ok)
			assert.Equal(t, want, got)
		})
	}
}

func TestDecodeObjectDeepNesting(t *testing.T) {
	for _, depth := range []int{9999, 10000, 10001} {
		doc := strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
		want, wantOK := reference([]byte(doc))
		got, ok := DecodeObject([]byte(doc))
		assert.Equal(t, wantOK, ok, "depth %d", depth)
		assert.Equal(t, want, got, "depth %d", depth)
	}
}

func TestDecodeObjectTestdata(t *testing.T) {
	files, err := filepath.Glob("../tracking/testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		doc, err := os.ReadFile(f)
		require.NoError(t, err)
		want, wantOK := reference(doc)
		got, ok := DecodeObject(doc)
		require.True(t, wantOK, f)
		require.True(t, ok, f)
		assert.Equal(t, want, got, f)
	}
}

func FuzzDecodeObject(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		want, wantOK := reference(doc)
		got, ok := DecodeObject(doc)
		if ok != wantOK {
			t.Fatalf("ok %v, apimachinery %v: %q", ok, wantOK, doc)
		}
		assert.Equal(t, want, got)
	})
}
