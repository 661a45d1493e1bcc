package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runnableKind is one kind of template with runnable: true and a success
// rule other than Tekton's Succeeded condition, in a chain whose next step
// copies the step's outputs into a ConfigMap (<owner>-out).
type runnableKind struct {
	name    string
	flavor  ownerFlavor
	kind    string
	outputs string // the template's output paths (YAML lines indented by 2)
	rule    string // the success rule (YAML lines indented by 2)
	// succeed and fail are a run's status when the rule says it succeeded
	// or failed; out is the output value the run reports.
	succeed, fail func(out string) map[string]any
	reason        string // the failed run's reason (the rule's)
	// consume is the next step's inputs and the ConfigMap's data ("": the
	// kind has no outputs, no next step).
	consume, data string
	// deployed is what the ConfigMap holds once the run of revision rev
	// reporting out succeeded.
	deployed func(rev, out string) map[string]any
}

func (c runnableKind) chain(ns, owner string) string {
	p := c.flavor.prefix
	tmpl, consumer, chain := uniq(ns, "run-"+owner), uniq(ns, "out-"+owner), uniq(ns, "chain-"+owner)
	y := fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: %[1]s
metadata: {name: %[2]s}
spec:
  runnable: true
%[3]s
%[4]s
  template:
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: {name: $(%[5]s.metadata.name)$-run}
    spec:
      pipelineRef: {name: build}
      params:
      - {name: url, value: $(%[5]s.spec.source.git.url)$}
      - {name: revision, value: $(%[5]s.spec.source.git.ref.commit)$}
---
`, c.kind, tmpl, c.outputs, c.rule, p)
	steps := fmt.Sprintf("  - name: run\n    templateRef: {kind: %s, name: %s}\n", c.kind, tmpl)
	if c.consume != "" {
		y += fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(%s.metadata.name)$-out}
    data: %s
---
`, consumer, p, c.data)
		steps += fmt.Sprintf("  - name: out\n    templateRef: {kind: ClusterTemplate, name: %s}\n    %s\n", consumer, c.consume)
	}
	return y + c.flavor.chainYAML(chain, steps)
}

func (c runnableKind) owner(ns, name, commit string) string {
	return c.flavor.ownerYAML(name, uniq(ns, "chain-"+name), nil,
		fmt.Sprintf("  source:\n    git: {url: \"https://git.example.com/%s.git\", ref: {commit: %s}}\n", name, commit))
}

// runnable: true with a success rule of each kind (not Succeeded=True) on
// each template kind, and in a ClusterDelivery: the rule alone decides a
// run's success (a run with Succeeded=True but the rule unmet yields
// nothing), outputs come from the run the rule judged successful, and a run
// the rule judges failed makes the step unhealthy while the next step keeps
// the last good outputs.
func TestRunnableTrueCriterionPerKind(t *testing.T) {
	k := newRunKit(t)
	succeeded := map[string]any{"type": "Succeeded", "status": "True", "reason": "Succeeded"}
	cases := []runnableKind{
		{
			name: "ClusterSourceTemplate, observedCompletion", flavor: supplyChainFlavor, kind: "ClusterSourceTemplate",
			outputs: "  urlPath: status.artifact.url\n  revisionPath: spec.params[?(@.name==\"revision\")].value",
			rule:    "  observedCompletion:\n    succeeded: {key: status.phase, value: Done}\n    failed: {key: status.phase, value: Error}",
			succeed: func(out string) map[string]any {
				return map[string]any{"phase": "Done", "artifact": map[string]any{"url": out}}
			},
			fail: func(out string) map[string]any {
				return map[string]any{"phase": "Error", "artifact": map[string]any{"url": out}}
			},
			reason:  "FailedConditionMet",
			consume: "sources: [{name: src, resource: run}]", data: "{url: $(source.url)$, revision: $(source.revision)$}",
			deployed: func(rev, out string) map[string]any { return map[string]any{"url": out, "revision": rev} },
		},
		{
			name: "ClusterImageTemplate, healthRule multiMatch", flavor: supplyChainFlavor, kind: "ClusterImageTemplate",
			outputs: "  imagePath: status.results.image",
			rule: `  healthRule:
    multiMatch:
      healthy: {matchConditions: [{type: Complete, status: "True"}]}
      unhealthy: {matchConditions: [{type: Failed, status: "True"}]}`,
			succeed: func(out string) map[string]any {
				return map[string]any{"results": map[string]any{"image": out}, "conditions": []any{map[string]any{"type": "Complete", "status": "True"}}}
			},
			fail: func(out string) map[string]any {
				return map[string]any{"results": map[string]any{"image": out}, "conditions": []any{map[string]any{"type": "Failed", "status": "True", "message": "build broke"}}}
			},
			reason:  "MatchedCondition",
			consume: "images: [{name: built, resource: run}]", data: "{image: $(image)$}",
			deployed: func(_, out string) map[string]any { return map[string]any{"image": out} },
		},
		{
			name: "ClusterConfigTemplate, healthRule singleConditionType", flavor: supplyChainFlavor, kind: "ClusterConfigTemplate",
			outputs: "  configPath: status.results.config",
			rule:    "  healthRule: {singleConditionType: Built}",
			succeed: func(out string) map[string]any {
				return map[string]any{"results": map[string]any{"config": out}, "conditions": []any{map[string]any{"type": "Built", "status": "True"}}}
			},
			fail: func(out string) map[string]any {
				return map[string]any{"results": map[string]any{"config": out}, "conditions": []any{map[string]any{"type": "Built", "status": "False"}}}
			},
			reason:  "BuiltCondition",
			consume: "configs: [{name: cfg, resource: run}]", data: "{config: $(config)$}",
			deployed: func(_, out string) map[string]any { return map[string]any{"config": out} },
		},
		{
			name: "ClusterTemplate, observedCompletion on Job-style counts", flavor: supplyChainFlavor, kind: "ClusterTemplate",
			rule:    "  observedCompletion:\n    succeeded: {key: status.succeeded, value: 1}\n    failed: {key: status.failed, value: 1}",
			succeed: func(string) map[string]any { return map[string]any{"succeeded": 1} },
			fail:    func(string) map[string]any { return map[string]any{"failed": 1} },
			reason:  "FailedConditionMet",
		},
		{
			name: "Deliverable: ClusterSourceTemplate in a ClusterDelivery", flavor: deliveryFlavor, kind: "ClusterSourceTemplate",
			outputs: "  urlPath: status.artifact.url\n  revisionPath: spec.params[?(@.name==\"revision\")].value",
			rule: `  observedCompletion:
    succeeded: [{key: status.phase, value: Done}, {not: {key: status.degraded, value: true}}]
    failed: {or: [{key: status.phase, value: Error}, {key: status.degraded, value: true}]}`,
			succeed: func(out string) map[string]any {
				return map[string]any{"phase": "Done", "artifact": map[string]any{"url": out}}
			},
			fail: func(out string) map[string]any {
				return map[string]any{"phase": "Done", "degraded": true, "artifact": map[string]any{"url": out}}
			},
			reason:  "FailedConditionMet",
			consume: "sources: [{name: src, resource: run}]", data: "{url: $(source.url)$, revision: $(source.revision)$}",
			deployed: func(rev, out string) map[string]any { return map[string]any{"url": out, "revision": rev} },
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := k.with(t)
			owner := fmt.Sprintf("o%d", i)
			gvr, runnable := c.flavor.ownerGVR, owner+"-run"
			deployed := func() map[string]any {
				cm, err := tryGet(configMapGVR, k.ns, owner+"-out")
				if err != nil {
					return nil
				}
				d, _ := nested(cm.Object, "data").(map[string]any)
				return d
			}
			waitDeployed := func(want map[string]any) {
				t.Helper()
				eventually(t, 30*time.Second, func() string {
					if got := deployed(); fmt.Sprint(got) != fmt.Sprint(want) {
						return fmt.Sprintf("%s-out holds %v, want %v", owner, got, want)
					}
					return ""
				})
			}
			apply(t, k.ns, c.chain(k.ns, owner))
			apply(t, k.ns, c.owner(k.ns, owner, "c1"))

			// Succeeded=True means nothing to this rule: no outputs yet.
			runs := k.waitRevisions(runnable, "c1")
			setStatus(t, immPipelineRunGVR, k.ns, runs[0].GetName(), map[string]any{"conditions": []any{succeeded}})
			time.Sleep(500 * time.Millisecond) // proving that nothing moves
			assert.Nil(t, deployed(), "a run is not successful until the template's rule says so")
			assert.Nil(t, nested(get(t, immRunnableGVR, k.ns, runnable).Object, "status", "latestSuccessfulRunRef"))

			// The rule holds: the outputs are this run's.
			setStatus(t, immPipelineRunGVR, k.ns, runs[0].GetName(), c.succeed("out-c1"))
			w := waitOwner(t, gvr, k.ns, owner, "Ready", "True", "Ready")
			assert.Equal(t, "True", condition(stepStatus(w, "run"), "Healthy")["status"])
			if c.deployed != nil {
				waitDeployed(c.deployed("c1", "out-c1"))
			}
			rn := k.waitRunnable(runnable, "StampedObjectCondition", "True", "")
			assert.Equal(t, runs[0].GetName(), nested(rn.Object, "status", "latestSuccessfulRunRef", "name"))

			// A new input set whose run the rule judges failed (with
			// Succeeded=True too: the rule wins): the step is unhealthy,
			// the next step keeps the outputs of the good run.
			apply(t, k.ns, c.owner(k.ns, owner, "c2"))
			runs = k.waitRevisions(runnable, "c2", "c1")
			failed := c.fail("out-c2")
			if conds, ok := failed["conditions"].([]any); ok {
				failed["conditions"] = append(conds, succeeded)
			} else {
				failed["conditions"] = []any{succeeded}
			}
			setStatus(t, immPipelineRunGVR, k.ns, runs[0].GetName(), failed)
			k.waitRunnable(runnable, "StampedObjectCondition", "False", c.reason)
			w = waitOwner(t, gvr, k.ns, owner, "Ready", "False", "HealthyConditionRule")
			healthy := condition(stepStatus(w, "run"), "Healthy")
			assert.Equal(t, "False", healthy["status"])
			assert.Equal(t, c.reason, healthy["reason"], "the step carries the rule's reason")
			assert.Contains(t, fmt.Sprint(healthy["message"]), runs[0].GetName(), "the step names the failed run")
			rn = get(t, immRunnableGVR, k.ns, runnable)
			assert.Equal(t, runs[1].GetName(), nested(rn.Object, "status", "latestSuccessfulRunRef", "name"), "the good run still serves")
			if c.deployed != nil {
				time.Sleep(500 * time.Millisecond) // proving that the failed run's outputs do not flow
				assert.Equal(t, c.deployed("c1", "out-c1"), deployed())
			}

			// A run the rule judges successful again: its outputs flow.
			apply(t, k.ns, c.owner(k.ns, owner, "c3"))
			runs = k.waitRevisions(runnable, "c3", "c2", "c1")
			require.True(t, strings.HasPrefix(runs[0].GetName(), runnable), runs[0].GetName())
			setStatus(t, immPipelineRunGVR, k.ns, runs[0].GetName(), c.succeed("out-c3"))
			waitOwner(t, gvr, k.ns, owner, "Ready", "True", "Ready")
			if c.deployed != nil {
				waitDeployed(c.deployed("c3", "out-c3"))
			}
		})
	}
}
