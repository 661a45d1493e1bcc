package paths

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// valueDocs hold numbers at the edges of int64 and float64, alone and
// nested.
var valueDocs = []string{
	`{"v":0}`, `{"v":-0}`, `{"v":-0.0}`, `{"v":1.0}`, `{"v":1.5}`, `{"v":1e2}`, `{"v":1E+2}`, `{"v":0.1}`,
	`{"v":9007199254740991}`, `{"v":9007199254740992}`, `{"v":9007199254740993}`, `{"v":-9007199254740993}`,
	`{"v":9223372036854775807}`, `{"v":-9223372036854775808}`, `{"v":9223372036854775808}`, `{"v":18446744073709551615}`,
	`{"v":1e21}`, `{"v":100000000000000000000}`, `{"v":1e308}`, `{"v":1.7976931348623157e308}`, `{"v":5e-324}`,
	`{"v":[9007199254740993,{"a":9223372036854775807,"b":[1.0,-0]}]}`, `{"v":{"x":{"y":[[5e-324]]}}}`,
}

// What a path reads of an object is what apimachinery decodes there: an
// output of a stamped object, read from the cache's JSON.
func checkValue(t *testing.T, doc string) {
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, []byte(`{"apiVersion":"v1","kind":"X","o":`+doc+`}`))
	if err != nil {
		return
	}
	o, ok := obj.(*unstructured.Unstructured).Object["o"].(map[string]any)
	if !ok {
		return
	}
	want, ok := o["v"]
	if !ok {
		return
	}
	for _, expr := range []string{".v", "$.v", "{.v}", "v", "{$..v}"} { // the compiled subset, and client-go's
		got, err := MustCompile(expr).Value([]byte(doc))
		if expr == "{$..v}" && err != nil {
			continue // several v: ambiguous
		}
		require.NoError(t, err, "%s of %s", expr, doc)
		assert.Equal(t, want, got, "%s of %s", expr, doc)
	}
}

func TestValueAsApimachinery(t *testing.T) {
	for _, doc := range valueDocs {
		t.Run(doc, func(t *testing.T) { checkValue(t, doc) })
	}
}

func FuzzValueAsApimachinery(f *testing.F) {
	for _, doc := range valueDocs {
		f.Add(doc)
	}
	f.Fuzz(checkValue)
}
