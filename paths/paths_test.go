package paths

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// workload is a Kubernetes-style object exercising what users query: dotted
// label keys, conditions, params, numbers, booleans, nulls, nested lists and
// keys that gjson would otherwise read as syntax.
const workload = `{
  "apiVersion": "carto.run/v1alpha1",
  "kind": "Workload",
  "metadata": {
    "name": "petclinic",
    "namespace": "dev",
    "generation": 7,
    "labels": {
      "app.kubernetes.io/name": "petclinic",
      "app.kubernetes.io/part-of": "spring",
      "apps.tanzu.vmware.com/workload-type": "web",
      "weird*key?": "wild",
      "#hash": "h",
      "@at": "a",
      "pipe|key": "p",
      "with space": "s",
      "back\\slash": "b",
      "quote'd": "q1",
      "dq\"d": "q2",
      "!=<>%": "ops",
      "0": "zero",
      "": "empty"
    },
    "annotations": null
  },
  "spec": {
    "source": {"git": {"url": "https://github.com/x/petclinic", "ref": {"branch": "main"}}},
    "params": [
      {"name": "port", "value": 8080},
      {"name": "debug", "value": false},
      {"name": "ratio", "value": 0.25},
      {"name": "annotations", "value": {"a": "b"}},
      {"name": "empty", "value": null},
      {"name": "dup", "value": 1},
      {"name": "dup", "value": 2}
    ],
    "matrix": [[1, 2], [3, [4, 5]]],
    "replicas": 3,
    "big": 9223372036854775807,
    "huge": 1e300,
    "enabled": true
  },
  "status": {
    "observedGeneration": 7,
    "latestImage": "registry.example.com/petclinic@sha256:abc",
    "conditions": [
      {"type": "Ready", "status": "True", "reason": "Ready", "priority": 1},
      {"type": "SupplyChainReady", "status": "True", "priority": 2},
      {"type": "ResourcesSubmitted", "status": "Unknown", "reason": "Pending", "priority": 3, "meta": {"owner": "carto"}},
      {"type": "Healthy", "status": "False", "ok": false, "priority": 2.5}
    ],
    "sources": {"source-provider": {"url": "http://source/x.tar.gz", "revision": "abc123"}},
    "images": {"image-builder": {"image": "registry.example.com/petclinic:v1"}},
    "empty": [],
    "nothing": null
  }
}`

func TestGet(t *testing.T) {
	doc := []byte(workload)
	tests := []struct {
		path string
		want any // plain Go value as Value returns it
	}{
		{".status.latestImage", "registry.example.com/petclinic@sha256:abc"},
		{"status.latestImage", "registry.example.com/petclinic@sha256:abc"},
		{"{.status.latestImage}", "registry.example.com/petclinic@sha256:abc"},
		{" { .status.latestImage } ", "registry.example.com/petclinic@sha256:abc"},
		{"$.status.latestImage", "registry.example.com/petclinic@sha256:abc"},
		{"metadata.name", "petclinic"},
		{"metadata.generation", int64(7)},
		{"status.sources.source-provider.url", "http://source/x.tar.gz"},
		{"status.images.image-builder.image", "registry.example.com/petclinic:v1"},
		{"spec.source.git.ref", map[string]any{"branch": "main"}},
		{"spec.replicas", int64(3)},
		{"spec.big", int64(9223372036854775807)},
		{"spec.huge", 1e300},
		{"spec.enabled", true},
		{"metadata.annotations", nil},
		{"status.nothing", nil},
		{"status.empty", []any{}},
		// indexes
		{"spec.params[0].value", int64(8080)},
		{"spec.params[1].value", false},
		{"spec.params[2].value", 0.25},
		{"spec.params[3].value", map[string]any{"a": "b"}},
		{"spec.params[4].value", nil},
		{"spec.params[-1].value", int64(2)},
		{"spec.params[-7].name", "port"},
		{"spec.matrix[1][1][0]", int64(4)},
		{"spec.matrix[-1][-1][-1]", int64(5)},
		{"spec.matrix[0]", []any{int64(1), int64(2)}},
		{".[0]", nil}, // not found (the root is an object), checked below
		// filters
		{`status.conditions[?(@.type=="Ready")].status`, "True"},
		{`status.conditions[?(@.type=='Ready')].status`, "True"},
		{`.status.conditions[?(@.type == "Ready")].reason`, "Ready"},
		{`status.conditions[?(@.reason!="Ready")].type`, "ResourcesSubmitted"}, // != skips conditions without a reason
		{`status.conditions[?(@.type=="Ready")]`, map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "priority": int64(1)}},
		{`status.conditions[?(@.status!="True")].type`, nil}, // ambiguous, checked below
		{`status.conditions[?(@.priority==3)].type`, "ResourcesSubmitted"},
		{`status.conditions[?(@.priority==3.0)].type`, "ResourcesSubmitted"},
		{`status.conditions[?(@.priority==2.5)].type`, "Healthy"},
		{`status.conditions[?(@.priority>2.5)].type`, "ResourcesSubmitted"},
		{`status.conditions[?(@.priority<2)].type`, "Ready"},
		{`status.conditions[?(@.priority<=1)].type`, "Ready"},
		{`status.conditions[?(@.priority>=3)].type`, "ResourcesSubmitted"},
		{`status.conditions[?(@.ok==false)].type`, "Healthy"},
		{`status.conditions[?(@.meta.owner=="carto")].type`, "ResourcesSubmitted"},
		{`status.conditions[?(@['meta']['owner']=="carto")].reason`, "Pending"},
		{`status.conditions[?(@.meta)].type`, "ResourcesSubmitted"},
		{`status.conditions[?(@.ok)].type`, "Healthy"},
		{`spec.params[?(@.name=="port")].value`, int64(8080)},
		{`spec.params[?(@.name=="empty")].value`, nil},
		{`spec.params[?(@.value==true)].name`, nil}, // not found, checked below
		{`spec.matrix[?(@[0]==3)][1][1]`, int64(5)},
		{`spec.matrix[1][?(@==3)]`, int64(3)},
		{`spec.params[?(@.name=="annotations")].value.a`, "b"},
		// wildcard yielding one value
		{`spec.matrix[1][1][*]`, nil}, // ambiguous
		{`spec.params[3].value[*]`, nil},
		// bracket and escaped keys
		{`metadata.labels['app.kubernetes.io/name']`, "petclinic"},
		{`metadata.labels["app.kubernetes.io/part-of"]`, "spring"},
		{`metadata['labels']['apps.tanzu.vmware.com/workload-type']`, "web"},
		{`metadata.labels.app\.kubernetes\.io/name`, "petclinic"},
		{`['metadata'].name`, "petclinic"},
		{`metadata.labels['weird*key?']`, "wild"},
		{`metadata.labels['#hash']`, "h"},
		{`metadata.labels['@at']`, "a"},
		{`metadata.labels['pipe|key']`, "p"},
		{`metadata.labels['with space']`, "s"},
		{`metadata.labels['back\\slash']`, "b"},
		{`metadata.labels["quote'd"]`, "q1"},
		{`metadata.labels['quote\'d']`, "q1"},
		{`metadata.labels['dq"d']`, "q2"},
		{`metadata.labels["dq\"d"]`, "q2"},
		{`metadata.labels['!=<>%']`, "ops"},
		{`metadata.labels['0']`, "zero"},
		{`metadata.labels.0`, "zero"},
		{`metadata.labels['']`, "empty"},
		{`metadata.labels['\u0030']`, "zero"},
	}
	notFound := map[string]bool{".[0]": true, `spec.params[?(@.value==true)].name`: true, `spec.params[3].value[*]`: true}
	ambiguous := map[string]int{`status.conditions[?(@.status!="True")].type`: 2, `spec.matrix[1][1][*]`: 2}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p, err := Compile(tt.path)
			require.NoError(t, err)
			assert.Equal(t, tt.path, p.String())
			r, err := p.Get(doc)
			v, verr := p.Value(doc)
			ok, exErr := p.Exists(doc)
			require.NoError(t, exErr)
			switch {
			case notFound[tt.path]:
				assert.True(t, IsNotFound(err), "Get: %v", err)
				assert.True(t, IsNotFound(verr), "Value: %v", verr)
				assert.False(t, ok)
			case ambiguous[tt.path] > 0:
				var amb *AmbiguousError
				require.ErrorAs(t, err, &amb)
				assert.Equal(t, ambiguous[tt.path], amb.Count)
				assert.Equal(t, tt.path, amb.Path)
				assert.ErrorAs(t, verr, &amb)
				assert.False(t, IsNotFound(err))
				assert.True(t, ok)
			default:
				require.NoError(t, err)
				require.NoError(t, verr)
				assert.True(t, r.Exists())
				assert.Equal(t, tt.want, v)
				assert.True(t, ok)
				// Get and GetString agree.
				r2, err := p.GetString(workload)
				require.NoError(t, err)
				assert.Equal(t, r.Raw, r2.Raw)
			}
		})
	}
}

func TestGetNotFound(t *testing.T) {
	doc := []byte(workload)
	for _, path := range []string{
		"status.missing",
		"missing.deeper.still",
		"status.latestImage.deeper", // key on a string
		"spec.params.name",          // key on an array
		"spec.params.0",             // a digit key is a key, never an index
		"metadata.labels[0]",        // an index on an object, even with a member "0"
		"spec.params[7]",            // out of range
		"spec.params[-8]",           // out of range from the end
		"status.empty[0]",           //
		"status.empty[*]",           // zero elements
		"status.nothing.x",          // below null
		"status.nothing[0]",         //
		"spec.replicas[*]",          // [*] on a number
		"spec.source[*]",            // [*] on an object
		"spec.source[?(@.x)]",       // filter on an object
		`status.conditions[?(@.type=="Nope")].status`,
		`status.conditions[?(@.type=="Ready")].missing`,
		`status.conditions[?(@.priority=="1")].type`, // a string never equals a number
		`status.conditions[?(@.type==1)].status`,     // a number never equals a string
		`status.conditions[?(@.ok==true)].type`,
		`metadata.labels['app.kubernetes.io']`,
		`metadata.labels.app`,
		`metadata.labels.app.kubernetes.io/name`, // dots split the key
		`metadata.labels['weird*key']`,           // no wildcard matching
		`metadata.labels['weird*']`,
		`metadata.labels['*']`,
		`metadata.labels['#']`,
		`metadata.labels['@this']`,
		`['@this']`,
		`metadata.labels['..']`,
	} {
		t.Run(path, func(t *testing.T) {
			p, err := Compile(path)
			require.NoError(t, err)
			r, err := p.Get(doc)
			var nf *NotFoundError
			require.ErrorAs(t, err, &nf)
			assert.Equal(t, path, nf.Path)
			assert.True(t, IsNotFound(err))
			assert.True(t, IsNotFound(fmt.Errorf("wrapped: %w", err)))
			assert.Equal(t, fmt.Sprintf("no value at path %q", path), err.Error())
			assert.False(t, r.Exists())
			_, err = p.Value(doc)
			assert.True(t, IsNotFound(err))
			ok, err := p.Exists(doc)
			require.NoError(t, err)
			assert.False(t, ok)
		})
	}
}

func TestNotFoundDocuments(t *testing.T) {
	p := MustCompile("a.b")
	for _, doc := range []string{"", "   ", "null", `"a"`, "12", "[]", "{}", `{"a":`, `{"a":{"b"`, "[{"} {
		_, err := p.Get([]byte(doc))
		assert.True(t, IsNotFound(err), "doc %q: %v", doc, err)
	}
	for _, doc := range []string{`{"a":{"b":1}}`, " \n\t{\"a\":{\"b\":1}}\n"} {
		r, err := p.Get([]byte(doc))
		require.NoError(t, err)
		assert.Equal(t, int64(1), r.Int())
	}
	r, err := MustCompile("[1].a").Get([]byte(` [{"a":1},{"a":2}]`))
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Int())
}

func TestAmbiguous(t *testing.T) {
	doc := []byte(workload)
	tests := []struct {
		path  string
		count int
	}{
		{"status.conditions[*].type", 4},
		{"status.conditions[*]", 4},
		{"status.conditions[*].reason", 2}, // elements without reason are skipped
		{`status.conditions[?(@.status=="True")].type`, 2},
		{`status.conditions[?(@.priority>=2)].type`, 3},
		{`status.conditions[?(@.type)].status`, 4},
		{`spec.params[?(@.name=="dup")].value`, 2},
		{"spec.matrix[*][0]", 2},
		{"spec.matrix[*][*]", 4},
		{"spec.matrix[*][*][*]", 2},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p := MustCompile(tt.path)
			_, err := p.Get(doc)
			var amb *AmbiguousError
			require.ErrorAs(t, err, &amb)
			assert.Equal(t, tt.count, amb.Count)
			assert.Equal(t, fmt.Sprintf("path %q yields %d values, expected exactly one", tt.path, tt.count), err.Error())
			assert.False(t, IsNotFound(err))
			ok, err := p.Exists(doc)
			require.NoError(t, err)
			assert.True(t, ok)
		})
	}
}

func TestGetResultTypes(t *testing.T) {
	doc := []byte(workload)
	tests := []struct {
		path string
		typ  gjson.Type
		raw  string
	}{
		{"metadata.annotations", gjson.Null, "null"},
		{"spec.enabled", gjson.True, "true"},
		{"spec.params[1].value", gjson.False, "false"},
		{"spec.replicas", gjson.Number, "3"},
		{"metadata.name", gjson.String, `"petclinic"`},
		{"spec.matrix[0]", gjson.JSON, "[1, 2]"},
		{"spec.source.git.ref", gjson.JSON, `{"branch": "main"}`},
	}
	for _, tt := range tests {
		r, err := MustCompile(tt.path).Get(doc)
		require.NoError(t, err, tt.path)
		assert.Equal(t, tt.typ, r.Type, tt.path)
		assert.Equal(t, tt.raw, r.Raw, tt.path)
	}
}

func TestValueIsDetached(t *testing.T) {
	doc := []byte(`{"a":{"s":"hello","l":["x",{"k":"v"}]}}`)
	v, err := MustCompile("a").Value(doc)
	require.NoError(t, err)
	s, err := MustCompile("a.s").Value(doc)
	require.NoError(t, err)
	for i := range doc {
		doc[i] = ' '
	}
	assert.Equal(t, map[string]any{"s": "hello", "l": []any{"x", map[string]any{"k": "v"}}}, v)
	assert.Equal(t, "hello", s)
}

func TestValueNumbers(t *testing.T) {
	doc := []byte(`{"n":[0, -5, 1.0, 1e3, 2.5, 9223372036854775807, 9223372036854775808, -9223372036854775808, 12345678901234567890, -0, "3", "esc\"aped\u00e9"]}`)
	v, err := MustCompile("n").Value(doc)
	require.NoError(t, err)
	assert.Equal(t, []any{
		int64(0), int64(-5), float64(1), float64(1000), 2.5, int64(9223372036854775807),
		float64(9223372036854775808), int64(-9223372036854775808), float64(12345678901234567890),
		int64(0), "3", "esc\"aped\u00e9",
	}, v)
}

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		path string
		pos  int
		msg  string
	}{
		{"", 0, "empty path"},
		{"   ", 3, "empty path"},
		{"{}", 1, "empty path"},
		{"{ }", 1, "empty path"},
		{"$", 1, "empty path"},
		{".", 1, "expected a key after '.'"},
		{"a.", 2, "expected a key after '.'"},
		{"a.[0]", 2, "expected a key after '.'"},
		{"a[0", 1, "unbalanced '['"},
		{"a[", 1, "unbalanced '['"},
		{"a[ 0 ", 1, "unbalanced '['"},
		{"a]", 1, "unbalanced ']'"},
		{"a[0]]", 4, "unbalanced ']'"},
		{"{a.b", 0, "unbalanced '{'"},
		{"{a.b}x", 0, "unbalanced '{'"},
		{"a.b}", 3, "unbalanced '}'"},
		{"{a.b}}", 4, "unbalanced '}'"},
		{"a['b]", 2, "unterminated string"},
		{`a["b']`, 2, "unterminated string"},
		{`a['b'`, 1, "unbalanced '['"},
		{"a[?(@.b=='x)]", 9, "unterminated string"},
		{"a[?(@.b=='x']", 12, "expected ')'"},
		{"a[?(@.b=='x'", 3, "unbalanced '('"},
		{"a[?(@.b=='x')", 1, "unbalanced '['"},
		{"a[?(@.b=='x')x", 13, "expected ']'"},
		{"a[?@.b]", 3, "expected '(' after '?'"},
		{"a[?(b==1)]", 4, "a filter must start with '@'"},
		{"a[?(@.b=1)]", 7, "use '==' to compare"},
		{"a[?(@.b===1)]", 9, "expected a string, number, true or false, found character '='"},
		{"a[?(@.b==1 && @.c==2)]", 11, "compound filters are not supported"},
		{"a[?(@.b==1 || @.c==2)]", 11, "compound filters are not supported"},
		{"a[?(@.b==x)]", 9, `unknown literal "x" (strings must be quoted)`},
		{"a[?(@.b==null)]", 9, "null literals are not supported"},
		{"a[?(@.b==1.2.3)]", 9, `invalid number "1.2.3"`},
		{"a[?(@.b<true)]", 7, "operator < needs a string or number"},
		{"a[?(@.b[?(@.c)])]", 8, "nested filters are not supported"},
		{"a[?(@.b==)]", 9, "expected a string, number, true or false, found character ')'"},
		{"a[?(@.length()>1)]", 12, "function calls are not supported"},
		{"a.length()", 8, "function calls are not supported"},
		{"length(a)", 6, "function calls are not supported"},
		{"*", 0, "unexpected character '*'"},
		{"a[]", 2, "empty brackets"},
		{"a[x]", 2, "unexpected character 'x' inside brackets"},
		{"a[-]", 3, "expected digits after '-'"},
		{"a[99999999999999999999]", 2, "array index out of range"},
		{"a b", 1, "unexpected character ' '"},
		{"a.b c", 3, "unexpected character ' '"},
		{"a.b'", 3, "unexpected quote (use ['...'] for keys with special characters)"},
		{"a$", 1, "unexpected character '$'"},
		{"$a", 1, "expected '.' or '[' after '$'"},
		{"a.@b", 2, "unexpected character '@'"},
		{`a\`, 1, `dangling '\' at end of path`},
		{`a['\q']`, 3, `invalid escape '\q'`},
		{`a['\u12']`, 3, `invalid \u escape`},
		{"a.b\n.c", 3, "unexpected character '\\n'"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p, err := Compile(tt.path)
			assert.Nil(t, p)
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.path, se.Path)
			assert.Equal(t, tt.msg, se.Msg)
			assert.Equal(t, tt.pos, se.Pos)
			assert.Equal(t, fmt.Sprintf("invalid path %q: %s at position %d", tt.path, tt.msg, tt.pos), err.Error())
			assert.False(t, IsNotFound(err))
			assert.Panics(t, func() { MustCompile(tt.path) })
		})
	}
}

func TestCompileCache(t *testing.T) {
	a, err := Compile(".status.conditions[?(@.type=='Ready')].status")
	require.NoError(t, err)
	b, err := Compile(".status.conditions[?(@.type=='Ready')].status")
	require.NoError(t, err)
	assert.Same(t, a, b)
	assert.Same(t, a, MustCompile(".status.conditions[?(@.type=='Ready')].status"))
	// Different spellings are different cache entries that agree.
	c := MustCompile("{.status.conditions[?(@.type=='Ready')].status}")
	assert.NotSame(t, a, c)
	ra, _ := a.Get([]byte(workload))
	rc, _ := c.Get([]byte(workload))
	assert.Equal(t, "True", ra.String())
	assert.Equal(t, ra.Raw, rc.Raw)

	// Errors are not cached as paths.
	_, err1 := Compile("a[")
	_, err2 := Compile("a[")
	assert.Error(t, err1)
	assert.Error(t, err2)

	// Concurrent compiles of one expression all get the same *Path.
	const n = 32
	got := make([]*Path, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = MustCompile("spec.concurrent.cache.test")
		}()
	}
	wg.Wait()
	for i := range n {
		assert.Same(t, got[0], got[i])
	}
}

func TestCacheBounded(t *testing.T) {
	keep := MustCompile("cache.bound.first")
	for i := range maxCached + 10 {
		MustCompile(fmt.Sprintf("cache.bound.k%d", i))
	}
	assert.LessOrEqual(t, cacheSize.Load(), int64(maxCached))
	// Evicted or not, compiling again still gives a working path.
	again := MustCompile("cache.bound.first")
	assert.Equal(t, keep.String(), again.String())
}

func TestConcurrentGet(t *testing.T) {
	doc := []byte(workload)
	p := MustCompile(`status.conditions[?(@.type=="Ready")].status`)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				r, err := p.Get(doc)
				if err != nil || r.String() != "True" {
					errs <- errors.Join(err, fmt.Errorf("got %q", r.String()))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestZeroAllocs(t *testing.T) {
	doc := []byte(workload)
	for _, path := range []string{
		".status.latestImage",
		"spec.params[0].value",
		"spec.params[-1].value",
		`metadata.labels['app.kubernetes.io/name']`,
		`status.conditions[?(@.type=="Ready")].status`,
		`status.conditions[?(@.priority>2.5)].type`,
		"status.missing",
		`status.conditions[?(@.type=="Nope")].status`,
	} {
		p := MustCompile(path)
		assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = p.Get(doc) }), "Get %s", path)
		assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = p.Exists(doc) }), "Exists %s", path)
	}
	// Several values: only the *AmbiguousError is allocated.
	p := MustCompile("status.conditions[*].type")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = p.Exists(doc) }))
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _, _ = p.Get(doc) }))
}
