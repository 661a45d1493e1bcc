package render

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// The ytt tests run the real child: this test binary links the package, so
// it becomes the renderer when runYtt starts it (yttchild.go).

func yttRenderWith(t testing.TB, text string, tc Context) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return Ytt().Render(context.Background(), &api.TemplateSpec{Ytt: text}, tc)
}

// yttData renders text and returns the data of its only object.
func yttData(t *testing.T, text string, tc Context) map[string]any {
	t.Helper()
	objs, err := yttRenderWith(t, text, tc)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	data, _ := objs[0].Object["data"].(map[string]any)
	return data
}

// freshYttCache makes renders in t run the child again.
func freshYttCache(t testing.TB) {
	old := yttResults
	yttResults = newLRU(512, 16<<20)
	t.Cleanup(func() { yttResults = old })
}

const yttHead = "#@ load(\"@ytt:data\", \"data\")\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n"

// Every key of the context is a data value of the shape the other engines
// see.
func TestYttDataValues(t *testing.T) {
	tests := []struct {
		name, expr string
		want       any
	}{
		{"workload", `data.values.workload.metadata.name`, "petclinic"},
		{"deliverable is the owner too", `data.values.deliverable.metadata.namespace`, "dev"},
		{"nested owner field", `data.values.workload.spec.source.git.ref.branch`, "main"},
		{"param", `data.values.params.prefix`, "registry.io/apps/"},
		{"param int", `data.values.params.replicas`, int64(3)},
		{"param bool", `data.values.params.debug`, true},
		{"param null", `data.values.params.nothing`, nil},
		{"param list", `data.values.params.list`, []any{"a", "b"}},
		{"param with HTML", `data.values.params.html.q`, "<a&b>"},
		{"sources by name", `data.values.sources.src.url`, "https://git/x.tgz"},
		{"the only source", `data.values.source.revision`, "abc123"},
		{"images by name", `data.values.images.img.image`, "registry.io/x@sha256:1"},
		{"the only image", `data.values.image`, "registry.io/x@sha256:1"},
		{"configs by name", `data.values.configs.cfg.config.a`, "b"},
		{"the only config", `data.values.config`, map[string]any{"a": "b"}},
		{"deployment", `data.values.deployment.url`, "https://deploy/y.tgz"},
		{"labels", `data.values.labels["carto.run/workload-name"]`, "petclinic"},
		{"keys are the context's", `sorted(dir(data.values))`, []any{"config", "configs", "deliverable", "deployment", "image", "images", "labels", "params", "source", "sources", "workload"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := yttData(t, yttHead+"  v: #@ "+tt.expr+"\n", testContext())
			assert.Equal(t, tt.want, data["v"])
		})
	}
}

// ytt's own features: its modules, functions, overlays, several documents.
func TestYttFeatures(t *testing.T) {
	tests := []struct {
		name, text string
		want       []map[string]any // data of each object
	}{
		{"function and struct", `#@ load("@ytt:data", "data")
#@ load("@ytt:struct", "struct")
#@ def name(suffix):
#@   return data.values.workload.metadata.name + "-" + suffix
#@ end
#@ s = struct.make(a=1)
apiVersion: v1
kind: ConfigMap
metadata:
  name: #@ name("cfg")
data:
  name: #@ name("x")
  a: #@ s.a
`, []map[string]any{{"name": "petclinic-x", "a": int64(1)}}},
		{"loop over documents", `#@ load("@ytt:data", "data")
#@ for v in data.values.params.list:
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: #@ v
data:
  v: #@ v
#@ end
`, []map[string]any{{"v": "a"}, {"v": "b"}}},
		{"overlay", `#@ load("@ytt:overlay", "overlay")
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
data: {x: "1", w: "2"}
#@overlay/match by=overlay.subset({"metadata": {"name": "a"}})
---
data:
  x: "changed"
  #@overlay/match missing_ok=True
  z: "added"
`, []map[string]any{{"x": "changed", "w": "2", "z": "added"}}},
		{"modules", `#@ load("@ytt:base64", "base64")
#@ load("@ytt:json", "json")
#@ load("@ytt:sha256", "sha256")
#@ load("@ytt:data", "data")
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
data:
  b64: #@ base64.encode("hi")
  json: #@ json.encode(data.values.params.list)
  sha: #@ sha256.sum("x")[:8]
`, []map[string]any{{"b64": "aGk=", "json": `["a","b"]`, "sha": "2d711642"}}},
		{"only the template's own file", `#@ load("@ytt:data", "data")
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
data:
  files: #@ data.list()
`, []map[string]any{{"files": []any{"stdin.yml"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := yttRenderWith(t, tt.text, testContext())
			require.NoError(t, err)
			require.Len(t, objs, len(tt.want))
			for i, o := range objs {
				assert.Equal(t, tt.want[i], o.Object["data"], "object %d", i)
			}
		})
	}
}

// The templates of Cartographer's ytt kuttl tests, with the contexts their
// chains give them, render what those tests assert.
func TestYttCartographerExamples(t *testing.T) {
	supplyChain := func(in Inputs, params map[string]any, labels map[string]string) Context {
		return NewContext(api.KindWorkload, testOwner(), params, in, labels)
	}
	tests := []struct {
		name, text string
		tc         Context
		want       map[string]any
	}{
		{"templates-ytt source template", `apiVersion: v1
kind: ConfigMap
metadata:
  name: example-first-configmap
data:
  player_initial_lives: "three"
  player_loves: "gaming"
`, supplyChain(Inputs{}, nil, nil), map[string]any{"player_initial_lives": "three", "player_loves": "gaming"}},
		{"templates-ytt image template", `#@ load("@ytt:data", "data")

apiVersion: v1
kind: ConfigMap
metadata:
  name: example-image-configmap
data:
  player_current_lives: #@ data.values.source.url
  some_other_info: #@ data.values.sources['solo-source-provider'].revision
`, supplyChain(Inputs{Sources: map[string]Source{"solo-source-provider": {URL: "5", Revision: "knitting"}}}, nil, nil),
			map[string]any{"player_current_lives": "5", "some_other_info": "knitting"}},
		{"templates-ytt config template", `#@ load("@ytt:data", "data")

apiVersion: v1
kind: ConfigMap
metadata:
  name: example-config-configmap-ytt
data:
  favorite_color: #@ data.values.image
`, supplyChain(Inputs{Images: map[string]any{"solo-image-provider": "knitting"}}, nil, nil), map[string]any{"favorite_color": "knitting"}},
		{"templates-ytt bare template", `#@ load("@ytt:data", "data")

apiVersion: v1
kind: ConfigMap
metadata:
  name: example-config-ytt
data:
  best_name: #@ data.values.config
`, supplyChain(Inputs{Configs: map[string]any{"solo-config-provider": "knitting"}}, nil, nil), map[string]any{"best_name": "knitting"}},
		{"templates-ytt params", `#@ load("@ytt:data", "data")

apiVersion: v1
kind: ConfigMap
metadata:
  name: example-config-ytt-params
data:
  spooky_letter: #@ data.values.params["waciuma-com/quality"]
  who: #@ data.values.params["supply-chain-param"]
  yes: #@ data.values.params["resource-param"]
`, supplyChain(Inputs{}, map[string]any{"waciuma-com/quality": "omicron", "supply-chain-param": "me", "resource-param": "me"}, nil),
			// ytt reads YAML 1.1, where the key yes is the boolean true; so
			// does Cartographer's kuttl assert.
			map[string]any{"spooky_letter": "omicron", "who": "me", "true": "me"}},
		{"labels-in-context (supply chain)", `#@ load("@ytt:data", "data")

apiVersion: v1
kind: ConfigMap
metadata:
  name: test-output---workload-labels-in-context
data:
  extractedLabel: #@ data.values.labels['carto.run/workload-name']
`, supplyChain(Inputs{}, nil, map[string]string{"carto.run/workload-name": "petclinic---workload-labels-in-context"}),
			map[string]any{"extractedLabel": "petclinic---workload-labels-in-context"}},
		{"labels-in-context (delivery)", `#@ load("@ytt:data", "data")

apiVersion: v1
kind: ConfigMap
metadata:
  name: test-output---deliverable-labels-in-context
data:
  extractedLabel: #@ data.values.labels['carto.run/deliverable-name']
`, NewContext(api.KindDeliverable, testOwner(), nil, Inputs{}, map[string]string{"carto.run/deliverable-name": "petclinic---deliverable-labels-in-context"}),
			map[string]any{"extractedLabel": "petclinic---deliverable-labels-in-context"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, yttData(t, tt.text, tt.tc))
		})
	}

	// templates-ytt-bad-params: the param is missing; ytt's message names
	// the key and the line, as Cartographer's does.
	_, err := yttRenderWith(t, `#@ load("@ytt:data", "data")

apiVersion: v1
kind: ConfigMap
metadata:
  name: example-config-ytt-params
data:
  best_name: #@ data.values.params["waciuma-com/quality"]
`, supplyChain(Inputs{}, nil, nil))
	require.Error(t, err)
	// Exactly the text Cartographer v0.8.11 reports (its kuttl suite, templates-ytt-bad-params).
	assert.Equal(t, "unable to apply ytt template: ytt: Error: \n- key \"waciuma-com/quality\" not in struct\n    in <toplevel>\n      stdin.yml:8 |   best_name: #@ data.values.params[\"waciuma-com/quality\"]\n", err.Error())
}

func TestYttErrors(t *testing.T) {
	tests := []struct {
		name, text string
		parts      []string
	}{
		{"empty", " \n", []string{"ytt is empty"}},
		{"missing data value", yttHead + "  a: #@ data.values.params.nope\n",
			[]string{"unable to apply ytt template: ytt: Error: \n- struct has no .nope field or method", "stdin.yml:6 |   a: #@ data.values.params.nope"}},
		{"Starlark syntax", "apiVersion: v1\nkind: ConfigMap\n#@ if True\nmetadata: {name: x}\n",
			[]string{"unable to apply ytt template: ytt: Error: \n- got newline, want ':'", "stdin.yml:4 | metadata"}},
		{"YAML syntax", "apiVersion: v1\nkind: [ConfigMap\n", []string{"unable to apply ytt template: ytt: Error: Unmarshaling YAML template 'stdin.yml': yaml: line 2"}},
		{"undefined name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: #@ nope\n",
			[]string{"unable to apply ytt template: ytt: Error: \n- undefined: nope", "stdin.yml:4"}},
		{"failed assertion", "#@ load(\"@ytt:assert\", \"assert\")\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: #@ assert.fail(\"name is required\")\n",
			[]string{"unable to apply ytt template: ytt: Error: \n- assert.fail: fail: name is required", "stdin.yml:5"}},
		{"load of a file", "#@ load(\"helpers.star\", \"f\")\na: 1\n",
			[]string{"unable to apply ytt template: ytt: Error: \n- cannot load helpers.star", "stdin.yml:1"}},
		{"load of an absolute path", "#@ load(\"/etc/passwd\", \"f\")\na: 1\n",
			[]string{"unable to apply ytt template: ytt: Error: \n- cannot load /etc/passwd", "stdin.yml:1"}},
		{"load of a private library", "#@ load(\"@mylib:x.star\", \"f\")\na: 1\n",
			[]string{"unable to apply ytt template: ytt: Error: \n- cannot load @mylib:x.star", "stdin.yml:1"}},
		{"load of itself", "#@ load(\"stdin.yml\", \"f\")\na: 1\n",
			[]string{"unable to apply ytt template: ytt: Error: \n- cannot load stdin.yml", "stdin.yml:1"}},
		{"read of a file", "#@ load(\"@ytt:data\", \"data\")\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: #@ data.read(\"/etc/hostname\")\n",
			[]string{"unable to apply ytt template: ytt: Error:", "/etc/hostname", "stdin.yml:5"}},
		{"no object", "#@ if False:\na: 1\n#@ end\n", []string{"ytt rendered no object"}},
		{"not an object", "- a\n- b\n", []string{"ytt output does not render an object"}},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", []string{"ytt output renders an object without apiVersion/kind"}},
		{"recursion", "#@ def f(n):\n#@   return f(n+1)\n#@ end\na: #@ f(0)\n",
			[]string{"ytt failed: the template recursed too deeply (more than 64 MiB of stack)"}},
		{"memory", "#@ x = [0] * 200000000\na: #@ len(x)\n",
			[]string{"ytt failed: the template needs more than 256 MiB of memory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "memory" && raceEnabled {
				t.Skip("race builds run the child without its memory limit")
			}
			_, err := yttRenderWith(t, tt.text, testContext())
			require.Error(t, err)
			var se *StampError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, YttName, se.Engine)
			for _, p := range tt.parts {
				assert.Contains(t, err.Error(), p)
			}
		})
	}
}

// The time, size and object bounds hold, and a runaway template is killed.
func TestYttBounds(t *testing.T) {
	tests := []struct {
		name, text, want string
		timeout          time.Duration
		bytes, objects   int
	}{
		{"endless loop", "#@ def f():\n#@   while True:\n#@     x = 1\n#@   end\n#@ end\na: #@ f()\n",
			"ytt rendering did not finish within 500ms", 500 * time.Millisecond, 0, 0},
		{"too much output", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: #@ \"x\" * 100000\n",
			"ytt rendered more than 4096 bytes", 0, 4096, 0},
		{"too many objects", "#@ for i in range(3):\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: #@ str(i)\n#@ end\n",
			"ytt rendered more than 2 objects", 0, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setLimits(t, tt.timeout, tt.bytes, tt.objects)
			freshYttCache(t)
			start := time.Now()
			_, err := yttRenderWith(t, tt.text, testContext())
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.Less(t, time.Since(start), 5*time.Second, "the child is killed, not waited for")
			waitFlights(t)
		})
	}
}

// The child renders without the controller's environment (runYtt passes it
// only the switch) and without the test's flags.
func TestYttEnvironment(t *testing.T) {
	t.Setenv("YTTEXPERIMENTS", "validations")
	t.Setenv("KONTINUE_SECRET", "hunter2")
	freshYttCache(t)
	data := yttData(t, yttHead+"  a: ok\n", testContext())
	assert.Equal(t, map[string]any{"a": "ok"}, data)
}

// A result comes from the cache when template and context are unchanged,
// and is decoded into fresh objects each time.
func TestYttCache(t *testing.T) {
	freshYttCache(t)
	text := yttHead + "  name: #@ data.values.workload.metadata.name\n"
	first, err := yttRenderWith(t, text, testContext())
	require.NoError(t, err)
	first[0].Object["data"] = "modified by the caller"
	start := time.Now()
	second, err := yttRenderWith(t, text, testContext())
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 50*time.Millisecond)
	assert.Equal(t, map[string]any{"name": "petclinic"}, second[0].Object["data"])

	tc := testContext()
	tc["workload"] = map[string]any{"metadata": map[string]any{"name": "other"}}
	third, err := yttRenderWith(t, text, tc)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"name": "other"}, third[0].Object["data"])
}

func TestYttChildProtocol(t *testing.T) {
	var out, errOut strings.Builder
	assert.Equal(t, yttExitUsage, yttChild(strings.NewReader("not json"), &out, &errOut))
	assert.Contains(t, errOut.String(), "bad request")

	req, err := json.Marshal(yttRequest{Template: "a: #@ 1 + 1\n", Values: json.RawMessage(`{"params":{}}`)})
	require.NoError(t, err)
	out.Reset()
	errOut.Reset()
	assert.Equal(t, 0, yttChild(strings.NewReader(string(req)), &out, &errOut), errOut.String())
	assert.Equal(t, "a: 2\n", out.String())
}

func FuzzYttRender(f *testing.F) {
	for _, s := range []string{
		"", "a: 1", yttHead + "  a: #@ data.values.params.prefix\n", "#@ load(\"x\", \"y\")", "#@ def f(:\n",
		"#@ for i in range(3):\n- #@ i\n#@ end\n", "---\n---\n", "#@data/values\n---\nparams: 1\n",
		"#@ load(\"@ytt:overlay\", \"overlay\")\n#@overlay/match by=overlay.all\n---\na: 1\n", "a: #@ \"\\xff\"",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: #@ str(1/0)\n",
	} {
		f.Add(s)
	}
	old := limits
	limits.timeout = 3 * time.Second
	f.Cleanup(func() { limits = old })
	tc := testContext()
	f.Fuzz(func(t *testing.T, s string) {
		start := time.Now()
		objs, err := yttRenderWith(t, s, tc)
		if d := time.Since(start); d > limits.timeout+5*time.Second {
			t.Fatalf("render took %s", d)
		}
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
		if len(objs) == 0 {
			t.Fatalf("no object and no error")
		}
		for _, o := range objs {
			if o.GetKind() == "" || o.GetAPIVersion() == "" {
				t.Fatalf("object without kind: %v", o.Object)
			}
		}
	})
}

// A typical template (a Deployment from params, labels and an image): the
// whole engine without the cache (a process start and ytt), with the cache,
// and the ytt library alone.
const yttBenchTemplate = `#@ load("@ytt:data", "data")
#@ load("@ytt:overlay", "overlay")
#@ def labels():
app.kubernetes.io/name: #@ data.values.workload.metadata.name
app.kubernetes.io/part-of: #@ data.values.labels["carto.run/workload-name"]
#@ end
apiVersion: apps/v1
kind: Deployment
metadata:
  name: #@ data.values.workload.metadata.name
  labels: #@ labels()
spec:
  replicas: #@ data.values.params.replicas
  selector:
    matchLabels: #@ labels()
  template:
    metadata:
      labels: #@ labels()
    spec:
      containers:
      - name: workload
        image: #@ data.values.image
        env:
        #@ for i, v in enumerate(data.values.params.list):
        - name: #@ "V" + str(i)
          value: #@ v
        #@ end
---
apiVersion: v1
kind: Service
metadata:
  name: #@ data.values.workload.metadata.name
  labels: #@ labels()
spec:
  selector: #@ labels()
  ports:
  - port: 80
    targetPort: 8080
`

func BenchmarkYttRender(b *testing.B) {
	tc := testContext()
	b.Run("engine", func(b *testing.B) {
		freshYttCache(b)
		for b.Loop() {
			yttResults = newLRU(512, 16<<20)
			if _, err := yttRenderWith(b, yttBenchTemplate, tc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("engine-cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := yttRenderWith(b, yttBenchTemplate, tc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		values, err := contextJSON(map[string]any(tc))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := renderYtt(yttBenchTemplate, values); err != nil {
				b.Fatal(err)
			}
		}
	})
}
