package e2ereal

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Runs beyond the retention policy go with what they own: Kontinue deletes
// old Jobs and TaskRuns (lifecycle immutable and tekton) in the background,
// and the garbage collector removes their Pods. A Job deleted without a
// propagation policy would leave its Pods behind (batch/v1's default is to
// orphan them).
func TestRealRetentionRemovesRunsAndTheirPods(t *testing.T) {
	ns := newNamespace(t)
	chain, test, check := uniq(ns, "chain"), uniq(ns, "test"), uniq(ns, "check")
	apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[2]s}
spec:
  lifecycle: immutable
  retentionPolicy: {maxFailedRuns: 1, maxSuccessfulRuns: 1}
  urlPath: metadata.annotations['app.example.com/url']
  revisionPath: metadata.annotations['app.example.com/revision']
  healthRule:
    multiMatch:
      healthy: {matchConditions: [{type: Complete, status: "True"}]}
      unhealthy: {matchConditions: [{type: Failed, status: "True"}]}
  template:
    apiVersion: batch/v1
    kind: Job
    metadata:
      generateName: $(workload.metadata.name)$-test-
      annotations:
        app.example.com/url: $(workload.spec.source.git.url)$
        app.example.com/revision: $(workload.spec.source.git.ref.commit)$
    spec:
      backoffLimit: 0
      template:
        spec:
          restartPolicy: Never
          containers: [{name: test, image: registry.example.com/tester, command: [make, test]}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s}
spec:
  lifecycle: tekton
  retentionPolicy: {maxFailedRuns: 1, maxSuccessfulRuns: 1}
  template:
    apiVersion: tekton.dev/v1
    kind: TaskRun
    metadata:
      generateName: $(workload.metadata.name)$-check-
      annotations: {app.example.com/revision: $(source.revision)$}
    spec:
      taskSpec:
        steps: [{name: check, image: registry.example.com/checker, command: [make, check]}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/chain: %[1]s}
  resources:
  - name: test
    templateRef: {kind: ClusterSourceTemplate, name: %[2]s}
  - name: check
    templateRef: {kind: ClusterTemplate, name: %[3]s}
    sources: [{name: source, resource: test}]
`, chain, test, check))
	const timeout = 60 * time.Second
	for _, commit := range []string{"r1", "r2", "r3"} {
		apply(t, ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata: {name: app, labels: {app.example.com/chain: %s}}
spec:
  source: {git: {url: "https://git.example.com/app.git", ref: {commit: %s}}}
`, chain, commit))
		eventually(t, timeout, func() string {
			w, err := tryGet(workloadGVR, ns, "app")
			if err != nil {
				return err.Error()
			}
			runs := list(t, taskRunGVR, ns, "carto.run/resource-name=check")
			if len(runs) == 0 || revisionOf(&runs[len(runs)-1]) != commit || condition(runs[len(runs)-1].Object, "Succeeded")["status"] != "True" ||
				condition(w.Object, "Ready")["status"] != "True" {
				return fmt.Sprintf("no successful TaskRun on %s yet; workload %v", commit, nested(w.Object, "status", "conditions"))
			}
			return ""
		})
	}

	// Only r3's runs remain, and only their Pods.
	revisions := func(gvr any) []string {
		var out []string
		switch gvr {
		case jobGVR:
			for _, u := range list(t, jobGVR, ns, "carto.run/resource-name=test") {
				out = append(out, revisionOf(&u))
			}
		case taskRunGVR:
			for _, u := range list(t, taskRunGVR, ns, "carto.run/resource-name=check") {
				out = append(out, revisionOf(&u))
			}
		}
		return out
	}
	eventually(t, timeout, func() string {
		var pods []string
		for _, p := range list(t, podGVR, ns, "") {
			pods = append(pods, p.GetOwnerReferences()[0].Kind+"/"+p.GetOwnerReferences()[0].Name)
		}
		sort.Strings(pods)
		if len(pods) != 2 || fmt.Sprint(revisions(jobGVR)) != "[r3]" || fmt.Sprint(revisions(taskRunGVR)) != "[r3]" {
			return fmt.Sprintf("Jobs on %v, TaskRuns on %v, Pods owned by %v", revisions(jobGVR), revisions(taskRunGVR), pods)
		}
		return ""
	})
	assert.Equal(t, []string{"r3"}, revisions(jobGVR))
}
