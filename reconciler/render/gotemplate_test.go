package render

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// setLimits changes the render bounds for one test.
func setLimits(t *testing.T, timeout time.Duration, bytes, objects int) {
	t.Helper()
	old := limits
	if timeout > 0 {
		limits.timeout = timeout
	}
	if bytes > 0 {
		limits.bytes = bytes
	}
	if objects > 0 {
		limits.objects = objects
	}
	t.Cleanup(func() { limits = old })
}

// waitFlights waits until abandoned renders have finished, so that they do
// not hold render slots in later tests.
func waitFlights(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		flights.Lock()
		defer flights.Unlock()
		return len(flights.m) == 0
	}, time.Minute, 10*time.Millisecond)
}

// freshGoTemplateCache makes renders in t run a child again.
func freshGoTemplateCache(t testing.TB) {
	old := goTemplateResults
	goTemplateResults = newLRU(8192, 32<<20)
	t.Cleanup(func() { goTemplateResults = old })
}

func goRender(t *testing.T, text string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return GoTemplate().Render(context.Background(), &api.TemplateSpec{GoTemplate: text}, testContext())
}

func TestGoTemplateRenders(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []map[string]any
	}{
		{"context like $(…)$", `
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .workload.metadata.name }}-cfg
  labels: {{ .labels | toJson }}
data:
  url: {{ .sources.src.url | quote }}
  single: {{ .source.revision | quote }}
  image: {{ .images.img.image | quote }}
  replicas: "{{ .params.replicas }}"
  ratio: "{{ .params.ratio }}"
  upper: {{ .params.prefix | upper | quote }}
  html: {{ .params.html.q | quote }}
`, []map[string]any{{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "petclinic-cfg", "labels": map[string]any{"app": "x"}},
			"data": map[string]any{"url": "https://git/x.tgz", "single": "abc123", "image": "registry.io/x@sha256:1",
				"replicas": "3", "ratio": "0.5", "upper": "REGISTRY.IO/APPS/", "html": "<a&b>"},
		}}},
		{"numbers stay integers", `{apiVersion: test.run/v1alpha1, kind: Test, metadata: {name: x}, spec: {replicas: {{ .params.replicas }}, gen: {{ .workload.metadata.generation }}}}`,
			[]map[string]any{{"apiVersion": "test.run/v1alpha1", "kind": "Test", "metadata": map[string]any{"name": "x"},
				"spec": map[string]any{"replicas": int64(3), "gen": int64(4)}}}},
		{"toYaml and nindent", `
apiVersion: test.run/v1alpha1
kind: Test
metadata: {name: x}
spec:
  config: {{- .config | toYaml | nindent 4 }}
  list: {{- .params.list | toYaml | nindent 4 }}
`, []map[string]any{{"apiVersion": "test.run/v1alpha1", "kind": "Test", "metadata": map[string]any{"name": "x"},
			"spec": map[string]any{"config": map[string]any{"a": "b"}, "list": []any{"a", "b"}}}}},
		{"optional values with dig and hasKey", `
apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data:
  a: {{ dig "nope" "fallback" .params | quote }}
  b: {{ if hasKey .params "nope" }}"yes"{{ else }}"no"{{ end }}
`, []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"},
			"data": map[string]any{"a": "fallback", "b": "no"}}}},
		{"several documents and a List", `
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
---
# only a comment
---
apiVersion: v1
kind: List
items:
{{- range $i := until 2 }}
- {apiVersion: v1, kind: Secret, metadata: {name: s{{ $i }}}}
{{- end }}
`, []map[string]any{
			{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}},
			{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s0"}},
			{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s1"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := testContext()
			tc["labels"] = map[string]any{"app": "x"}
			objs, err := GoTemplate().Render(context.Background(), &api.TemplateSpec{GoTemplate: tt.text}, tc)
			require.NoError(t, err)
			var got []map[string]any
			for _, o := range objs {
				got = append(got, o.Object)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestGoTemplateErrors(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		parts []string
	}{
		{"empty", "  \n", []string{"goTemplate is empty"}},
		{"does not parse", "metadata: {{ .workload.metadata.name ", []string{"goTemplate does not parse", "unclosed action"}},
		{"missing key", "kind: {{ .params.nope }}", []string{"goTemplate failed to render", `map has no entry for key "nope"`}},
		{"missing nested key", "kind: {{ .workload.spec.image.name }}", []string{`map has no entry for key "image"`}},
		{"not YAML", "apiVersion: v1\nkind: [ConfigMap\n", []string{"goTemplate output is not valid YAML"}},
		{"not an object", "- a\n- b\n", []string{"goTemplate output does not render an object"}},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", []string{"renders an object without apiVersion/kind: kind"}},
		{"second document at fault", "{apiVersion: v1, kind: ConfigMap}\n---\n{apiVersion: v1}\n", []string{"goTemplate output (document 2)", "without apiVersion/kind"}},
		{"nothing rendered", "{{/* nothing */}}\n", []string{"goTemplate rendered no object"}},
		{"env is gone", `kind: {{ env "HOME" }}`, []string{"does not parse", `function "env" not defined`}},
		{"expandenv is gone", `kind: {{ expandenv "$HOME" }}`, []string{`function "expandenv" not defined`}},
		{"now is refused", `kind: {{ now }}`, []string{"function now is not available in goTemplate", "every render"}},
		{"random is refused", `kind: {{ randAlphaNum 8 }}`, []string{"function randAlphaNum is not available"}},
		{"keys are refused", `kind: {{ genPrivateKey "rsa" }}`, []string{"function genPrivateKey is not available"}},
		{"dns is refused", `kind: {{ getHostByName "example.com" }}`, []string{"function getHostByName is not available"}},
		{"required", `kind: {{ required "params.kind is required" "" }}`, []string{"params.kind is required"}},
		{"fail", `kind: {{ fail "no way" }}`, []string{"no way"}},
		{"huge until", `{{ range until 1000000000 }}{{ end }}`, []string{"until: 1000000000 is more than the 65536 allowed"}},
		{"huge negative until", `{{ range until -9223372036854775808 }}{{ end }}`, []string{"is more than the 65536 allowed"}},
		{"huge untilStep", `{{ range untilStep 0 1000000000 1 }}{{ end }}`, []string{"untilStep:"}},
		{"huge seq", `{{ seq 1 1000000000 }}`, []string{"seq:"}},
		{"huge repeat", `{{ repeat 1000000000 "ab" }}`, []string{"repeat: 1000000000 copies"}},
		{"huge indent", `{{ indent 1000000000 "x" }}`, []string{"indent:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := goRender(t, tt.text)
			require.Error(t, err)
			assert.Nil(t, objs)
			var se *StampError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, GoTemplateName, se.Engine)
			for _, p := range tt.parts {
				assert.Contains(t, err.Error(), p)
			}
		})
	}
}

// Sprig's set and unset modify the maps they are given; the template works
// on a copy, so the shared owner object is left alone.
func TestGoTemplateDoesNotModifyTheContext(t *testing.T) {
	tc := testContext()
	_, err := GoTemplate().Render(context.Background(), &api.TemplateSpec{GoTemplate: `
{{- $_ := set .workload.metadata "name" "hacked" }}
{{- $_ := unset .params "replicas" }}
{apiVersion: v1, kind: ConfigMap, metadata: {name: {{ .workload.metadata.name }}}}`}, tc)
	require.NoError(t, err)
	assert.Equal(t, "petclinic", tc["workload"].(map[string]any)["metadata"].(map[string]any)["name"])
	assert.Equal(t, int64(3), tc["params"].(map[string]any)["replicas"])
}

func TestGoTemplateBounds(t *testing.T) {
	t.Run("output size", func(t *testing.T) {
		setLimits(t, 0, 1024, 0)
		_, err := goRender(t, `{{ range until 5000 }}x{{ end }}`)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "goTemplate rendered more than 1024 bytes")
	})
	t.Run("object count", func(t *testing.T) {
		setLimits(t, 0, 0, 3)
		_, err := goRender(t, `{{ range $i := until 4 }}
---
{apiVersion: v1, kind: ConfigMap, metadata: {name: c{{ $i }}}}
{{ end }}`)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "goTemplate rendered more than 3 objects")
	})
	t.Run("time", func(t *testing.T) {
		setLimits(t, 50*time.Millisecond, 0, 0)
		freshGoTemplateCache(t)
		defer waitFlights(t)
		// Writes nothing, so only the deadline stops it.
		slow := `{{ range until 2000 }}{{ range until 2000 }}{{ end }}{{ end }}{apiVersion: v1, kind: ConfigMap}`
		start := time.Now()
		_, err := goRender(t, slow)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "goTemplate rendering did not finish within 50ms")
		assert.Less(t, time.Since(start), 2*time.Second)
		// The render's child is killed: its slot is free again at once,
		// not once the loop would have ended.
		start = time.Now()
		waitFlights(t)
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.Empty(t, renderSlots, "no slot held")
		// It is not rendered again for a while (each time would hold a
		// slot until the deadline), and stays retried with backoff.
		n := goTemplateChildren.started.Load()
		_, err = goRender(t, slow)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "goTemplate rendering did not finish within 50ms")
		assert.True(t, Retryable(err))
		flights.Lock()
		assert.Empty(t, flights.m)
		flights.Unlock()
		assert.Equal(t, n, goTemplateChildren.started.Load(), "no child started")
	})
	t.Run("a writing template stops at the deadline", func(t *testing.T) {
		setLimits(t, 100*time.Millisecond, 64<<20, 0)
		freshGoTemplateCache(t)
		defer waitFlights(t)
		start := time.Now()
		_, err := goRender(t, `{{ range until 60000 }}{{ range until 60000 }}x{{ end }}{{ end }}`)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "did not finish within")
		// The writer refuses writes after the deadline: the render ends soon.
		waitFlights(t)
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("busy", func(t *testing.T) {
		setLimits(t, 100*time.Millisecond, 0, 0)
		// The refused render's flight may still get a slot after the
		// cleanup below, and time out with what is left of its 100 ms:
		// a later run of this test must not find that remembered.
		freshGoTemplateCache(t)
		for range cap(renderSlots) {
			renderSlots <- struct{}{}
		}
		defer func() {
			for range cap(renderSlots) {
				<-renderSlots
			}
			waitFlights(t)
		}()
		_, err := goRender(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: busy}}`)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "render slots are held by renders that have not finished")
		assert.True(t, Retryable(err), "slots busy: retried with backoff")
	})
}

// Which render failures the reconciler retries with backoff: running out
// of time or of render slots; never a template that is wrong.
func TestRetryable(t *testing.T) {
	freshGoTemplateCache(t)
	t.Run("time-out", func(t *testing.T) {
		setLimits(t, 50*time.Millisecond, 0, 0)
		defer waitFlights(t)
		_, err := goRender(t, `{{ range until 2000 }}{{ range until 2000 }}{{ end }}{{ end }}{apiVersion: v1, kind: ConfigMap}`)
		require.Error(t, err)
		assert.True(t, Retryable(err), "a time-out: %v", err)
		var se *StampError
		assert.True(t, errors.As(err, &se), "still a StampError")
	})
	// With the usual time bound: a render may start a child process, which
	// on a loaded machine can take longer than the time-out above.
	for _, bad := range []string{"{apiVersion: v1, kind: ConfigMap, metadata: {name: {{ .params.nope }}}}", "kind: {{ .workload.metadata.name", "{apiVersion: v1}"} {
		_, err := goRender(t, bad)
		require.Error(t, err)
		assert.False(t, Retryable(err), "%q: %v", bad, err)
	}
}

func TestGoTemplateCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := GoTemplate().Render(ctx, &api.TemplateSpec{GoTemplate: "{apiVersion: v1, kind: ConfigMap}"}, testContext())
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "canceled"), err.Error())
}

// A template runs in a child process: what it allocates does not reach the
// controller's heap, and the limit that stopped it is named.
func TestGoTemplateRunsInABoundedChild(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory does not fit the child's memory limit, which is off")
	}
	freshGoTemplateCache(t)
	before := goHeapMapped()
	// 16 bytes doubled 25 times: 512 MiB in one string.
	_, err := goRender(t, `{{ $s := "0123456789abcdef" }}{{ range until 25 }}{{ $s = print $s $s }}{{ end }}
{apiVersion: v1, kind: ConfigMap, metadata: {name: x}, data: {n: "{{ len $s }}"}}`)
	require.Error(t, err)
	assert.Equal(t, "goTemplate failed to render: the template needs more than 256 MiB of memory", err.Error())
	assert.False(t, Retryable(err), "a template at fault is not retried")
	assert.Less(t, goHeapMapped()-before, uint64(64<<20), "the controller's memory did not grow with it")

	// Recursion: 1,000 levels render; without end, it stops at Go's own
	// bound (100,000 levels) or, as the levels' variables are live in the
	// heap, at the child's memory limit near it, whichever the garbage
	// collector's timing reaches first. Either is named, neither retried.
	objs, err := goRender(t, `{{ define "r" }}{{ if lt . 1000 }}{{ template "r" (add . 1) }}{{ else }}{{ . }}{{ end }}{{ end }}
{apiVersion: v1, kind: ConfigMap, metadata: {name: x}, data: {depth: "{{ template "r" 0 }}"}}`)
	require.NoError(t, err)
	assert.Equal(t, "1000", objs[0].Object["data"].(map[string]any)["depth"])
	_, err = goRender(t, `{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}`)
	require.Error(t, err)
	if !strings.Contains(err.Error(), "needs more than 256 MiB of memory") {
		assert.Contains(t, err.Error(), "goTemplate failed to render: template: goTemplate:1:")
		assert.Contains(t, err.Error(), "exceeded maximum template depth (100000)")
	}
	assert.False(t, Retryable(err))
}

// goHeapMapped is the memory the Go runtime of this process has mapped;
// it does not shrink.
func goHeapMapped() uint64 { return mappedBytes() }

// Children wait for the next render; one that was ended meanwhile is
// replaced, and idle ones are let go.
func TestGoTemplateChildren(t *testing.T) {
	freshGoTemplateCache(t)
	old := goTemplateChildren
	goTemplateChildren = newChildPool(goTemplateChildEnv)
	goTemplateChildren.idleTimeout = 2 * time.Second
	t.Cleanup(func() { goTemplateChildren = old })
	p := goTemplateChildren
	cm := func(name string) string { return "{apiVersion: v1, kind: ConfigMap, metadata: {name: " + name + "}}" }

	for _, name := range []string{"a", "b", "c"} {
		objs, err := goRender(t, cm(name))
		require.NoError(t, err)
		assert.Equal(t, name, objs[0].GetName())
	}
	assert.Equal(t, int64(1), p.started.Load(), "one child rendered all three")
	require.Equal(t, 1, p.idleCount())

	// The kernel's OOM killer ends an idle child: the next render starts
	// another one, and does not fail.
	p.mu.Lock()
	idle := p.idle[0]
	p.mu.Unlock()
	idle.kill()
	_ = idle.wait()
	objs, err := goRender(t, cm("d"))
	require.NoError(t, err)
	assert.Equal(t, "d", objs[0].GetName())
	assert.Equal(t, int64(2), p.started.Load())

	// Idle children are let go after idleTimeout: they exit.
	p.mu.Lock()
	idle = p.idle[0]
	p.idleTimeout = 200 * time.Millisecond
	p.mu.Unlock()
	require.Eventually(t, func() bool { return p.idleCount() == 0 }, 10*time.Second, 20*time.Millisecond)
	_ = idle.wait()
	require.NotNil(t, idle.cmd.ProcessState)
	assert.True(t, idle.cmd.ProcessState.Success(), "it exited when its stdin closed: %v", idle.cmd.ProcessState)
}

// A step rendered again with the same template and context is answered
// from the cache, without a child; a new context replaces the step's entry.
func TestGoTemplateCache(t *testing.T) {
	freshGoTemplateCache(t)
	spec := &api.TemplateSpec{GoTemplate: "{apiVersion: v1, kind: ConfigMap, metadata: {name: {{ .workload.metadata.name }}}, data: {rv: '{{ .workload.metadata.resourceVersion }}'}}"}
	tc := testContext()
	md := tc["workload"].(map[string]any)["metadata"].(map[string]any)
	md["resourceVersion"] = "1"
	render := func(tc Context) *unstructured.Unstructured {
		t.Helper()
		objs, err := GoTemplate().Render(context.Background(), spec, tc)
		require.NoError(t, err)
		require.Len(t, objs, 1)
		return objs[0]
	}
	n := goTemplateChildren.exchanges.Load()
	a := render(tc)
	assert.Equal(t, n+1, goTemplateChildren.exchanges.Load())
	a.SetName("changed by the caller")
	b := render(tc)
	assert.Equal(t, n+1, goTemplateChildren.exchanges.Load(), "the same template and context: from the cache")
	assert.Equal(t, "petclinic", b.GetName(), "each caller gets its own objects")

	md["resourceVersion"] = "2"
	c := render(tc)
	assert.Equal(t, n+2, goTemplateChildren.exchanges.Load(), "a new context renders again")
	assert.Equal(t, "2", c.Object["data"].(map[string]any)["rv"])
	assert.Equal(t, 1, goTemplateResults.ll.Len(), "the step's entry was replaced")

	other := testContext()
	other["labels"] = map[string]any{"carto.run/resource-name": "another-step"}
	other["workload"].(map[string]any)["metadata"].(map[string]any)["resourceVersion"] = "2"
	render(other)
	assert.Equal(t, 2, goTemplateResults.ll.Len(), "another step of the owner has its own entry")
	render(tc)
	assert.Equal(t, n+3, goTemplateChildren.exchanges.Load(), "neither evicted the other")
}
