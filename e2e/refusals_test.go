package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/cli"
)

// TestCLIRefusesWhatTheControllerRefuses: templates the API server takes
// but the controller refuses once it has rendered them (the lifecycle's
// Strategy.Check: a run per input set is one object; runnable: true needs
// spec.template and one object) are refused by `kontinue render` and
// `kontinue diff` with the controller's very reason and message: the three
// share one front half (prepare.Step).
func TestCLIRefusesWhatTheControllerRefuses(t *testing.T) {
	k := newKit(t)
	two := `
    ---
    {apiVersion: v1, kind: ConfigMap, metadata: {name: "{{ .workload.metadata.name }}-a"}, data: {a: "1"}}
    ---
    {apiVersion: v1, kind: ConfigMap, metadata: {name: "{{ .workload.metadata.name }}-b"}, data: {b: "2"}}`
	cases := []struct{ name, kind, body string }{
		{"immutable", "ClusterTemplate", "\n  lifecycle: immutable\n  goTemplate: |" + two},
		{"tekton", "ClusterTemplate", "\n  lifecycle: tekton\n  goTemplate: |" + two},
		{"runnable-gotemplate", "ClusterConfigTemplate", `
  configPath: .data
  runnable: true
  healthRule: {alwaysHealthy: {}}
  goTemplate: |
    {apiVersion: v1, kind: ConfigMap, metadata: {name: "{{ .workload.metadata.name }}-run"}, data: {a: "1"}}`},
	}
	dir := t.TempDir()
	for _, c := range cases {
		tmpl, chain := k.name(c.name), k.name(c.name+"-chain")
		tmplYAML := k.templateYAML(c.kind, tmpl, c.body)
		all := tmplYAML + "\n---\n" + k.chainYAML(chain, "", k.step("only", c.kind, tmpl, "")) + "\n---\n" + workloadYAML(k.ns, c.name, chain, "")
		k.apply(all)
		require.NoError(t, os.WriteFile(filepath.Join(dir, c.name+".yaml"), []byte(all), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, c.name+"-template.yaml"), []byte(tmplYAML), 0o600))
	}
	for _, c := range cases {
		func() {
			t.Logf("template %s", c.name)
			// The controller.
			u := k.waitStep(c.name, "only", "ResourceSubmitted", "False", "")
			got := k.stepCond(u, "only", "ResourceSubmitted")
			reason, msg := got["reason"].(string), got["message"].(string)
			require.Equal(t, "TemplateStampFailure", reason, msg)

			// kontinue render, offline, on the same files.
			code, out, errOut := kontinueCLI(t, "render", "-f", filepath.Join(dir, c.name+".yaml"), "-n", k.ns)
			require.Equal(t, 1, code, "a step cannot be stamped: %s%s", out, errOut)
			require.Contains(t, out, ": "+reason+": "+msg+"\n")
			_, out, _ = kontinueCLI(t, "render", "-f", filepath.Join(dir, c.name+".yaml"), "-n", k.ns, "-o", "json")
			var rr cli.RenderResult
			require.NoError(t, json.Unmarshal([]byte(out), &rr))
			require.Len(t, rr.Steps, 1)
			require.Equal(t, reason, rr.Steps[0].Reason, "render: %+v", rr.Steps[0])
			require.Equal(t, msg, rr.Steps[0].Error)
			require.Empty(t, rr.Steps[0].Objects)

			// kontinue diff of the template, as it is, against the cluster.
			code, out, errOut = kontinueCLI(t, "diff", "-f", filepath.Join(dir, c.name+"-template.yaml"), "-n", k.ns, "-o", "json")
			require.Equal(t, 1, code, "an owner cannot be previewed: %s%s", out, errOut)
			var dr cli.DiffResult
			require.NoError(t, json.Unmarshal([]byte(out), &dr))
			require.Len(t, dr.Failures, 1, "%+v", dr)
			require.Equal(t, c.name, dr.Failures[0].Name)
			require.Len(t, dr.Failures[0].Failures, 1)
			f := dr.Failures[0].Failures[0]
			require.Equal(t, "only", f.Step)
			require.Equal(t, reason, f.Reason)
			require.Equal(t, msg, f.Message)
		}()
	}
}

// TestCLIDiffComparesARunWithTheNewest: a step of lifecycle immutable or
// tekton creates a run per input set, named by the API server; `kontinue
// diff` compares what it would create with the newest run (the lifecycle
// says it makes runs), so a template as it is changes nothing. (Diff once
// knew only the name immutable: a tekton step showed its run as added.)
func TestCLIDiffComparesARunWithTheNewest(t *testing.T) {
	k := newKit(t)
	dir := t.TempDir()
	for _, lifecycle := range []string{"immutable", "tekton"} {
		tmpl, chain := k.name(lifecycle), k.name(lifecycle+"-chain")
		tmplYAML := k.templateYAML("ClusterTemplate", tmpl, `
  lifecycle: `+lifecycle+`
  healthRule: {alwaysHealthy: {}}
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {generateName: $(workload.metadata.name)$-run-}
    data: {v: "1"}`)
		k.apply(tmplYAML)
		k.apply(k.chainYAML(chain, "", k.step("run", "ClusterTemplate", tmpl, "")))
		k.workload(lifecycle, chain, "")
		k.waitStep(lifecycle, "run", "ResourceSubmitted", "True", "")
		file := filepath.Join(dir, lifecycle+".yaml")
		require.NoError(t, os.WriteFile(file, []byte(tmplYAML), 0o600))

		code, out, errOut := kontinueCLI(t, "diff", "-f", file, "-n", k.ns, "-o", "json")
		require.Equal(t, 0, code, "%s: %s%s", lifecycle, out, errOut)
		var dr cli.DiffResult
		require.NoError(t, json.Unmarshal([]byte(out), &dr))
		require.Equal(t, 1, dr.Reached, lifecycle)
		require.Len(t, dr.Groups, 1, "%s: %+v", lifecycle, dr.Groups)
		require.Equal(t, "no change", dr.Groups[0].Summary, "%s: %+v", lifecycle, dr.Groups[0])
	}
}
