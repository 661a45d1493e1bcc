package e2ereal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The chain of TestRealSupplyChainAndDelivery, with Kontinue killed
// (SIGKILL, then a fresh process) the instant each commit's Job appears,
// the instant its build and lint PipelineRuns appear, and while its
// Deployment rolls out: every commit still gets exactly one Job, one build
// run and one lint run, and the Deployment ends rolled out on the last one.
func TestRealChainSurvivesKill9(t *testing.T) {
	ns := newNamespace(t)
	c := newAppChain(ns)
	apply(t, ns, c.yaml())
	const timeout = 90 * time.Second
	commits := []string{"k1", "k2", "k3", "k4"}
	kills := 0
	for i, commit := range commits {
		isCommit := func(u *unstructured.Unstructured) bool { return revisionOf(u) == commit }
		job := killOn(t, jobGVR, ns, "carto.run/resource-name=test", isCommit)
		build := killOn(t, pipelineRunGVR, ns, "carto.run/runnable-name=app-build", isCommit)
		lint := killOn(t, pipelineRunGVR, ns, "carto.run/runnable-name=app-lint", isCommit)
		rollout := killOn(t, deploymentGVR, ns, "", func(u *unstructured.Unstructured) bool {
			// Applied, not yet observed or rolled out: mid-rollout.
			return deploymentImage(u) == image(commit) && c.rolledOut(t) != image(commit)
		})
		c.workload(t, commit)
		kills += job.wait(t, timeout) + build.wait(t, timeout) + lint.wait(t, timeout)
		if i > 0 { // the first commit creates the Deployment
			kills += rollout.wait(t, timeout)
		} else {
			rollout.stop()
		}
		c.waitDeployed(t, commit, timeout)
	}
	t.Logf("%d kills", kills)
	require.GreaterOrEqual(t, kills, 3*len(commits), "a kill per Job, build and lint run at least")

	jobs, builds, lints := c.countRuns(t)
	assert.Equal(t, commits, jobs.revisions(), "one Job per commit")
	assert.Equal(t, commits, builds.revisions(), "one build PipelineRun per commit")
	assert.Equal(t, commits, lints.revisions(), "one lint PipelineRun per commit")
	assert.Empty(t, append(append(jobs.dups, builds.dups...), lints.dups...))
	assert.Equal(t, []string{"app-build", "app-lint"}, runnableNames(t, ns))
	assert.Len(t, list(t, deploymentGVR, ns, ""), 1, "one Deployment, no shadow")
}

// revisionOf reads the commit a Job (annotation) or a PipelineRun (param
// revision) runs on.
func revisionOf(u *unstructured.Unstructured) string {
	if r, ok := u.GetAnnotations()["app.example.com/revision"]; ok {
		return r
	}
	ps, _, _ := unstructured.NestedSlice(u.Object, "spec", "params")
	for _, p := range ps {
		if m, ok := p.(map[string]any); ok && m["name"] == "revision" {
			return fmt.Sprint(m["value"])
		}
	}
	return ""
}

// killer kills Kontinue with SIGKILL (and starts a fresh one) the first
// time a watched object matches.
type killer struct {
	what   string
	cancel context.CancelFunc
	done   chan struct{}
	killed bool
}

// killOn watches objects of gvr in ns (labels matching selector) from now
// on and kills Kontinue as soon as one of them matches.
func killOn(t *testing.T, gvr schema.GroupVersionResource, ns, selector string, match func(*unstructured.Unstructured) bool) *killer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := env.dyn.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	k := &killer{what: gvr.Resource + " " + selector, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(k.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && match(u) {
					k.killed = true
					return
				}
			}
		}
	}()
	return k
}

// wait waits until the watched object matched, then kills Kontinue; it
// returns the number of kills (1).
func (k *killer) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-k.done:
	case <-time.After(timeout):
		k.stop()
		t.Fatalf("no %s matched within %s", k.what, timeout)
	}
	require.True(t, k.killed, "the watch of %s ended early", k.what)
	kill9(t)
	return 1
}

func (k *killer) stop() {
	k.cancel()
	<-k.done
}
