package paths

import (
	"errors"
	"testing"

	"kontinue.dev/kontinue/jsonvalue"
)

// fuzzSyntaxSeeds are malformed or unusual expressions added to the corpus paths.
var fuzzSyntaxSeeds = []string{
	"", "{", "}", "{}", "[", "]", "a[", "a]", "a..b", "..a", "a.*", "*", "$", "$.", ".", "a.",
	"a[0:2]", "a[0,1]", "a[-]", "a[99999999999999999999]", "a['x", `a["x`, `a['\u12']`, `a['\ud83d\ude00']`,
	"a[?(@.b=='x')]", "a[?(@.b==1 && @.c==2)]", "a[?(@==true)]", "a[?(@.b<=-1.5e3)]", "a[?(@.b)]",
	"a[?(@.b[0][-1]['c.d']!='e')].f[*][0]", "a.length()", `a\.b\`, "{ .a.b }", "a\x00b", "a.\xff\xfe",
}

// fuzzDoc is the fixed document compiled paths are evaluated on.
var fuzzDoc = []byte(workload)

func FuzzCompile(f *testing.F) {
	for _, dp := range diffPaths {
		f.Add(dp.path)
		if dp.clientGo != "" {
			f.Add(dp.clientGo)
		}
	}
	for _, s := range fuzzSyntaxSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		p, err := Compile(expr)
		if err != nil {
			if p != nil {
				t.Fatalf("Compile(%q) returned a path and an error", expr)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Compile(%q): error %T is not a *SyntaxError: %v", expr, err, err)
			}
			if se.Path != expr || se.Pos < 0 || se.Pos > len(expr) || se.Msg == "" {
				t.Fatalf("Compile(%q): bad SyntaxError %#v", expr, se)
			}
			return
		}
		if p.String() != expr {
			t.Fatalf("String() = %q, want %q", p.String(), expr)
		}
		again, err := Compile(expr)
		if err != nil || again.String() != expr {
			t.Fatalf("recompiling %q: %v", expr, err)
		}
		checkEval(t, p, fuzzDoc)
		checkEval(t, p, []byte(`[{"a":[1,{"b":"c"}]},null,"x",[[]]]`))
	})
}

func FuzzGet(f *testing.F) {
	for _, doc := range corpusDocs {
		f.Add([]byte(doc))
	}
	for _, doc := range []string{"", "null", "[]", "{}", `{"a":`, `{"a":[1,2`, `[{"type":"Ready","status":"True"}]`, `{"a":"\u00"}`, `{"a" 1 "b"}`, `{"a":{"b":1,"b":2}}`,
		"{\"\"00A", `{"":1e400,"a":[1e400]}`, "{\"\":\"\xff\"}"} {
		f.Add([]byte(doc))
	}
	// One path of each shape (every step kind, alone and combined).
	var compiled []*Path
	for _, expr := range []string{
		".status.latestImage", "metadata.labels['app.kubernetes.io/name']", `.metadata.labels.app\.kubernetes\.io/name`,
		"metadata.labels.0", "spec.params[0].value", "spec.params[-1].value", ".status.conditions[*].type",
		`.status.conditions[?(@.type=="Ready")].status`, `.status.traffic[?(@.percent>50)].revisionName`,
		`.status.containerStatuses[?(@.ready==false)].name`, `.items[*].status.conditions[?(@.status!="False")].reason`,
		`spec.matrix[?(@[0]==3)][-1][*]`, `a[?(@)]`, `a[?(@=="x")]`,
		"[0]", "[-1].a", "[*]", "[?(@.type=='Ready')].status", "a.b[0][*]", "['']", `a['\u0000']`,
	} {
		compiled = append(compiled, MustCompile(expr))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, p := range compiled {
			checkEval(t, p, doc)
		}
	})
}

// checkEval evaluates p on doc and checks that Get, GetString, Value and
// Exists agree and only fail with the documented errors.
func checkEval(t *testing.T, p *Path, doc []byte) {
	t.Helper()
	r, err := p.Get(doc)
	r2, err2 := p.GetString(string(doc))
	v, verr := p.Value(doc)
	ok, exErr := p.Exists(doc)
	if exErr != nil {
		t.Fatalf("%q: Exists error %v", p, exErr)
	}
	if err == nil && errors.Is(verr, jsonvalue.ErrNumber) {
		verr = nil // Get finds a number no object can hold (Value's doc)
		v = nil
	}
	if r.Raw != r2.Raw || r.Type != r2.Type || (err == nil) != (err2 == nil) || (err == nil) != (verr == nil) {
		t.Fatalf("%q on %q: Get %v/%v, GetString %v/%v and Value %v disagree", p, doc, r.Raw, err, r2.Raw, err2, verr)
	}
	var amb *AmbiguousError
	switch {
	case err == nil:
		if !r.Exists() || !ok {
			t.Fatalf("%q on %q: found %q but Exists()=%v", p, doc, r.Raw, ok)
		}
		if s, isString := v.(string); isString && s != string([]rune(r.Str)) { // invalid UTF-8 read as U+FFFD
			t.Fatalf("%q on %q: Value %q != Get %q", p, doc, s, r.Str)
		}
	case IsNotFound(err):
		if ok || r.Exists() {
			t.Fatalf("%q on %q: not found but Exists()=%v", p, doc, ok)
		}
	case errors.As(err, &amb):
		if !ok || amb.Count < 2 || amb.Path != p.String() {
			t.Fatalf("%q on %q: bad ambiguous error %v (Exists()=%v)", p, doc, err, ok)
		}
	default:
		t.Fatalf("%q on %q: unexpected error %T %v", p, doc, err, err)
	}
}
