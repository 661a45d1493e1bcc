package e2ereal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Seed 004 on a real Deployment: a new image that crash-loops makes the
// deployment controller report ProgressDeadlineExceeded; Kontinue then
// stamps a shadow Deployment from the last good inputs, which the
// deployment controller rolls out and which serves (its Pods Ready on the
// last good image). A good image again: the primary rolls out and the
// shadow goes. Once with observedCompletion and the Recreate strategy (the
// failing primary serves nothing at all), once with a healthRule and
// shadow: true and a rolling update.
//
// Success is judged on replica counts, not on the Progressing condition:
// the deployment controller's first status for a new generation can carry
// the previous rollout's condition (TestDeploymentStatusLagsOnRecreate).
func TestRealShadowDeployment(t *testing.T) {
	t.Run("observedCompletion, Recreate", func(t *testing.T) {
		testShadowDeployment(t, "{type: Recreate}", `
  observedCompletion:
    succeeded:
    - {key: status.updatedReplicas, value: 2}
    - {key: status.replicas, value: 2}
    - {key: status.availableReplicas, value: 2}
    failed:
    - {key: 'status.conditions[?(@.type=="Progressing")].reason', value: ProgressDeadlineExceeded}
    - {key: status.updatedReplicas, value: 2}
  # The deployment controller may never time a Recreate rollout out: when
  # its Progressing condition still shows the previous rollout's
  # NewReplicaSetAvailable (TestDeploymentStatusLagsOnRecreate) and its
  # crash-looping Pods change nothing it counts, it does not judge the
  # rollout again (seen in CI: no Deployment update for 60 s). Kontinue's
  # own deadline fails the input set then.
  progressDeadline: 20s`)
	})
	t.Run("healthRule with shadow: true, RollingUpdate", func(t *testing.T) {
		testShadowDeployment(t, "{type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}", `
  shadow: true
  healthRule:
    multiMatch:
      healthy:
        matchFields:
        - {key: status.updatedReplicas, operator: In, values: [2]}
        - {key: status.replicas, operator: In, values: [2]}
        - {key: status.availableReplicas, operator: In, values: [2]}
      unhealthy:
        matchFields:
        - key: 'status.conditions[?(@.type=="Progressing")].reason'
          operator: In
          values: [ProgressDeadlineExceeded]
          messagePath: 'status.conditions[?(@.type=="Progressing")].message'`)
	})
}

func testShadowDeployment(t *testing.T, strategy, rule string) {
	ns := newNamespace(t)
	chain, run := uniq(ns, "chain"), uniq(ns, "run")
	apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[2]s}
spec:%[3]s
  goTemplate: |
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: {{ .workload.metadata.name }}}
    spec:
      replicas: 2
      progressDeadlineSeconds: 5
      strategy: %[4]s
      selector: {matchLabels: {app: {{ .workload.metadata.name }}}}
      template:
        metadata: {labels: {app: {{ .workload.metadata.name }}}}
        spec:
          containers:
          - name: app
            image: {{ .params.image | quote }}
            # Played: the images that crash.
            env: [{name: KWOK_EXIT_CODE, value: "{{ if contains "crashes" .params.image }}1{{ else }}0{{ end }}"}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: run
    templateRef: {kind: ClusterTemplate, name: %[2]s}
`, chain, run, rule, strategy))
	workload := func(img string) {
		apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: web
  labels: {app.example.com/chain: %s}
spec:
  params: [{name: image, value: %s}]
`, chain, img))
	}
	const timeout = 60 * time.Second
	rolledOut := func(name, img string) func(map[string]any) string {
		return func(m map[string]any) string {
			if fmt.Sprint(nested(m, "status", "observedGeneration")) != fmt.Sprint(nested(m, "metadata", "generation")) ||
				fmt.Sprint(nested(m, "status", "updatedReplicas")) != "2" || fmt.Sprint(nested(m, "status", "replicas")) != "2" ||
				fmt.Sprint(nested(m, "status", "availableReplicas")) != "2" {
				return "not rolled out"
			}
			cs := nested(m, "spec", "template", "spec", "containers").([]any)
			if got := cs[0].(map[string]any)["image"]; got != img {
				return fmt.Sprintf("image %v, want %s", got, img)
			}
			return ""
		}
	}
	readyPods := func(deployment string) []string { return readyImages(t, ns, deployment) }

	workload("registry.example.com/web:v1")
	waitFor(t, deploymentGVR, ns, "web", timeout, rolledOut("web", "registry.example.com/web:v1"))
	waitOwner(t, workloadGVR, ns, "web", "Ready", "True", "Ready", timeout)

	// The new image crash-loops: the deployment controller gives up, the
	// step fails with its reason, and the shadow serves v1.
	workload("registry.example.com/web:v2-crashes")
	w := waitStep(t, workloadGVR, ns, "web", "run", "Healthy", "False", "", timeout)
	t.Logf("step on failure: %v", step(w, "run")["conditions"])
	shadow := waitFor(t, deploymentGVR, ns, "web-last-good", timeout, rolledOut("web-last-good", "registry.example.com/web:v1"))
	assert.Equal(t, "true", shadow.GetLabels()["kontinue.dev/shadow"])
	primary := get(t, deploymentGVR, ns, "web")
	// Who timed the rollout out: the deployment controller (its reason, in
	// the step's message), or, when it never does, Kontinue's deadline.
	byController := condition(primary.Object, "Progressing")["reason"] == "ProgressDeadlineExceeded"
	healthy := stepCondition(w, "run", "Healthy")
	t.Logf("timed out by the deployment controller: %v; step Healthy: %v", byController, healthy)
	if !byController {
		assert.Equal(t, "ProgressDeadlineExceeded", healthy["reason"], "Kontinue's own deadline, when the deployment controller gives no verdict")
		assert.NotContains(t, rule, "healthRule", "only the Recreate case sets Kontinue's deadline")
	}
	// The primary's own Ready Pods: none with Recreate, the old ones with a
	// rolling update (maxUnavailable 0).
	primaryPods := "[]"
	if strings.Contains(strategy, "RollingUpdate") {
		primaryPods = "[registry.example.com/web:v1 registry.example.com/web:v1]"
	}
	eventually(t, timeout, func() string {
		if got := readyPods("web-last-good"); fmt.Sprint(got) != "[registry.example.com/web:v1 registry.example.com/web:v1]" {
			return fmt.Sprintf("Ready Pods of the shadow: %v", got)
		}
		if got := readyPods("web"); fmt.Sprint(got) != primaryPods {
			return fmt.Sprintf("Ready Pods of the primary: %v, want %s", got, primaryPods)
		}
		return ""
	})
	w = get(t, workloadGVR, ns, "web")
	assert.Equal(t, "False", fmt.Sprint(condition(w.Object, "Ready")["status"]))
	require.NotNil(t, step(w, "run")["shadowRef"], "the step names its shadow: %v", step(w, "run"))
	if byController {
		assert.Contains(t, fmt.Sprint(stepCondition(w, "run", "Healthy")["message"]), "ProgressDeadlineExceeded", "the deployment controller's reason")
	}

	// A good image: the primary rolls out, the shadow goes.
	workload("registry.example.com/web:v3")
	waitFor(t, deploymentGVR, ns, "web", timeout, rolledOut("web", "registry.example.com/web:v3"))
	waitOwner(t, workloadGVR, ns, "web", "Ready", "True", "Ready", timeout)
	eventually(t, timeout, func() string {
		if !gone(deploymentGVR, ns, "web-last-good") {
			return "the shadow still exists"
		}
		// Its ReplicaSet and Pods go with it (garbage collection).
		var images []string
		for _, p := range list(t, podGVR, ns, "app=web") {
			images = append(images, fmt.Sprint(nested(p.Object, "spec", "containers").([]any)[0].(map[string]any)["image"]))
		}
		if fmt.Sprint(images) != "[registry.example.com/web:v3 registry.example.com/web:v3]" {
			return fmt.Sprintf("Pods left: %v", images)
		}
		return ""
	})
	assert.Nil(t, step(get(t, workloadGVR, ns, "web"), "run")["shadowRef"])
}

// Issue 45.3 on a real Deployment: the last good input set succeeds while
// a newer one is held (the primary is paused by the test while it works on
// v1, and v2-crashes waits), so its success is recorded as the newer set
// goes in. The primary then fails on v2-crashes and its shadow is stamped
// from v1 as rendered: not from the primary's live object, whose
// deployment.kubernetes.io/revision (2: the primary's second rollout) the
// deployment controller sets back to the shadow's own (1) after each
// write. Once both have settled (the shadow serves v1, the primary has
// failed) neither is written in the next 60 s: their generations (which
// every spec or annotation write moves) stay, and no fight was found. The
// bound a fight would meet is stamp.FightRepairs repairs of one content
// per stamp.FightWindow; a shadow from the rendered object meets none.
func TestRealShadowDeploymentDoesNotFight(t *testing.T) {
	ns := newNamespace(t)
	chain, run := uniq(ns, "chain"), uniq(ns, "run")
	apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[2]s}
spec:
  observedCompletion:
    succeeded:
    - {key: status.updatedReplicas, value: 2}
    - {key: status.replicas, value: 2}
    - {key: status.availableReplicas, value: 2}
    failed:
      key: 'status.conditions[?(@.type=="Progressing")].reason'
      value: ProgressDeadlineExceeded
  goTemplate: |
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: {{ .workload.metadata.name }}}
    spec:
      replicas: 2
      progressDeadlineSeconds: 5
      strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
      selector: {matchLabels: {app: {{ .workload.metadata.name }}}}
      template:
        metadata: {labels: {app: {{ .workload.metadata.name }}}}
        spec:
          containers:
          - name: app
            image: {{ .params.image | quote }}
            env: [{name: KWOK_EXIT_CODE, value: "{{ if contains "crashes" .params.image }}1{{ else }}0{{ end }}"}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: run
    templateRef: {kind: ClusterTemplate, name: %[2]s}
`, chain, run))
	workload := func(img string) {
		apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: web
  labels: {app.example.com/chain: %s}
spec:
  params: [{name: image, value: %s}]
`, chain, img))
	}
	const timeout = 60 * time.Second
	imageOf := func(m map[string]any) string {
		return fmt.Sprint(nested(m, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["image"])
	}
	rolledOut := func(img string) func(map[string]any) string {
		return func(m map[string]any) string {
			if fmt.Sprint(nested(m, "status", "observedGeneration")) != fmt.Sprint(nested(m, "metadata", "generation")) ||
				fmt.Sprint(nested(m, "status", "updatedReplicas")) != "2" || fmt.Sprint(nested(m, "status", "replicas")) != "2" ||
				fmt.Sprint(nested(m, "status", "availableReplicas")) != "2" {
				return "not rolled out"
			}
			if got := imageOf(m); got != img {
				return fmt.Sprintf("image %v, want %s", got, img)
			}
			return ""
		}
	}
	pause := func(paused bool) {
		t.Helper()
		_, err := env.dyn.Resource(deploymentGVR).Namespace(ns).Patch(context.Background(), "web", types.MergePatchType,
			[]byte(fmt.Sprintf(`{"spec":{"paused":%v}}`, paused)), metav1.PatchOptions{FieldManager: "e2e-pauser"})
		require.NoError(t, err)
	}
	var fightsBefore float64
	eventually(t, timeout, func() string { // Kontinue's metrics answer once it runs
		var err error
		if fightsBefore, err = env.kontinue.counter("kontinue_stamped_object_fights_total"); err != nil {
			return err.Error()
		}
		return ""
	})

	workload("registry.example.com/web:v0")
	waitFor(t, deploymentGVR, ns, "web", timeout, rolledOut("registry.example.com/web:v0"))
	waitOwner(t, workloadGVR, ns, "web", "Ready", "True", "Ready", timeout)

	// v1 goes in and waits for the test; v2-crashes is held meanwhile.
	pause(true)
	workload("registry.example.com/web:v1")
	waitFor(t, deploymentGVR, ns, "web", timeout, func(m map[string]any) string {
		if got := imageOf(m); got != "registry.example.com/web:v1" {
			return "image " + got
		}
		return ""
	})
	workload("registry.example.com/web:v2-crashes")
	waitStep(t, workloadGVR, ns, "web", "run", "ResourceSubmitted", "Unknown", "InputsHeld", timeout)

	// v1 rolls out (recorded as it goes), v2-crashes fails, the shadow
	// serves v1.
	pause(false)
	waitStep(t, workloadGVR, ns, "web", "run", "Healthy", "False", "", 2*timeout)
	shadow := waitFor(t, deploymentGVR, ns, "web-last-good", timeout, rolledOut("registry.example.com/web:v1"))
	assert.Equal(t, "true", shadow.GetLabels()["kontinue.dev/shadow"])
	eventually(t, timeout, func() string {
		if got := readyImages(t, ns, "web-last-good"); fmt.Sprint(got) != "[registry.example.com/web:v1 registry.example.com/web:v1]" {
			return fmt.Sprintf("Ready Pods of the shadow: %v", got)
		}
		if c := condition(get(t, deploymentGVR, ns, "web").Object, "Progressing"); c["reason"] != "ProgressDeadlineExceeded" {
			return fmt.Sprintf("the primary's Progressing: %v", c)
		}
		return ""
	})

	// Settled: 60 s without a write of either.
	start := map[string]int64{}
	for _, name := range []string{"web", "web-last-good"} {
		start[name] = get(t, deploymentGVR, ns, name).GetGeneration()
	}
	deadline, moved := time.Now().Add(60*time.Second), map[string]bool{}
	for time.Now().Before(deadline) {
		for _, name := range []string{"web", "web-last-good"} {
			if g := get(t, deploymentGVR, ns, name).GetGeneration(); g != start[name] && !moved[name] {
				moved[name] = true
				t.Logf("%s: generation %d at %s, %d when settled", name, g, time.Now().Format(time.StampMilli), start[name])
			}
		}
		time.Sleep(time.Second)
	}
	for _, name := range []string{"web", "web-last-good"} {
		u := get(t, deploymentGVR, ns, name)
		assert.Equal(t, start[name], u.GetGeneration(), "%s written in the 60 s after it settled (annotations %v)", name, u.GetAnnotations())
	}
	fightsAfter, err := env.kontinue.counter("kontinue_stamped_object_fights_total")
	require.NoError(t, err)
	assert.Equal(t, fightsBefore, fightsAfter, "no fight found: the shadow is the rendered object")
	w := get(t, workloadGVR, ns, "web")
	require.NotNil(t, step(w, "run")["shadowRef"], "the step names its shadow: %v", step(w, "run"))
	assert.Contains(t, fmt.Sprint(stepCondition(w, "run", "Healthy")["message"]), "outputs served by shadow", "the shadow serves")
}

// readyImages lists the images of the Ready Pods a Deployment's
// ReplicaSets own.
func readyImages(t *testing.T, ns, deployment string) []string {
	var out []string
	for _, p := range list(t, podGVR, ns, "app=web") {
		if condition(p.Object, "Ready")["status"] != "True" {
			continue
		}
		owners := p.GetOwnerReferences()
		if len(owners) == 0 {
			continue
		}
		rs, err := tryGet(schemaRS, ns, owners[0].Name)
		if err != nil || len(rs.GetOwnerReferences()) == 0 || rs.GetOwnerReferences()[0].Name != deployment {
			continue
		}
		out = append(out, fmt.Sprint(nested(p.Object, "spec", "containers").([]any)[0].(map[string]any)["image"]))
	}
	return out
}
