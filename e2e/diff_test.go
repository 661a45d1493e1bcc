package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/cli"
)

// TestCLIDiffGroups: `kontinue diff -f new-template.yaml` over 51 Workloads
// renders each one's steps with the new template through the controller's
// prepare, compares with the live ConfigMaps, groups the owners by identical
// changes (48 with the default mode, 2 with their own; the step after the
// edited one changes too), names the owner whose render fails and why,
// leaves owners on another chain alone, and only reads.
func TestCLIDiffGroups(t *testing.T) {
	k := newKit(t)
	chain, other := k.name("chain"), k.name("other")
	cfg, deploy, solo := k.name("config"), k.name("deploy"), k.name("solo")
	configTemplate := func(data string) string {
		return k.templateYAML("ClusterConfigTemplate", cfg, `
  configPath: .data
  params: [{name: mode, default: std}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-config}
    data: `+data)
	}
	k.apply(configTemplate(`{image: "reg/$(workload.metadata.name)$:v1"}`))
	k.apply(k.cmTemplate(deploy, "deploy", `{image: $(config.image)$}`))
	k.apply(k.cmTemplate(solo, "solo", `{a: b}`))
	k.apply(k.chainYAML(chain, "", k.step("config", "ClusterConfigTemplate", cfg, "")+
		k.step("deploy", "ClusterTemplate", deploy, "configs: [{name: config, resource: config}]")))
	k.apply(k.chainYAML(other, "", k.step("solo", "ClusterTemplate", solo, "")))

	workload := func(name, chain, annotations, params string) string {
		return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: {app.example.com/chain: %s}
  annotations: {%s}
spec: {params: [%s]}
`, name, chain, annotations, params)
	}
	var all []string
	for i := 0; i < 50; i++ {
		params := ""
		if i >= 48 {
			params = "{name: mode, value: debug}"
		}
		name := fmt.Sprintf("app-%02d", i)
		all = append(all, name)
		k.apply(workload(name, chain, "team: core", params))
	}
	k.apply(workload("app-bad", chain, "", "")) // no team annotation: the new template cannot render
	k.apply(workload("solo", other, "team: core", ""))
	for _, n := range append(all, "app-bad", "solo") {
		k.waitOwner(n, "Ready", "True", "Ready")
	}
	require.Equal(t, "reg/app-07:v1", nested(get(t, configMapGVR, k.ns, "app-07-deploy").Object, "data", "image"))

	// The new template: another tag, a mode, the owner's team.
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte(configTemplate(`{image: "reg/$(workload.metadata.name)$:v2", mode: $(params.mode)$, team: $(workload.metadata.annotations.team)$}`)), 0o600))
	before := k.objects(k.ns)

	start := time.Now()
	code, out, errOut, reqs := kontinueCLICounting(t, "diff", "-f", file, "-n", k.ns, "-o", "json")
	t.Logf("kontinue diff over 51 Workloads: %s, requests %v", time.Since(start).Round(time.Millisecond), reqs)
	require.Equal(t, 1, code, "an owner cannot be previewed: %s", errOut)
	require.Contains(t, errOut, "1 owner(s) cannot be previewed")
	for r, n := range reqs {
		require.True(t, strings.HasPrefix(r, "GET "), "diff only reads: %s", r)
		require.Equal(t, 1, n, "one LIST of each, whatever the number of owners: %s", r)
	}
	require.Len(t, reqs, 10, "chains (2 kinds), templates (5 kinds), owners (2 kinds), the stamped ConfigMaps: %v", reqs)
	var res cli.DiffResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 51, res.Reached, "the owners of the chain using the template; not solo")
	require.Len(t, res.Groups, 2, "%+v", res.Groups)
	g := res.Groups[0]
	require.Len(t, g.Owners, 48)
	require.Equal(t, "app-00", g.Owners[0].Name)
	require.Equal(t, "step [config] ConfigMap: data.image: reg/<name>:v1 → reg/<name>:v2, data.mode added: std, data.team added: core; step [deploy] ConfigMap: data.image: reg/<name>:v1 → reg/<name>:v2", g.Summary)
	require.Len(t, g.Objects, 2)
	require.Equal(t, "app-00-config", g.Objects[0].Name)
	require.Contains(t, g.Objects[0].Diff, "-  image: reg/app-00:v1\n+  image: reg/app-00:v2\n+  mode: std\n+  team: core\n")
	require.Equal(t, "app-00-deploy", g.Objects[1].Name)
	require.Contains(t, g.Objects[1].Diff, "-  image: reg/app-00:v1\n+  image: reg/app-00:v2\n")
	require.NotContains(t, g.Objects[0].Diff, "resourceVersion", "only the fields Kontinue applies")
	require.NotContains(t, g.Objects[0].Diff, "applied-digest")
	g = res.Groups[1]
	require.Equal(t, []string{"app-48", "app-49"}, []string{g.Owners[0].Name, g.Owners[1].Name})
	require.Len(t, g.Owners, 2)
	require.Contains(t, g.Objects[0].Diff, "+  mode: debug\n")
	require.Len(t, res.Failures, 1)
	f := res.Failures[0]
	require.Equal(t, "app-bad", f.Name)
	require.Len(t, f.Failures, 1)
	require.Equal(t, "config", f.Failures[0].Step)
	require.Equal(t, "TemplateStampFailure", f.Failures[0].Reason)
	require.Contains(t, f.Failures[0].Message, "annotations.team")

	// The text: a line per group, owners named, the first owner's diff.
	code, out, _ = kontinueCLI(t, "diff", "-f", file, "-n", k.ns, "--owners", "3")
	require.Equal(t, 1, code)
	t.Logf("kontinue diff:\n%s", out)
	require.Contains(t, out, "# ClusterConfigTemplate "+cfg+" reaches 51 Workloads\n")
	require.Contains(t, out, "\n# 48 Workloads: step [config] ConfigMap: data.image: reg/<name>:v1 → reg/<name>:v2, data.mode added: std, data.team added: core; step [deploy] ConfigMap: data.image: reg/<name>:v1 → reg/<name>:v2\n#   "+k.ns+"/app-00, "+k.ns+"/app-01, "+k.ns+"/app-02, ... and 45 more\n--- live ConfigMap "+k.ns+"/app-00-config (step config)\n")
	require.Contains(t, out, "\n# 2 Workloads: step [config] ConfigMap: data.image: reg/<name>:v1 → reg/<name>:v2, data.mode added: debug, data.team added: core; step [deploy] ")
	require.Contains(t, out, "\n# 1 Workload cannot be previewed:\n#   Workload "+k.ns+"/app-bad step [config]: TemplateStampFailure: ")

	// A chain edit reaches every owner of the chain; the template as it is
	// changes nothing.
	chainFile := filepath.Join(dir, "chain.yaml")
	require.NoError(t, os.WriteFile(chainFile, []byte(k.chainYAML(chain, "\n  params: [{name: mode, value: chained}]", k.step("config", "ClusterConfigTemplate", cfg, "")+
		k.step("deploy", "ClusterTemplate", deploy, "configs: [{name: config, resource: config}]"))), 0o600))
	code, out, errOut = kontinueCLI(t, "diff", "-f", chainFile, "-n", k.ns, "-o", "json")
	require.Equal(t, 0, code, errOut)
	res = cli.DiffResult{}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 51, res.Reached)
	require.Len(t, res.Groups, 1, "the template does not read the mode yet: %+v", res.Groups)
	require.Equal(t, "no change", res.Groups[0].Summary)

	require.Equal(t, before, k.objects(k.ns), "diff wrote nothing")
	cm := get(t, configMapGVR, k.ns, "app-07-config")
	require.Equal(t, "reg/app-07:v1", nested(cm.Object, "data", "image"))
}

// TestCLIDiffRunnable: a step of a runnable: true template is previewed as
// what the controller generates for it (the ClusterRunTemplate and
// Runnable, prepare.Runnable), compared with the live generated objects;
// owners group although each one's ClusterRunTemplate has its own hashed
// name; the output says the runs are not previewed; diff writes nothing.
func TestCLIDiffRunnable(t *testing.T) {
	k := newRunKit(t)
	chain, lint, deploy := uniq(k.ns, "chain"), uniq(k.ns, "lint"), uniq(k.ns, "deploy")
	all := k.runnableTrueChain(chain, lint, deploy)
	apply(t, k.ns, all)
	owners := []string{"app-a", "app-b", "app-c"}
	for _, n := range owners {
		k.setCommit(n, chain, "c1")
	}
	for _, n := range owners {
		runs := k.waitRevisions(n+"-linter", "c1")
		k.finish(runs[0].GetName(), "True", nil)
	}
	for _, n := range owners {
		waitOwner(t, workloadGVR, k.ns, n, "Ready", "True", "Ready")
	}
	generated := func() map[string]string {
		out := map[string]string{}
		for _, n := range owners {
			out["crt/"+n] = get(t, immRunTemplateGVR, "", generatedName("Workload", k.ns, n, "lint")).GetResourceVersion()
			out["rn/"+n] = get(t, immRunnableGVR, k.ns, n+"-linter").GetResourceVersion()
		}
		return out
	}
	before := generated()

	// The new lint template: another pipeline.
	lintYAML := strings.SplitN(all, "---", 2)[0]
	require.Contains(t, lintYAML, "kind: ClusterSourceTemplate")
	file := filepath.Join(t.TempDir(), "lint.yaml")
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(lintYAML, "{name: linter-pipeline}", "{name: linter-pipeline-v2}", 1)), 0o600))

	code, out, errOut := kontinueCLI(t, "diff", "-f", file, "-n", k.ns, "-o", "json")
	require.Equal(t, 0, code, "every owner previewed: %s %s", out, errOut)
	var res cli.DiffResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 3, res.Reached)
	require.Empty(t, res.Failures)
	require.Len(t, res.Groups, 1, "the generated names differ per owner, the change does not: %+v", res.Groups)
	g := res.Groups[0]
	require.Len(t, g.Owners, 3)
	require.Equal(t, "step [lint] ClusterRunTemplate: spec.template.spec.pipelineRef.name: linter-pipeline → linter-pipeline-v2", g.Summary,
		"the Runnable's inputs and the deploy step do not change")
	require.Len(t, g.Objects, 1)
	o := g.Objects[0]
	require.Equal(t, "ClusterRunTemplate", o.Kind)
	require.Equal(t, generatedName("Workload", k.ns, "app-a", "lint"), o.Name)
	require.Contains(t, o.Diff, "-        name: linter-pipeline\n+        name: linter-pipeline-v2\n")
	require.NotContains(t, o.Diff, "kontinue.dev/claim", "only what Kontinue applies")
	require.Equal(t, cli.RunsNotPreviewed, o.Note)

	code, out, _ = kontinueCLI(t, "diff", "-f", file, "-n", k.ns)
	require.Equal(t, 0, code)
	t.Logf("kontinue diff:\n%s", out)
	require.Contains(t, out, "\n# 3 Workloads: step [lint] ClusterRunTemplate: spec.template.spec.pipelineRef.name: linter-pipeline → linter-pipeline-v2\n")
	require.Contains(t, out, "\n# step [lint]: its runs are not previewed: ")
	require.NotContains(t, out, "NotPreviewed")
	require.Equal(t, before, generated(), "diff wrote nothing")
}
