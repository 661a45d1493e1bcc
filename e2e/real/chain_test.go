package e2ereal

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// appChain is a supply chain and a delivery whose steps stamp objects real
// controllers own:
//
//	source   ConfigMap <wl>-source (the commit; a source poller played)
//	test     lifecycle: immutable, a Job per input set, judged by the
//	         Job's own Complete/Failed conditions (healthRule multiMatch)
//	build    runnable: true, a Tekton PipelineRun per input set through a
//	         generated Runnable; its image result is the output
//	lint     a hand-written Runnable and ClusterRunTemplate: a Tekton
//	         PipelineRun per input set; its report result is the output
//	config   ConfigMap <wl>-config: the image and the lint report
//	deliver  the Deliverable <wl>, carrying the image to the delivery
//
// and the delivery:
//
//	manifest ConfigMap <wl>-manifest (the image to deploy)
//	deploy   ClusterDeploymentTemplate: Deployment <wl>, complete when
//	         the deployment controller reports the rollout done
//	         (observedGeneration, every replica updated and available, no
//	         old one left) and failed when it reports
//	         ProgressDeadlineExceeded
//
// A commit's name says what its played programs do, so that the verdict
// travels with the commit through the chain: the tests of a commit named
// *fails-test* exit 1 (the Job's template), c3-fails-build does not compile
// (the build Pipeline's when expressions), and an image whose tag says
// *crashes* crash-loops, never Ready (the Deployment's template).
type appChain struct {
	ns                                                                   string
	chain, delivery, source, test, build, lint, lintRun, config, deliver string
	manifest, deploy                                                     string
}

func newAppChain(ns string) appChain {
	return appChain{
		ns: ns, chain: uniq(ns, "chain"), delivery: uniq(ns, "delivery"),
		source: uniq(ns, "source"), test: uniq(ns, "test"), build: uniq(ns, "build"),
		lint: uniq(ns, "lint"), lintRun: uniq(ns, "lint-run"), config: uniq(ns, "config"),
		deliver: uniq(ns, "deliver"), manifest: uniq(ns, "manifest"), deploy: uniq(ns, "deploy"),
	}
}

// yaml is the Tekton Pipelines, the templates, the chain and the delivery.
func (c appChain) yaml() string {
	return fmt.Sprintf(`
apiVersion: tekton.dev/v1
kind: Pipeline
metadata: {name: build}
spec:
  params: [{name: revision}]
  results: [{name: image, value: $(tasks.compile.results.image)}]
  tasks:
  - name: compile
    when: [{input: $(params.revision), operator: notin, values: [c3-fails-build]}]
    params: [{name: revision, value: $(params.revision)}]
    taskSpec:
      params: [{name: revision}]
      results: [{name: image}]
      steps:
      - name: compile
        image: registry.example.com/builder
        command: [make, image]
        env: [{name: KWOK_RESULTS, value: '{"image": "registry.example.com/app:$(params.revision)"}'}]
  # Played: the commit that does not compile.
  - name: compile-error
    when: [{input: $(params.revision), operator: in, values: [c3-fails-build]}]
    taskSpec:
      steps:
      - name: compile
        image: registry.example.com/builder
        command: [make, image]
        env: [{name: KWOK_EXIT_CODE, value: "1"}]
---
apiVersion: tekton.dev/v1
kind: Pipeline
metadata: {name: lint}
spec:
  params: [{name: revision}]
  results: [{name: report, value: $(tasks.lint.results.report)}]
  tasks:
  - name: lint
    params: [{name: revision, value: $(params.revision)}]
    taskSpec:
      params: [{name: revision}]
      results: [{name: report}]
      steps:
      - name: lint
        image: registry.example.com/linter
        command: [make, lint]
        env: [{name: KWOK_RESULTS, value: '{"report": "clean at $(params.revision)"}'}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[2]s}
spec:
  urlPath: data.url
  revisionPath: data.revision
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-source}
    data:
      url: $(workload.spec.source.git.url)$
      revision: $(workload.spec.source.git.ref.commit)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[3]s}
spec:
  lifecycle: immutable
  urlPath: metadata.annotations['app.example.com/url']
  revisionPath: metadata.annotations['app.example.com/revision']
  healthRule:
    multiMatch:
      healthy:
        matchConditions: [{type: Complete, status: "True"}]
      unhealthy:
        matchFields:
        - key: status.conditions[?(@.type=="Failed")].status
          operator: In
          values: ["True"]
          messagePath: status.conditions[?(@.type=="Failed")].message
  goTemplate: |
    apiVersion: batch/v1
    kind: Job
    metadata:
      generateName: {{ .workload.metadata.name }}-test-
      annotations:
        app.example.com/url: {{ .source.url | quote }}
        app.example.com/revision: {{ .source.revision | quote }}
    spec:
      backoffLimit: 0
      template:
        metadata:
          annotations: {kwok.kontinue.dev/run-for: 1s}
        spec:
          restartPolicy: Never
          containers:
          - name: test
            image: registry.example.com/tester
            command: [make, test]
            env:
            - {name: REVISION, value: {{ .source.revision | quote }}}
            # Played: the commits whose tests fail.
            - {name: KWOK_EXIT_CODE, value: "{{ if contains "fails-test" .source.revision }}1{{ else }}0{{ end }}"}
---
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: %[4]s}
spec:
  runnable: true
  healthRule: {singleConditionType: Succeeded}
  imagePath: status.results[?(@.name=="image")].value
  template:
    apiVersion: tekton.dev/v1
    kind: PipelineRun
    metadata: {name: $(workload.metadata.name)$-build}
    spec:
      pipelineRef: {name: build}
      params:
      - {name: revision, value: $(source.revision)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata: {name: %[6]s}
spec:
  outputs:
    report: status.results[?(@.name=="report")].value
  template:
    apiVersion: tekton.dev/v1
    kind: PipelineRun
    metadata: {generateName: $(runnable.metadata.name)$-}
    spec:
      pipelineRef: {name: lint}
      params:
      - {name: revision, value: $(runnable.spec.inputs.revision)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: %[5]s}
spec:
  configPath: status.outputs.report
  template:
    apiVersion: carto.run/v1alpha1
    kind: Runnable
    metadata: {name: $(workload.metadata.name)$-lint}
    spec:
      runTemplateRef: {name: %[6]s}
      serviceAccountName: default
      inputs:
        revision: $(source.revision)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: %[7]s}
spec:
  configPath: data
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-config}
    data:
      image: $(image)$
      lint: $(config)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[8]s}
spec:
  template:
    apiVersion: carto.run/v1alpha1
    kind: Deliverable
    metadata:
      name: $(workload.metadata.name)$
      labels: {app.example.com/delivery: %[10]s}
    spec:
      source: {image: $(config.image)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: source
    templateRef: {kind: ClusterSourceTemplate, name: %[2]s}
  - name: test
    templateRef: {kind: ClusterSourceTemplate, name: %[3]s}
    sources: [{name: source, resource: source}]
  - name: build
    templateRef: {kind: ClusterImageTemplate, name: %[4]s}
    sources: [{name: source, resource: test}]
  - name: lint
    templateRef: {kind: ClusterConfigTemplate, name: %[5]s}
    sources: [{name: source, resource: test}]
  - name: config
    templateRef: {kind: ClusterConfigTemplate, name: %[7]s}
    images: [{name: image, resource: build}]
    configs: [{name: config, resource: lint}]
  - name: deliver
    templateRef: {kind: ClusterTemplate, name: %[8]s}
    configs: [{name: config, resource: config}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[9]s}
spec:
  urlPath: data.image
  revisionPath: data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-manifest}
    data:
      image: $(deliverable.spec.source.image)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterDeploymentTemplate
metadata: {name: %[11]s}
spec:
  # The rollout as kubectl rollout status judges it (observedGeneration is
  # checked first): counts, not the Progressing condition, which can lag
  # behind a new generation (TestDeploymentStatusLagsOnRecreate). A rolling
  # update creates the new ReplicaSet before it reports the generation, so
  # ProgressDeadlineExceeded is about the new one; it stops at maxSurge
  # new Pods, so a failure rule cannot ask for every replica updated.
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
    metadata: {name: {{ .deliverable.metadata.name }}}
    spec:
      replicas: 2
      progressDeadlineSeconds: 6
      strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
      selector: {matchLabels: {app: {{ .deliverable.metadata.name }}}}
      template:
        metadata: {labels: {app: {{ .deliverable.metadata.name }}}}
        spec:
          containers:
          - name: app
            image: {{ .deployment.url | quote }}
            # Played: the images that crash.
            env: [{name: KWOK_EXIT_CODE, value: "{{ if contains "crashes" .deployment.url }}1{{ else }}0{{ end }}"}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[10]s}
spec:
  selector: {app.example.com/delivery: %[10]s}
  resources:
  - name: manifest
    templateRef: {kind: ClusterSourceTemplate, name: %[9]s}
  - name: deploy
    templateRef: {kind: ClusterDeploymentTemplate, name: %[11]s}
    deployment: {resource: manifest}
`, c.chain, c.source, c.test, c.build, c.lint, c.lintRun, c.config, c.deliver, c.manifest, c.delivery, c.deploy)
}

// workload applies the workload app on a commit.
func (c appChain) workload(t *testing.T, commit string) {
	t.Helper()
	apply(t, c.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: app
  labels: {app.example.com/chain: %s}
spec:
  source:
    git: {url: "https://git.example.com/app.git", ref: {commit: %s}}
`, c.chain, commit))
}

func image(commit string) string { return "registry.example.com/app:" + commit }

// rolledOut is the image the Deployment app runs once rolled out (as
// kubectl rollout status decides), "" while it is not.
func (c appChain) rolledOut(t testing.TB) string {
	u, err := tryGet(deploymentGVR, c.ns, "app")
	if err != nil {
		return ""
	}
	m := u.Object
	for _, key := range []string{"updatedReplicas", "replicas", "availableReplicas"} {
		if fmt.Sprint(nested(m, "status", key)) != "2" {
			return ""
		}
	}
	if fmt.Sprint(nested(m, "status", "observedGeneration")) != fmt.Sprint(u.GetGeneration()) {
		return ""
	}
	return deploymentImage(u)
}

func deploymentImage(u *unstructured.Unstructured) string {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return ""
	}
	return fmt.Sprint(cs[0].(map[string]any)["image"])
}

// waitDeployed waits until the workload and the deliverable are Ready and
// the Deployment is rolled out on commit's image.
func (c appChain) waitDeployed(t *testing.T, commit string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() string {
		if got := c.rolledOut(t); got != image(commit) {
			return fmt.Sprintf("Deployment rolled out on %q, want %q; workload %v; deliverable %v", got, image(commit),
				c.conditions(workloadGVR), c.conditions(deliverableGVR))
		}
		return ""
	})
	waitOwner(t, workloadGVR, c.ns, "app", "Ready", "True", "Ready", timeout)
	waitOwner(t, deliverableGVR, c.ns, "app", "Ready", "True", "Ready", timeout)
}

func (c appChain) conditions(gvr any) any {
	switch gvr {
	case workloadGVR:
		u, _ := tryGet(workloadGVR, c.ns, "app")
		if u != nil {
			return nested(u.Object, "status", "conditions")
		}
	case deliverableGVR:
		u, _ := tryGet(deliverableGVR, c.ns, "app")
		if u != nil {
			return nested(u.Object, "status", "conditions")
		}
	}
	return nil
}

// runs counts a step's runs by the revision they ran on, and says which
// input sets ran more than once (by kontinue.dev/input-digest).
type runs struct {
	byRevision map[string]int
	dups       []string
}

func (r runs) revisions() []string {
	var out []string
	for rev, n := range r.byRevision {
		for range n {
			out = append(out, rev)
		}
	}
	sort.Strings(out)
	return out
}

// countRuns lists the Jobs of the test step, and the PipelineRuns of the
// build and lint Runnables.
func (c appChain) countRuns(t testing.TB) (jobs, builds, lints runs) {
	t.Helper()
	count := func(items []unstructured.Unstructured, revision func(unstructured.Unstructured) string) runs {
		r := runs{byRevision: map[string]int{}}
		digests := map[string]string{}
		for _, u := range items {
			r.byRevision[revision(u)]++
			d := u.GetLabels()["kontinue.dev/input-digest"]
			if prev, ok := digests[d]; ok {
				r.dups = append(r.dups, fmt.Sprintf("%s and %s (input digest %q)", prev, u.GetName(), d))
			}
			digests[d] = u.GetName()
		}
		return r
	}
	jobs = count(list(t, jobGVR, c.ns, "carto.run/workload-name=app,carto.run/resource-name=test"),
		func(u unstructured.Unstructured) string { return u.GetAnnotations()["app.example.com/revision"] })
	param := func(u unstructured.Unstructured) string {
		ps, _, _ := unstructured.NestedSlice(u.Object, "spec", "params")
		for _, p := range ps {
			if m := p.(map[string]any); m["name"] == "revision" {
				return fmt.Sprint(m["value"])
			}
		}
		return ""
	}
	builds = count(list(t, pipelineRunGVR, c.ns, "carto.run/runnable-name=app-build"), param)
	lints = count(list(t, pipelineRunGVR, c.ns, "carto.run/runnable-name=app-lint"), param)
	return jobs, builds, lints
}

// A chain of real objects: each step waits for the real controller's
// verdict, a failure shows the controller's own reason and keeps the last
// good outputs flowing, and every input set runs once.
func TestRealSupplyChainAndDelivery(t *testing.T) {
	ns := newNamespace(t)
	c := newAppChain(ns)
	apply(t, ns, c.yaml())
	const timeout = 60 * time.Second

	// c1: everything passes; the Deployment rolls out on c1's image.
	c.workload(t, "c1")
	c.waitDeployed(t, "c1", timeout)
	w := get(t, workloadGVR, ns, "app")
	assert.Equal(t, "MatchedCondition", stepCondition(w, "test", "Healthy")["reason"], "the Job's Complete condition")
	assert.Equal(t, "SucceededCondition", stepCondition(w, "build", "Healthy")["reason"], "the reason its template's rule gave the PipelineRun, as for lifecycle: tekton")
	cm := get(t, configMapGVR, ns, "app-config")
	assert.Equal(t, map[string]any{"image": image("c1"), "lint": "clean at c1"}, cm.Object["data"])
	d := get(t, deliverableGVR, ns, "app")
	assert.Equal(t, "True", fmt.Sprint(stepCondition(d, "deploy", "Healthy")["status"]))
	dep := get(t, deploymentGVR, ns, "app")
	assert.Equal(t, int64(2), nested(dep.Object, "status", "readyReplicas"), "two Pods Ready on kwok's nodes")

	// The test Job fails (exit code 1, backoffLimit 0): the job
	// controller's message reaches the step; nothing downstream moves, the
	// Deployment stays on c1.
	c.workload(t, "c2-fails-test")
	w = waitStep(t, workloadGVR, ns, "app", "test", "Healthy", "False", "", timeout)
	assert.Contains(t, fmt.Sprint(stepCondition(w, "test", "Healthy")["message"]), "Job has reached the specified backoff limit")
	assert.Equal(t, "False", fmt.Sprint(condition(w.Object, "Ready")["status"]))
	failed := list(t, jobGVR, ns, "carto.run/resource-name=test")
	require.Len(t, failed, 2)
	assert.Equal(t, "BackoffLimitExceeded", condition(failed[1].Object, "Failed")["reason"], "the job controller's reason")
	assert.Equal(t, image("c1"), c.rolledOut(t))

	// The tests pass, the build fails: Tekton's reconciler fails the
	// PipelineRun and its message reaches the step.
	c.workload(t, "c3-fails-build")
	w = waitStep(t, workloadGVR, ns, "app", "build", "Healthy", "False", "", timeout)
	msg := fmt.Sprint(stepCondition(w, "build", "Healthy")["message"])
	assert.Contains(t, msg, "Tasks Completed: 1 (Failed: 1", "Tekton's own message: %s", msg)
	assert.Equal(t, image("c1"), c.rolledOut(t))
	c.waitConfig(t, "lint", "clean at c3-fails-build", timeout)
	assert.Equal(t, image("c1"), nested(get(t, configMapGVR, ns, "app-config").Object, "data", "image"), "downstream keeps the last good image")

	// Everything builds, the new image crash-loops: the deployment
	// controller gives up (ProgressDeadlineExceeded), the deploy step fails
	// with that reason, and the old Pods keep serving c1.
	c.workload(t, "c4-crashes")
	d = waitStep(t, deliverableGVR, ns, "app", "deploy", "Healthy", "False", "", timeout)
	assert.Contains(t, fmt.Sprint(stepCondition(d, "deploy", "Healthy")["message"]), "ProgressDeadlineExceeded")
	dep = get(t, deploymentGVR, ns, "app")
	assert.Equal(t, image("c4-crashes"), deploymentImage(dep))
	assert.Equal(t, "ProgressDeadlineExceeded", condition(dep.Object, "Progressing")["reason"])
	assert.Equal(t, "True", condition(dep.Object, "Available")["status"], "maxUnavailable 0: the c1 Pods still serve")
	waitOwner(t, workloadGVR, ns, "app", "Ready", "True", "Ready", timeout)
	waitOwner(t, deliverableGVR, ns, "app", "Ready", "False", "", timeout)

	// All good again.
	c.workload(t, "c5")
	c.waitDeployed(t, "c5", timeout)

	// Idle: the real controllers are done, Kontinue writes nothing.
	time.Sleep(2 * time.Second) // the last status writes land
	before, err := env.kontinue.writes()
	require.NoError(t, err)
	time.Sleep(10 * time.Second) // proving that nothing happens
	after, err := env.kontinue.writes()
	require.NoError(t, err)
	assert.Equal(t, before, after, "API writes by Kontinue while idle")

	// One Job per commit (the failed one too), one build and one lint run
	// per commit whose tests passed.
	jobs, builds, lints := c.countRuns(t)
	assert.Equal(t, []string{"c1", "c2-fails-test", "c3-fails-build", "c4-crashes", "c5"}, jobs.revisions())
	assert.Equal(t, []string{"c1", "c3-fails-build", "c4-crashes", "c5"}, builds.revisions())
	assert.Equal(t, []string{"c1", "c3-fails-build", "c4-crashes", "c5"}, lints.revisions())
	assert.Empty(t, append(append(jobs.dups, builds.dups...), lints.dups...))
	assert.Equal(t, []string{"app-build", "app-lint"}, runnableNames(t, ns))

	// Deleting the workload removes everything it stamped, down to the
	// Pods, through owner references and the garbage collector.
	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(ns).Delete(context.Background(), "app", metav1.DeleteOptions{}))
	eventually(t, timeout, func() string {
		var left []string
		for _, gvr := range []schema.GroupVersionResource{deliverableGVR, runnableGVR, deploymentGVR, schemaRS, jobGVR,
			pipelineRunGVR, taskRunGVR, podGVR} {
			for _, u := range list(t, gvr, ns, "") {
				left = append(left, u.GetKind()+"/"+u.GetName())
			}
		}
		for _, u := range list(t, configMapGVR, ns, "kontinue.dev/stamped=true") {
			left = append(left, "ConfigMap/"+u.GetName())
		}
		if len(left) > 0 {
			return fmt.Sprintf("left after the workload's deletion: %v", left)
		}
		return ""
	})
}

// waitConfig waits until the ConfigMap app-config holds value at key.
func (c appChain) waitConfig(t *testing.T, key, value string, timeout time.Duration) {
	t.Helper()
	waitFor(t, configMapGVR, c.ns, "app-config", timeout, func(m map[string]any) string {
		if got := nested(m, "data", key); got != value {
			return fmt.Sprintf("data.%s is %v, want %s", key, got, value)
		}
		return ""
	})
}

func runnableNames(t testing.TB, ns string) []string {
	var out []string
	for _, u := range list(t, runnableGVR, ns, "") {
		out = append(out, u.GetName())
	}
	sort.Strings(out)
	return out
}
