package view

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(j)) // integers stay int64, as from the API server
	return u
}

const workload = `
apiVersion: carto.run/v1alpha1
kind: Workload
metadata: {name: app, namespace: dev, generation: 3, annotations: {kontinue.dev/reconcile-requested-at: "2026-01-01T00:00:00Z"}}
status:
  observedGeneration: 2
  supplyChainRef: {kind: ClusterSupplyChain, name: web}
  conditions:
  - {type: SupplyChainReady, status: "True", reason: Ready}
  - {type: Ready, status: "Unknown", reason: MissingValueAtPath, message: "step [b] waits"}
  resources:
  - name: a
    templateRef: {apiVersion: carto.run/v1alpha1, kind: ClusterSourceTemplate, name: src}
    stampedRef: {apiVersion: v1, kind: ConfigMap, namespace: dev, name: app-a, resource: configmaps}
    outputs: [{name: url, preview: "https://x\n", digest: "sha256:aa", lastTransitionTime: "2026-01-01T00:00:00Z"}]
    heldInputDigest: sha256:new
    inputDigest: sha256:old
    shadowRef: {apiVersion: v1, kind: ConfigMap, namespace: dev, name: app-a-shadow}
    servedBy: shadow
    conditions:
    - {type: ResourceSubmitted, status: "True", reason: ResourceSubmissionComplete}
    - {type: Healthy, status: "False", reason: FailedConditionMet, message: boom}
    - {type: Ready, status: "False", reason: FailedConditionMet}
  - name: p
    inputs: [{name: a}]
    conditions:
    - {type: ResourceSubmitted, status: "True", reason: PassThrough, message: "input [source] passed through"}
    - {type: Ready, status: "True", reason: Ready}
  - name: r
    stampedRef: {apiVersion: carto.run/v1alpha1, kind: Runnable, namespace: dev, name: app-r}
    conditions:
    - {type: Ready, status: "True", reason: Ready}
`

const runnableYAML = `
apiVersion: carto.run/v1alpha1
kind: Runnable
metadata: {name: app-r, namespace: dev}
status:
  conditions:
  - {type: StampedObjectCondition, status: "True", reason: SucceededCondition}
  - {type: Ready, status: "True", reason: Ready}
  outputs: {url: "https://run"}
  latestRunRef: {apiVersion: tekton.dev/v1, kind: PipelineRun, namespace: dev, name: run-2}
  latestSuccessfulRunRef: {apiVersion: tekton.dev/v1, kind: PipelineRun, namespace: dev, name: run-1}
`

func TestBuild(t *testing.T) {
	v := Build(obj(t, workload), map[string]*unstructured.Unstructured{RunnableKey("dev", "app-r"): obj(t, runnableYAML)})
	require.Equal(t, APIVersion, v.APIVersion)
	require.Equal(t, "Workload", v.OwnerKind)
	require.Equal(t, &Ref{Kind: "ClusterSupplyChain", Name: "web"}, v.Chain)
	require.True(t, v.Stale)
	require.Equal(t, "MissingValueAtPath", v.Ready.Reason)
	require.Equal(t, "2026-01-01T00:00:00Z", v.ReconcileRequestedAt)
	require.Equal(t, "2/3", v.StepsReady())
	require.Len(t, v.Steps, 3)

	a := v.Steps[0]
	require.Equal(t, "ClusterSourceTemplate", a.Template.Kind)
	require.Equal(t, "ConfigMap dev/app-a", a.Stamped.String())
	require.Equal(t, HealthUnhealthy, a.Health)
	require.Equal(t, "boom", a.Healthy.Message)
	require.Equal(t, "sha256:new", a.HeldInputDigest)
	require.Equal(t, "shadow", a.ServedBy)
	require.Equal(t, "app-a-shadow", a.Shadow.Name)
	require.Equal(t, []Output{{Name: "url", Preview: "https://x\n", Digest: "sha256:aa", Since: "2026-01-01T00:00:00Z"}}, a.Outputs)

	p := v.Steps[1]
	require.True(t, p.PassThrough)
	require.Equal(t, HealthNone, p.Health)
	require.Equal(t, []string{"a"}, p.Inputs)

	r := v.Steps[2].Runnable
	require.NotNil(t, r)
	require.Equal(t, "run-2", r.LatestRun.Name)
	require.Equal(t, "run-1", r.LatestSuccessfulRun.Name)
	require.Equal(t, "True", r.LatestRunSucceeded)
	require.Equal(t, `"https://run"`, r.Outputs["url"])
}

func TestBuildWithoutStatus(t *testing.T) {
	v := Build(obj(t, `{apiVersion: carto.run/v1alpha1, kind: Deliverable, metadata: {name: d, namespace: n, generation: 1}}`), nil)
	require.Equal(t, "Unknown", v.Ready.Status)
	require.Nil(t, v.Chain)
	require.Empty(t, v.Steps)
	require.True(t, v.Stale)
}
