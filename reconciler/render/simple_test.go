package render

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
)

// testOwner is a workload as the API server returns it (numbers as int64).
func testOwner() map[string]any {
	return map[string]any{
		"apiVersion": "carto.run/v1alpha1",
		"kind":       "Workload",
		"metadata": map[string]any{
			"name":       "petclinic",
			"namespace":  "dev",
			"generation": int64(4),
			"labels": map[string]any{
				"app.kubernetes.io/part-of":           "petclinic",
				"apps.tanzu.vmware.com/workload-type": "web",
			},
		},
		"spec": map[string]any{
			"source": map[string]any{"git": map[string]any{"url": "https://github.com/x/petclinic", "ref": map[string]any{"branch": "main"}}},
		},
		"status": map[string]any{
			"conditions": []any{
				map[string]any{"type": "Ready", "status": "True"},
				map[string]any{"type": "Healthy", "status": "False"},
			},
		},
	}
}

func testParams() map[string]any {
	return map[string]any{
		"replicas": int64(3),
		"integral": float64(2), // as decoded by encoding/json
		"ratio":    0.5,
		"debug":    true,
		"nothing":  nil,
		"list":     []any{"a", "b"},
		"html":     map[string]any{"q": "<a&b>"},
		"prefix":   "registry.io/apps/",
	}
}

func testContext() Context {
	return NewContext(api.KindWorkload, testOwner(), testParams(), Inputs{
		Sources:    map[string]Source{"src": {URL: "https://git/x.tgz", Revision: "abc123"}},
		Images:     map[string]any{"img": "registry.io/x@sha256:1"},
		Configs:    map[string]any{"cfg": map[string]any{"a": "b"}},
		Deployment: &Source{URL: "https://deploy/y.tgz", Revision: "def456"},
	}, map[string]string{"carto.run/workload-name": "petclinic"})
}

func render(t *testing.T, tmpl map[string]any, tc Context) (map[string]any, error) {
	t.Helper()
	objs, err := Simple().Render(context.Background(), &api.TemplateSpec{Template: tmpl}, tc)
	if err != nil {
		return nil, err
	}
	require.Len(t, objs, 1)
	return objs[0].Object, nil
}

// obj wraps a data value in a minimal valid object.
func obj(data any) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data}
}

func TestRenderValues(t *testing.T) {
	tests := []struct {
		name string
		leaf any // the template value of .data
		want any // the rendered value of .data
	}{
		// A leaf that is exactly one tag keeps the value's type.
		{"typed object", "$(workload.metadata.labels)$", map[string]any{"app.kubernetes.io/part-of": "petclinic", "apps.tanzu.vmware.com/workload-type": "web"}},
		{"typed list", "$(params.list)$", []any{"a", "b"}},
		{"typed int", "$(params.replicas)$", int64(3)},
		{"typed integral float is int64", "$(params.integral)$", int64(2)},
		{"typed float", "$(params.ratio)$", 0.5},
		{"typed bool", "$(params.debug)$", true},
		{"typed null", "$(params.nothing)$", nil},
		{"typed string", "$(workload.metadata.name)$", "petclinic"},
		{"whitespace inside the tag", "$( workload.metadata.name )$", "petclinic"},
		// Anything around the tag makes it interpolation.
		{"leading space interpolates", " $(params.replicas)$", " 3"},
		{"trailing space interpolates", "$(params.debug)$ ", "true "},
		{"interpolated string", "app-$(workload.metadata.name)$", "app-petclinic"},
		{"interpolated number", "replicas=$(params.replicas)$", "replicas=3"},
		{"interpolated float", "r=$(params.ratio)$", "r=0.5"},
		{"interpolated object as compact JSON", "l=$(params.list)$", `l=["a","b"]`},
		{"interpolated object keeps html", "h=$(params.html)$", `h={"q":"<a&b>"}`},
		{"several tags", "$(params.prefix)$$(workload.metadata.name)$:$(source.revision)$", "registry.io/apps/petclinic:abc123"},
		{"tag then literal close", "$(workload.metadata.name)$)$", "petclinic)$"},
		{"no tag", "plain $ text (with) parens)$", "plain $ text (with) parens)$"},
		{"bracket key", "$(workload.metadata.labels['app.kubernetes.io/part-of'])$", "petclinic"},
		{"index", "$(params.list[1])$", "b"},
		{"negative index", "$(params.list[-1])$", "b"},
		{"filter", `$(workload.status.conditions[?(@.type=="Ready")].status)$`, "True"},
		{"leading dot", "$(.workload.metadata.namespace)$", "dev"},
		{"tags in list items", []any{"$(params.replicas)$", "x-$(params.replicas)$", "lit", int64(7)}, []any{int64(3), "x-3", "lit", int64(7)}},
		{"nested maps", map[string]any{"a": map[string]any{"b": map[string]any{"c": "$(params.debug)$"}}}, map[string]any{"a": map[string]any{"b": map[string]any{"c": true}}}},
		{"map keys are not tags", map[string]any{"$(params.replicas)$": "v"}, map[string]any{"$(params.replicas)$": "v"}},
		{"literal numbers normalized", []any{float64(1), 1.5, int64(2), json.Number("4"), true, nil}, []any{int64(1), 1.5, int64(2), int64(4), true, nil}},
		{"go types from code", map[string]string{"k": "$(params.replicas)$"}, map[string]any{"k": int64(3)}},
		// Every context key.
		{"workload", "$(workload.metadata.name)$", "petclinic"},
		{"deliverable is the owner too", "$(deliverable.metadata.name)$", "petclinic"},
		{"params", "$(params.prefix)$", "registry.io/apps/"},
		{"sources", "$(sources.src.url)$", "https://git/x.tgz"},
		{"sources revision", "$(sources.src.revision)$", "abc123"},
		{"singular source", "$(source.url)$", "https://git/x.tgz"},
		{"images", "$(images.img.image)$", "registry.io/x@sha256:1"},
		{"singular image", "$(image)$", "registry.io/x@sha256:1"},
		{"configs", "$(configs.cfg.config)$", map[string]any{"a": "b"}},
		{"singular config", "$(config.a)$", "b"},
		{"deployment", "$(deployment.url)$@$(deployment.revision)$", "https://deploy/y.tgz@def456"},
		{"labels", "$(labels['carto.run/workload-name'])$", "petclinic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, obj(tt.leaf), testContext())
			require.NoError(t, err)
			assert.Equal(t, tt.want, out["data"])
			assert.Equal(t, "v1", out["apiVersion"])
			assert.Equal(t, "ConfigMap", out["kind"])
		})
	}
}

func TestRenderSingularAliasesNeedExactlyOneInput(t *testing.T) {
	two := NewContext(api.KindWorkload, testOwner(), nil, Inputs{
		Sources: map[string]Source{"a": {URL: "u1"}, "b": {URL: "u2"}},
		Images:  map[string]any{"a": "i1", "b": "i2"},
		Configs: map[string]any{"a": "c1", "b": "c2"},
	}, nil)
	for _, tag := range []string{"$(source.url)$", "$(image)$", "$(config)$", "$(deployment.url)$"} {
		_, err := render(t, obj(tag), two)
		require.Error(t, err, tag)
		assert.True(t, paths.IsNotFound(err), "%s: %v", tag, err)
	}
	out, err := render(t, obj([]any{"$(sources.a.url)$", "$(images.b.image)$", "$(configs.a.config)$"}), two)
	require.NoError(t, err)
	assert.Equal(t, []any{"u1", "i2", "c1"}, out["data"])
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name     string
		tmpl     map[string]any
		contains []string
		notFound bool
	}{
		{"missing path", obj(map[string]any{"x": "$(params.missing)$"}),
			[]string{"unable to resolve $(params.missing)$ in data.x", `no value at path "params.missing"`}, true},
		{"missing in interpolation", obj([]any{"ok", "a-$(workload.spec.nope)$"}),
			[]string{"unable to resolve $(workload.spec.nope)$ in data[1]"}, true},
		{"field with dotted key", obj(map[string]any{"a.b/c": "$(params.missing)$"}),
			[]string{"in data['a.b/c']"}, true},
		{"unterminated", obj("x $(params.replicas"),
			[]string{`unterminated tag at position 2 in data: "$(" has no closing ")$"`}, false},
		{"unterminated before another tag", obj("$(date) and $(params.replicas)$"),
			[]string{`unterminated tag at position 0 in data: a new "$(" at position 12 begins before it is closed`}, false},
		{"empty tag", obj("a$()$"), []string{"empty tag $()$ at position 1 in data"}, false},
		{"null inside a longer string", obj("n=$(params.nothing)$"), []string{"unable to resolve $(params.nothing)$ in data: the value is null"}, false},
		{"blank tag", obj("$(  )$"), []string{"empty tag $(  )$ at position 0"}, false},
		{"bad path", obj("$(params[)$"), []string{"invalid tag $(params[)$ at position 0 in data: invalid path"}, false},
		// Beyond the compiled subset, evaluated as Cartographer does: valid, and here ambiguous.
		{"recursive descent", obj("$(..name)$"), []string{"unable to resolve $(..name)$", "yields 2 values"}, false},
		{"ambiguous", obj("$(params.list[*])$"), []string{"unable to resolve $(params.list[*])$", "yields 2 values"}, false},
		{"no apiVersion", map[string]any{"kind": "ConfigMap"}, []string{"template has no apiVersion/kind: apiVersion"}, false},
		{"no kind", map[string]any{"apiVersion": "v1"}, []string{"template has no apiVersion/kind: kind"}, false},
		{"empty kind", map[string]any{"apiVersion": "v1", "kind": ""}, []string{"template has no apiVersion/kind: kind"}, false},
		{"kind not a string", map[string]any{"apiVersion": "v1", "kind": "$(params.replicas)$"}, []string{"template has no apiVersion/kind: kind"}, false},
		{"unmarshalable go value", obj(map[string]any{"c": make(chan int)}), []string{"template value of type chan int is not JSON in data.c"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.tmpl, testContext())
			require.Error(t, err)
			var se *StampError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, SimpleName, se.Engine)
			for _, c := range tt.contains {
				assert.Contains(t, err.Error(), c)
			}
			assert.Equal(t, tt.notFound, paths.IsNotFound(err))
		})
	}
}

func TestRenderLimits(t *testing.T) {
	t.Run("depth", func(t *testing.T) {
		deep := map[string]any{"leaf": "x"}
		for range maxDepth {
			deep = map[string]any{"d": deep}
		}
		_, err := render(t, obj(deep), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "nested deeper than 64 levels in data.d.d.d")

		ok := map[string]any{"leaf": "x"}
		for range maxDepth - 3 {
			ok = map[string]any{"d": ok}
		}
		_, err = render(t, obj(ok), testContext())
		require.NoError(t, err)
	})
	t.Run("deep list", func(t *testing.T) {
		var deep any = "x"
		for range 10000 {
			deep = []any{deep}
		}
		_, err := render(t, obj(deep), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "nested deeper than 64 levels")
	})
	t.Run("size through tags", func(t *testing.T) {
		tc := testContext()
		tc["params"].(map[string]any)["big"] = strings.Repeat("x", 10<<10)
		items := make([]any, 200) // 200 x 10 KiB = 2 MiB
		for i := range items {
			items[i] = "$(params.big)$"
		}
		_, err := render(t, obj(items), tc)
		require.Error(t, err)
		var se *StampError
		require.ErrorAs(t, err, &se)
		assert.Contains(t, err.Error(), "rendered object is larger than 1048576 bytes in data[")

		_, err = render(t, obj(items[:50]), tc)
		require.NoError(t, err)
	})
	t.Run("size through interpolation", func(t *testing.T) {
		tc := testContext()
		tc["params"].(map[string]any)["big"] = strings.Repeat("x", 300<<10)
		_, err := render(t, obj("$(params.big)$$(params.big)$$(params.big)$$(params.big)$"), tc)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "larger than")
	})
	t.Run("size of literal text", func(t *testing.T) {
		_, err := render(t, obj(strings.Repeat("y", 2<<20)), testContext())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "larger than")
	})
}

// The same template reports the same error on every render, though map
// iteration order is random: conditions must not flap.
func TestRenderErrorIsDeterministic(t *testing.T) {
	tmpl := obj(map[string]any{
		"a": "$(params.nope1)$", "b": "$(params.nope2)$", "c": "$(params.nope3)$",
		"d": "$(params.nope4)$", "e": "$(params.nope5)$", "f": "$(params.nope6)$",
	})
	for range 30 {
		_, err := render(t, tmpl, testContext())
		require.Error(t, err)
		assert.Equal(t, `unable to resolve $(params.nope1)$ in data.a: no value at path "params.nope1"`, err.Error())
	}
}

// A cached syntax error must name the field where it is found each time.
func TestRenderCachedErrorNamesEachField(t *testing.T) {
	_, err := render(t, obj(map[string]any{"one": "$(bad[)$"}), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in data.one")
	_, err = render(t, obj(map[string]any{"two": "$(bad[)$"}), testContext())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in data.two")
	assert.NotContains(t, err.Error(), "one")
}

func TestRenderDoesNotMutateOrAlias(t *testing.T) {
	var tmpl map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": {"name": "$(workload.metadata.name)$", "labels": "$(workload.metadata.labels)$"},
		"spec": {"replicas": 2, "list": ["$(params.list)$", "x-$(params.replicas)$"], "cfg": "$(config)$"}
	}`), &tmpl))
	var before map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustJSON(t, tmpl)), &before))
	tc := testContext()
	ctxBefore := mustJSON(t, tc)

	out, err := render(t, tmpl, tc)
	require.NoError(t, err)
	assert.Equal(t, before, tmpl, "template changed by Render")

	// The output shares nothing with the template or the context.
	out["metadata"].(map[string]any)["name"] = "changed"
	out["metadata"].(map[string]any)["labels"].(map[string]any)["new"] = "x"
	out["spec"].(map[string]any)["list"].([]any)[0].([]any)[0] = "changed"
	out["spec"].(map[string]any)["cfg"].(map[string]any)["a"] = "changed"
	out["spec"].(map[string]any)["replicas"] = int64(9)
	assert.Equal(t, before, tmpl, "template aliased by output")
	assert.Equal(t, ctxBefore, mustJSON(t, tc), "context aliased by output")

	again, err := render(t, tmpl, tc)
	require.NoError(t, err)
	assert.Equal(t, "petclinic", again["metadata"].(map[string]any)["name"])
	assert.Equal(t, int64(2), again["spec"].(map[string]any)["replicas"])
}

func TestRenderSpecErrors(t *testing.T) {
	_, err := Simple().Render(context.Background(), nil, testContext())
	var se *StampError
	require.ErrorAs(t, err, &se)
	_, err = Simple().Render(context.Background(), &api.TemplateSpec{}, testContext())
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "template is empty")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Simple().Render(ctx, &api.TemplateSpec{Template: obj("x")}, testContext())
	require.ErrorAs(t, err, &se)
	assert.ErrorIs(t, err, context.Canceled)
}

// An unmarshalable context is a StampError, not a panic.
func TestRenderBadContext(t *testing.T) {
	tc := Context{"params": map[string]any{"f": func() {}}}
	_, err := render(t, obj("$(params.x)$"), tc)
	var se *StampError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "template context is not JSON in data")

	// No tag: the context is never marshaled.
	_, err = render(t, obj("x"), tc)
	require.NoError(t, err)
}

func TestCompileLeafSegments(t *testing.T) {
	tests := []struct {
		in    string
		whole bool
		segs  []string // literal text, or the tag
	}{
		{"$(a)$", true, []string{"$(a)$"}},
		{"x$(a)$", false, []string{"x", "$(a)$"}},
		{"$(a)$$(b)$", false, []string{"$(a)$", "$(b)$"}},
		{"$(a)$(b)$", false, []string{"$(a)$", "(b)$"}},
		{`$(a[?(@.k=="v")].b)$`, true, []string{`$(a[?(@.k=="v")].b)$`}},
		{"$$(a)$$", false, []string{"$", "$(a)$", "$"}},
	}
	for _, tt := range tests {
		l := compileLeaf(tt.in)
		require.Empty(t, l.errMsg, tt.in)
		assert.Equal(t, tt.whole, l.whole, tt.in)
		var got []string
		for _, s := range l.segs {
			if s.path != nil {
				got = append(got, s.tag)
			} else {
				got = append(got, s.lit)
			}
		}
		assert.Equal(t, tt.segs, got, tt.in)
	}
}

func TestLeafCacheBounded(t *testing.T) {
	for i := range maxCachedLeaves + 10 {
		compiledLeaf("$(params.p" + strings.Repeat("x", i%7) + ")$ " + string(rune('a'+i%26)) + strings.Repeat("y", i))
	}
	n := 0
	leafCache.Range(func(_, _ any) bool { n++; return true })
	assert.LessOrEqual(t, n, maxCachedLeaves)
	assert.LessOrEqual(t, leafCacheBytes.Load(), int64(maxCachedLeafBytes))

	big := "$(a)$" + strings.Repeat("z", maxCacheableLeafLen)
	compiledLeaf(big)
	_, cached := leafCache.Load(big)
	assert.False(t, cached)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func FuzzStamp(f *testing.F) {
	for _, s := range []string{
		"", "plain", "$(workload.metadata.name)$", "x-$(params.replicas)$-y", "$(", ")$", "$()$",
		"$(params.list[*])$", "$(params.missing)$", `$(workload.status.conditions[?(@.type=="Ready")].status)$`,
		"$(labels['carto.run/workload-name'])$", "$(a)$$(b)$", "$($(a)$)$", "$(params.html)$", "$(config)$",
		"$(params.list[-3])$", "echo $(date)", "$(\xff)$", "$({.a})$",
	} {
		f.Add(s)
	}
	tc := testContext()
	f.Fuzz(func(t *testing.T, s string) {
		// The context encoder agrees with encoding/json on any text.
		if got, err := contextJSON(map[string]any{s: s}); err != nil || string(got) != stdJSON(t, map[string]any{s: s}) {
			t.Fatalf("contextJSON(%q) = %s, %v", s, got, err)
		}
		tmpl := map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": s},
			"data":     map[string]any{"k": s, "list": []any{s, "lit"}},
		}
		objs, err := Simple().Render(context.Background(), &api.TemplateSpec{Template: tmpl}, tc)
		if err != nil {
			var se *StampError
			if !errors.As(err, &se) {
				t.Fatalf("error is %T, not *StampError: %v", err, err)
			}
			if se.Message == "" {
				t.Fatalf("empty message")
			}
			return
		}
		if len(objs) != 1 || objs[0].GetKind() != "ConfigMap" {
			t.Fatalf("unexpected output %v", objs)
		}
		if tmpl["data"].(map[string]any)["k"] != s {
			t.Fatalf("template mutated")
		}
		if !strings.Contains(s, "$(") && objs[0].Object["data"].(map[string]any)["k"] != s {
			t.Fatalf("text without tags changed: %q", s)
		}
		// The output must be a valid unstructured object (DeepCopy panics otherwise).
		_ = objs[0].DeepCopy()

		// Any text in the context comes back unchanged (invalid UTF-8 is
		// replaced, as encoding/json does), typed and interpolated.
		withS := NewContext(api.KindWorkload, nil, map[string]any{"s": s}, Inputs{}, nil)
		out, err := render(t, obj([]any{"$(params.s)$", "<$(params.s)$>"}), withS)
		if err != nil {
			t.Fatalf("render of params.s: %v", err)
		}
		var want string
		if err := json.Unmarshal([]byte(stdJSON(t, s)), &want); err != nil {
			t.Fatal(err)
		}
		if got := out["data"].([]any); got[0] != want || got[1] != "<"+want+">" {
			t.Fatalf("params.s %q came back as %q", s, got)
		}
	})
}

// BenchmarkStamp renders a Deployment-like template: ~30 leaves, 8 tags.
func BenchmarkStamp(b *testing.B) {
	var tmpl map[string]any
	if err := json.Unmarshal([]byte(`{
		"apiVersion": "apps/v1",
		"kind": "Deployment",
		"metadata": {
			"name": "$(workload.metadata.name)$",
			"labels": {"app.kubernetes.io/component": "run", "app.kubernetes.io/part-of": "$(workload.metadata.labels['app.kubernetes.io/part-of'])$"},
			"annotations": {"kontinue.dev/revision": "$(source.revision)$"}
		},
		"spec": {
			"replicas": "$(params.replicas)$",
			"revisionHistoryLimit": 3,
			"selector": {"matchLabels": {"app": "$(workload.metadata.name)$"}},
			"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
			"template": {
				"metadata": {"labels": {"app": "$(workload.metadata.name)$", "tier": "web"}},
				"spec": {
					"serviceAccountName": "default",
					"securityContext": {"runAsNonRoot": true, "runAsUser": 1000},
					"containers": [{
						"name": "workload",
						"image": "$(image)$",
						"imagePullPolicy": "IfNotPresent",
						"args": ["--port", "8080", "--debug=$(params.debug)$"],
						"env": [{"name": "JAVA_TOOL_OPTIONS", "value": "-Xmx512m"}, {"name": "PORT", "value": "8080"}],
						"ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
						"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "256Mi"}},
						"readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10}
					}]
				}
			}
		}
	}`), &tmpl); err != nil {
		b.Fatal(err)
	}
	spec := &api.TemplateSpec{Template: tmpl}
	tc := testContext()
	e := Simple()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Render(ctx, spec, tc); err != nil {
			b.Fatal(err)
		}
	}
}

// stdJSON is encoding/json's text of v (SetEscapeHTML(false)), with its
// escape of invalid UTF-8, \ufffd, written as U+FFFD itself as the
// context's encoder writes it (jsonvalue.Marshal).
func stdJSON(t testing.TB, v any) string {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(buf.String(), "\n")
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && strings.HasPrefix(s[i:], `\ufffd`):
			out.WriteRune('\ufffd')
			i += len(`\ufffd`) - 1
		case s[i] == '\\':
			out.WriteString(s[i : i+2])
			i++
		default:
			out.WriteByte(s[i])
		}
	}
	return out.String()
}

// contextJSON must produce exactly what encoding/json produces.
func TestContextJSONMatchesEncodingJSON(t *testing.T) {
	values := []any{
		nil, true, false, "", "plain", `q"uote\back`, "tab\tnl\n\x01", "<a&b>", "héllo ✓", "bad\xffutf8", "\u2028\u2029",
		int64(-5), 7, 1.5, 1e21, 1e-7, float64(3),
		[]any{}, map[string]any{}, []any{nil, "x", []any{int64(1)}},
		map[string]any{"b": 1, "a": map[string]any{"z": "y", "é": []any{true}}},
		map[string]string{"k": "v"}, []string{"a"}, json.Number("12"),
		Context{"params": map[string]any{"x": int64(1)}},
		testOwner(), testContext(),
	}
	for _, v := range values {
		got, err := contextJSON(v)
		require.NoError(t, err, "%#v", v)
		assert.Equal(t, stdJSON(t, v), string(got), "%#v", v)
	}

	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	_, err := contextJSON(cyclic)
	assert.ErrorContains(t, err, "nested deeper than")
	_, err = contextJSON(map[string]any{"f": func() {}})
	assert.Error(t, err)
}
