package e2e

// A ClusterRunTemplate written in ytt (Cartographer #214, a Kontinue
// extension): the Runnable stamps its runs from data.values.runnable and
// data.values.selected as it does from $(...)$ tags.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// yttRunTemplate is a ClusterRunTemplate whose ytt body follows the load.
func yttRunTemplate(name, body string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata: {name: %s}
spec:
  outputs:
    revision: spec.params[?(@.name=="revision")].value
  ytt: |
    #@ load("@ytt:data", "data")
%s`, name, body)
}

func TestRunnableYttRunTemplate(t *testing.T) {
	parent := newRunKit(t)

	t.Run("runs from the inputs and the selected object", func(t *testing.T) {
		k := parent.with(t)
		tmpl := uniq(k.ns, "ytt-run")
		apply(t, k.ns, yttRunTemplate(tmpl, `    #@ inputs = data.values.runnable.spec.inputs
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata:
      generateName: #@ data.values.runnable.metadata.name + "-ytt-"
      labels:
        e2e/team: #@ inputs.team
    spec:
      pipelineRef:
        name: #@ data.values.selected.spec.pipeline if data.values.selected else "no-selector"
      params:
      - name: revision
        value: #@ inputs.revision
      - name: upper
        value: #@ inputs.revision.upper()
`))
		apply(t, k.ns, `
apiVersion: test.run/v1alpha1
kind: Test
metadata: {name: pipeline-y, labels: {e2e/pipeline: ytt}}
spec: {pipeline: ytt-pipeline}`)
		sel := `  selector:
    resource: {apiVersion: test.run/v1alpha1, kind: Test}
    matchingLabels: {e2e/pipeline: ytt}
`
		apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Runnable
metadata: {name: yr}
spec:
  runTemplateRef: {name: %s}
  inputs: {revision: r1, team: blue}
%s`, tmpl, sel))
		runs := k.waitRevisions("yr", "r1")
		run := runs[0]
		assert.True(t, strings.HasPrefix(run.GetName(), "yr-ytt-"), "generateName from the ytt template: %s", run.GetName())
		l := run.GetLabels()
		assert.Equal(t, "blue", l["e2e/team"], "a label from the inputs")
		assert.Equal(t, "yr", l["carto.run/runnable-name"])
		assert.Equal(t, tmpl, l["carto.run/run-template-name"])
		assert.Equal(t, "true", l["kontinue.dev/stamped"])
		require.Len(t, run.GetOwnerReferences(), 1)
		assert.Equal(t, "Runnable", run.GetOwnerReferences()[0].Kind)
		assert.Equal(t, "ytt-pipeline", nested(run.Object, "spec", "pipelineRef", "name"), "data.values.selected")
		params, _ := nested(run.Object, "spec", "params").([]any)
		require.Len(t, params, 2)
		assert.Equal(t, "R1", params[1].(map[string]any)["value"], "Starlark ran on the inputs")

		// New inputs, a new run; success gives the outputs.
		apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Runnable
metadata: {name: yr}
spec:
  runTemplateRef: {name: %s}
  inputs: {revision: r2, team: blue}
%s`, tmpl, sel))
		runs = k.waitRevisions("yr", "r2", "r1")
		k.finish(runs[0].GetName(), "True", nil)
		r := k.waitRunnable("yr", "Ready", "True", "Ready")
		assert.Equal(t, map[string]any{"revision": "r2"}, nested(r.Object, "status", "outputs"))
		assert.Equal(t, "True", condition(r.Object, "RunTemplateReady", "status")["status"])
	})

	t.Run("a ytt error is the Runnable's condition", func(t *testing.T) {
		k := parent.with(t)
		tmpl := uniq(k.ns, "ytt-bad")
		apply(t, k.ns, yttRunTemplate(tmpl, `    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata:
      generateName: #@ data.values.runnable.metadata.name + "-"
    spec:
      params:
      - name: revision
        value: #@ data.values.runnable.spec.inputs.nope
`))
		k.runnable("bad", tmpl, "r1", "")
		r := k.waitRunnable("bad", "RunTemplateReady", "False", "TemplateStampFailure")
		msg := fmt.Sprint(condition(r.Object, "RunTemplateReady", "status")["message"])
		assert.Contains(t, msg, "unable to apply ytt template: ytt: Error:")
		assert.Contains(t, msg, "nope")
		assert.Contains(t, msg, "ClusterRunTemplate ["+tmpl+"]")
		assert.Equal(t, "TemplateStampFailure", condition(r.Object, "Ready", "status")["reason"])
		assert.Empty(t, k.runs("bad"))
	})

	t.Run("two objects are refused", func(t *testing.T) {
		k := parent.with(t)
		tmpl := uniq(k.ns, "ytt-two")
		apply(t, k.ns, yttRunTemplate(tmpl, `    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: {generateName: one-}
    spec:
      params:
      - name: revision
        value: #@ data.values.runnable.spec.inputs.revision
    ---
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: {generateName: two-}
`))
		k.runnable("two", tmpl, "r1", "")
		r := k.waitRunnable("two", "RunTemplateReady", "False", "TemplateStampFailure")
		assert.Contains(t, condition(r.Object, "RunTemplateReady", "status")["message"], "the template rendered 2 objects, want 1")
		assert.Empty(t, k.runs("two"))
	})

	t.Run("the API refuses both template and ytt", func(t *testing.T) {
		err := applyErr(t, "", `
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata: {name: both-engines}
spec:
  template: {apiVersion: v1, kind: ConfigMap, metadata: {generateName: x-}}
  ytt: "kind: ConfigMap"`)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "set exactly one of template or ytt")
	})
}
