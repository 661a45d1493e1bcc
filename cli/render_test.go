package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/cli/objdiff"
	"kontinue.dev/kontinue/reconciler/api"
)

const chainFiles = `
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: src}
spec:
  urlPath: .data.url
  revisionPath: .data.rev
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-src}
    data: {url: $(workload.spec.source.git.url)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: img}
spec:
  params: [{name: registry, default: reg.example}]
  imagePath: .data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-img}
    data: {image: "$(params.registry)$/app:$(source.revision)$", from: $(source.url)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: go-app}
spec:
  goTemplate: |
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: {{ .workload.metadata.name }}-app}
    data: {image: {{ .image | quote }}}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: web}
spec:
  selector: {app.tanzu.vmware.com/workload-type: web}
  resources:
  - name: source
    templateRef: {kind: ClusterSourceTemplate, name: src}
  - name: image
    templateRef: {kind: ClusterImageTemplate, name: img}
    params: [{name: registry, value: pinned.example}]
    sources: [{resource: source, name: source}]
  - name: app
    templateRef:
      kind: ClusterTemplate
      options:
      - name: go-app
        selector: {matchLabels: {flavor: go}}
      - name: missing-template
        selector: {matchLabels: {flavor: other}}
    images: [{resource: image, name: image}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: other}
spec:
  selector: {app.tanzu.vmware.com/workload-type: worker}
  resources: []
`

func workloadYAML(flavor string) string {
	return `
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: app
  namespace: dev
  labels: {app.tanzu.vmware.com/workload-type: web, flavor: ` + flavor + `}
spec:
  source: {git: {url: "https://git.example/app.git", ref: {branch: main}}}
`
}

func load(t *testing.T, docs ...string) RenderInput {
	t.Helper()
	objs, err := LoadObjects([]string{"-"}, strings.NewReader(strings.Join(docs, "\n---\n")))
	require.NoError(t, err)
	return RenderInput{Objects: objs}
}

func TestRenderWaitsForUpstreamOutputs(t *testing.T) {
	in := load(t, chainFiles, workloadYAML("go"))
	res, err := Render(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, "web", res.Chain.Name, "chosen by selector")
	require.Len(t, res.Steps, 3)
	src := res.Steps[0]
	require.Empty(t, src.Error)
	require.Len(t, src.Objects, 1)
	obj := src.Objects[0]
	require.Equal(t, "app-src", nested(obj, "metadata", "name"))
	require.Equal(t, "dev", nested(obj, "metadata", "namespace"))
	require.Equal(t, "https://git.example/app.git", nested(obj, "data", "url"))
	labels := nested(obj, "metadata", "labels").(map[string]any)
	require.Equal(t, "source", labels["carto.run/resource-name"])
	require.Equal(t, "app", labels["carto.run/workload-name"])
	require.Equal(t, "true", labels["kontinue.dev/stamped"])

	require.Contains(t, res.Steps[1].Waiting, "--step-output source.url=")
	require.Empty(t, res.Steps[1].Objects)
	require.Contains(t, res.Steps[2].Waiting, "image")
}

func TestRenderWithOutputsAndOptions(t *testing.T) {
	in := load(t, chainFiles, workloadYAML("go"))
	outs, err := parseOutputs([]string{"source.url=https://x/src.tgz", "source.revision=abc", "image.image=reg/app@sha256:1"})
	require.NoError(t, err)
	in.Outputs = outs
	res, err := Render(context.Background(), in)
	require.NoError(t, err)
	img := res.Steps[1]
	require.Empty(t, img.Waiting)
	require.Equal(t, "pinned.example/app:abc", nested(img.Objects[0], "data", "image"), "a step param given as value wins")
	require.Equal(t, "https://x/src.tgz", nested(img.Objects[0], "data", "from"))
	app := res.Steps[2]
	require.Equal(t, &ObjectName{Kind: "ClusterTemplate", Name: "go-app"}, app.Template, "option chosen by the workload's labels")
	require.Equal(t, "reg/app@sha256:1", nested(app.Objects[0], "data", "image"), "goTemplate engine")
}

func TestRenderReportsStepErrors(t *testing.T) {
	in := load(t, chainFiles, workloadYAML("other"))
	res, err := Render(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, "TemplateObjectRetrievalFailure", res.Steps[2].Reason)
	require.Contains(t, res.Steps[2].Error, "missing-template")

	in = load(t, chainFiles, workloadYAML("none"))
	res, err = Render(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, "TemplateOptionsMatchError", res.Steps[2].Reason)
	require.Contains(t, res.Steps[2].Error, "expected exactly 1 option to match, found [0]")
}

func TestRenderChainChoice(t *testing.T) {
	wl := strings.ReplaceAll(workloadYAML("go"), "workload-type: web", "workload-type: cli")
	_, err := Render(context.Background(), load(t, chainFiles, wl))
	require.ErrorContains(t, err, "SupplyChainNotFound")
	in := load(t, chainFiles, wl)
	in.Chain = "web"
	res, err := Render(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, "web", res.Chain.Name)
	_, err = Render(context.Background(), load(t, chainFiles))
	require.ErrorContains(t, err, "no Workload or Deliverable")
}

func TestParseOutputs(t *testing.T) {
	o, err := parseOutputs([]string{"a.b.url=https://x?y=z", "cfg.config={data: {k: v}}"})
	require.NoError(t, err)
	require.Equal(t, "https://x?y=z", o["a.b"]["url"], "the last dot splits step and output; the first = splits the value")
	require.Equal(t, "{data: {k: v}}", o["cfg"]["config"], "Render decides whether a config is text or YAML")
	for _, bad := range []string{"nourl", "step.colour=red", ".url=x", "step.=x"} {
		_, err := parseOutputs([]string{bad})
		require.Error(t, err, bad)
	}
}

// TestRenderCommand runs the command on a folder, as a person would.
func TestRenderCommand(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chain.yaml"), []byte(chainFiles), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "apps"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "apps", "wl.yml"), []byte(workloadYAML("go")), 0o644))
	var out, errb bytes.Buffer
	code := Main([]string{"render", "-f", dir, "--step-output", "source.url=u", "--step-output", "source.revision=r", "--step", "image"}, nil, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Contains(t, out.String(), "# step [image] ClusterImageTemplate/img\n---\n")
	require.Contains(t, out.String(), "image: pinned.example/app:r")
	require.NotContains(t, out.String(), "app-src")

	for _, format := range [][]string{{"-o", "json"}, {"--output", "json"}, {"--output=json"}} {
		out.Reset()
		code = Main(append([]string{"render", "-f", dir}, format...), nil, &out, &errb)
		require.Equal(t, 0, code, errb.String())
		var res RenderResult
		require.NoError(t, json.Unmarshal(out.Bytes(), &res), format)
		require.Len(t, res.Steps, 3)
	}

	errb.Reset()
	code = Main([]string{"render", "-f", dir, "--step-output", "imgae.image=x"}, nil, &out, &errb)
	require.Equal(t, 2, code)
	require.Contains(t, errb.String(), "names step [imgae], which ClusterSupplyChain [web] does not have (steps: source, image, app)")

	code = Main([]string{"render"}, nil, &out, &errb)
	require.Equal(t, 2, code)
}

func nested(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// TestRenderOutputsOfAWaitingStep: outputs given for a step that cannot
// be rendered itself (it waits for outputs nobody gave) reach later steps.
func TestRenderOutputsOfAWaitingStep(t *testing.T) {
	in := load(t, chainFiles, workloadYAML("go"))
	outs, err := parseOutputs([]string{"image.image=reg/app@sha256:2"})
	require.NoError(t, err)
	in.Outputs = outs
	res, err := Render(context.Background(), in)
	require.NoError(t, err)
	require.Contains(t, res.Steps[1].Waiting, "source", "the image step itself still waits")
	app := res.Steps[2]
	require.Empty(t, app.Waiting)
	require.Len(t, app.Objects, 1)
	require.Equal(t, "reg/app@sha256:2", nested(app.Objects[0], "data", "image"))
}

// TestRenderConfigAsText: the example chain's config step outputs a
// ConfigMap's data entry, which is text: a config given as that text must
// stay text in the next ConfigMap (not become a map, which no ConfigMap
// takes), and a config step holding structure still takes YAML.
func TestRenderConfigAsText(t *testing.T) {
	objs, err := LoadObjects([]string{filepath.Join("..", "examples", "supply-chain.yaml")}, nil)
	require.NoError(t, err)
	outs, err := parseOutputs([]string{"app-config.config=image: reg/hello@sha256:1\nport: 8080\n"})
	require.NoError(t, err)
	res, err := Render(context.Background(), RenderInput{Objects: objs, Outputs: outs})
	require.NoError(t, err)
	app := res.Steps[3]
	require.Equal(t, "app", app.Name)
	require.Len(t, app.Objects, 1)
	require.Equal(t, "image: reg/hello@sha256:1\nport: 8080\n", nested(app.Objects[0], "data", "manifest"))

	structured := strings.Replace(strings.Replace(chainFiles, "kind: ClusterTemplate\nmetadata: {name: go-app}", `kind: ClusterConfigTemplate
metadata: {name: cfg}
spec:
  configPath: .data
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: b}}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: go-app}`, 1), "images: [{resource: image, name: image}]", "images: [{resource: image, name: image}]\n  - name: after\n    templateRef: {kind: ClusterTemplate, name: uses-config}\n    configs: [{resource: cfg, name: config}]", 1)
	structured = strings.Replace(structured, "  - name: app\n", "  - name: cfg\n    templateRef: {kind: ClusterConfigTemplate, name: cfg}\n  - name: app\n", 1)
	structured += `
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: uses-config}
spec:
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: uses}, data: $(config)$}
`
	in := load(t, structured, workloadYAML("go"))
	in.Outputs, err = parseOutputs([]string{"cfg.config={x: hello}"})
	require.NoError(t, err)
	res, err = Render(context.Background(), in)
	require.NoError(t, err)
	last := res.Steps[len(res.Steps)-1]
	require.Equal(t, "after", last.Name)
	require.Empty(t, last.Error)
	require.Empty(t, last.Waiting)
	require.Equal(t, map[string]any{"x": "hello"}, nested(last.Objects[0], "data"), "the config step holds a map at .data: YAML")
}

// TestRenderHelpExamples runs every example of `render --help` from the
// repository root, as a reader would paste it, and keeps what it prints.
func TestRenderHelpExamples(t *testing.T) {
	c := renderCommand(&app{})
	var cmds [][]string
	var cur string
	for _, line := range strings.Split(c.Example, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		cur += " " + strings.TrimSuffix(line, "\\")
		if !strings.HasSuffix(line, "\\") {
			cmds = append(cmds, shellWords(t, strings.TrimSpace(cur)))
			cur = ""
		}
	}
	require.Len(t, cmds, 4)
	t.Chdir("..")
	var all strings.Builder
	for _, args := range cmds {
		if args[0] == "cat" {
			continue // reads files of the reader's own
		}
		require.Equal(t, "kontinue", args[0])
		var out, errb bytes.Buffer
		code := Main(args[1:], strings.NewReader(""), &out, &errb)
		require.Equal(t, 0, code, "%v: %s", args, errb.String())
		require.NotContains(t, out.String(), "cannot be stamped")
		fmt.Fprintf(&all, "$ %s\n%s\n", strings.Join(args, " "), out.String())
	}
	t.Chdir("cli")
	golden(t, "render/examples.txt", all.String())
}

// shellWords splits a command line with single quotes, as the examples
// are written.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, s)
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

func TestRenderHelmFlags(t *testing.T) {
	c := renderCommand(&app{})
	require.NoError(t, c.Flags().Parse([]string{"--helm-allow-private-networks", "--helm-allow-http"}))
	for _, f := range []string{"helm-allow-private-networks", "helm-allow-http"} {
		v, err := c.Flags().GetBool(f)
		require.NoError(t, err)
		require.True(t, v, f)
	}
}

// TestRenderRefusesWhatTheControllerRefuses: render prepares a step with
// the controller's own code (reconciler/prepare), so a mutable object
// without metadata.name, which the controller refuses, is an error here
// too (render once printed it as if it would be stamped).
func TestRenderRefusesWhatTheControllerRefuses(t *testing.T) {
	noName := strings.Replace(chainFiles, "metadata: {name: $(workload.metadata.name)$-src}", "metadata: {generateName: src-}", 1)
	res, err := Render(context.Background(), load(t, noName, workloadYAML("go")))
	require.NoError(t, err)
	src := res.Steps[0]
	require.Equal(t, "TemplateStampFailure", src.Reason)
	require.Contains(t, src.Error, "stamped ConfigMap has no metadata.name")
	require.Empty(t, src.Objects)
}

// TestRenderAndDiffRefuseWhatTheStrategyRefuses: templates the controller
// refuses once rendered (its Strategy's Check, prepare.Step) or once it
// generated a runnable: true step's objects are refused alike by `kontinue
// render` and by `kontinue diff`'s preview, with the controller's reason and
// message (e2e: TestCLIRefusesWhatTheControllerRefuses, against the
// controller itself).
func TestRenderAndDiffRefuseWhatTheStrategyRefuses(t *testing.T) {
	two := "\n    ---\n    {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n    ---\n    {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}"
	chain := `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: web}
spec:
  selector: {app.tanzu.vmware.com/workload-type: web}%s
  resources:
  - name: only
    templateRef: {kind: ClusterConfigTemplate, name: bad}`
	for _, tt := range []struct {
		name, spec, chainExtra string
		reason, message        string
	}{
		{name: "immutable, two objects", spec: "lifecycle: immutable\n  goTemplate: |" + two, reason: "TemplateStampFailure",
			message: "step [only]: a template with lifecycle immutable stamps exactly one object per input set; template [ClusterConfigTemplate/bad] rendered 2"},
		{name: "tekton, two objects", spec: "lifecycle: tekton\n  goTemplate: |" + two, reason: "TemplateStampFailure",
			message: "step [only]: a template with lifecycle tekton stamps exactly one object per input set; template [ClusterConfigTemplate/bad] rendered 2"},
		{name: "runnable, no rule for its runs", spec: "runnable: true\n  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}", reason: "TemplateStampFailure",
			message: "step [only]: template [ClusterConfigTemplate/bad] sets runnable: true, which needs a rule that says when a run has succeeded: healthRule, observedCompletion or observedMatches"},
		{name: "runnable, not the $(…)$ engine", spec: "runnable: true\n  healthRule: {alwaysHealthy: {}}\n  goTemplate: |\n    {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}", reason: "TemplateStampFailure",
			message: "step [only]: template [ClusterConfigTemplate/bad] sets runnable: true, which needs spec.template (the $(…)$ engine)"},
		{name: "runnable, an account of another namespace", spec: "runnable: true\n  healthRule: {alwaysHealthy: {}}\n  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}",
			chainExtra: "\n  serviceAccountRef: {name: builder, namespace: ci}", reason: "ServiceAccountError",
			message: "step [only] sets runnable: true, but its service account [ci/builder] is not in the Workload's namespace; a Runnable can only use an account of its own namespace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := "apiVersion: carto.run/v1alpha1\nkind: ClusterConfigTemplate\nmetadata: {name: bad}\nspec:\n  configPath: .data\n  " + tt.spec
			in := load(t, tmpl, fmt.Sprintf(chain, tt.chainExtra), workloadYAML("go"))

			res, err := Render(context.Background(), in)
			require.NoError(t, err)
			require.Len(t, res.Steps, 1)
			require.Equal(t, tt.reason, res.Steps[0].Reason, "render")
			require.Equal(t, tt.message, res.Steps[0].Error, "render")
			require.Empty(t, res.Steps[0].Objects)

			files := defs{}
			for _, o := range in.Objects {
				if definitionKind(o) {
					files.put(o)
				}
			}
			pv := &previewer{live: files, next: files, files: files, stamped: &stampedReader{}}
			var owner *unstructured.Unstructured
			for _, o := range in.Objects {
				if o.GetKind() == "Workload" {
					owner = o
				}
			}
			got, reached := pv.preview(context.Background(), api.WorkloadFlavor, owner)
			require.True(t, reached)
			require.Equal(t, []objdiff.Failure{{Step: "only", Reason: tt.reason, Message: tt.message}}, got.Failures, "diff")
			require.Empty(t, got.Objects)
		})
	}
}
