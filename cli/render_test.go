package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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

	require.Contains(t, res.Steps[1].Waiting, "--output source.url=")
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
	require.Equal(t, map[string]any{"data": map[string]any{"k": "v"}}, o["cfg"]["config"])
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
	code := Main([]string{"render", "-f", dir, "--output", "source.url=u", "--output", "source.revision=r", "--step", "image"}, nil, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Contains(t, out.String(), "# step [image] ClusterImageTemplate/img\n---\n")
	require.Contains(t, out.String(), "image: pinned.example/app:r")
	require.NotContains(t, out.String(), "app-src")

	out.Reset()
	code = Main([]string{"render", "-f", dir, "-o", "json"}, nil, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	var res RenderResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.Len(t, res.Steps, 3)

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
