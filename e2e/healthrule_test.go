package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// testTemplate is a ClusterTemplate stamping Test <workload>-<suffix> with
// a health rule (YAML indented by four spaces, after "healthRule:").
func (k *kit) testTemplate(name, suffix, rule string) string {
	return k.templateYAML("ClusterTemplate", name, `
  healthRule:`+rule+`
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-`+suffix+`}
    spec: {step: `+suffix+`}`)
}

// Health rules end to end: alwaysHealthy, singleConditionType (missing,
// True, False) and multiMatch (condition match, field match with
// messagePath); the workload's ResourcesHealthy sums them up as Cartographer
// does: the last unhealthy step's message, else the first unknown one's, as
// the step wrote it.
func TestHealthRulesEndToEnd(t *testing.T) {
	k := newKit(t)
	always, single, multi := k.name("always"), k.name("single"), k.name("multi")
	chain := k.name("health-chain")
	k.apply(k.testTemplate(always, "always", " {alwaysHealthy: {}}"))
	k.apply(k.testTemplate(single, "single", " {singleConditionType: Ready}"))
	k.apply(k.testTemplate(multi, "multi", `
    multiMatch:
      healthy: {matchConditions: [{type: Ready, status: "True"}]}
      unhealthy: {matchFields: [{key: status.phase, operator: In, values: [Failed], messagePath: status.message}]}`))
	k.apply(k.chainYAML(chain, "", k.step("always", "ClusterTemplate", always, "")+
		k.step("single", "ClusterTemplate", single, "")+k.step("multi", "ClusterTemplate", multi, "")))
	k.workload("app", chain, "")

	// Nothing reported yet: only alwaysHealthy is healthy.
	w := k.waitStep("app", "multi", "Healthy", "Unknown", "NoMatchesFulfilled")
	k.assertCond(k.stepCond(w, "always", "Healthy"), "True", "AlwaysHealthy")
	k.assertCond(k.stepCond(w, "single", "Healthy"), "Unknown", "ReadyCondition", "condition [Ready] not found")
	k.assertCond(k.stepCond(w, "multi", "Healthy"), "Unknown", "NoMatchesFulfilled", "expected condition [Ready] to be [True]")
	k.assertCond(ownerCondition(w, "ResourcesSubmitted"), "True", "ResourceSubmissionComplete")
	// The owner's summary has Cartographer's one reason and the first
	// unknown step's message.
	k.assertCond(ownerCondition(w, "ResourcesHealthy"), "Unknown", "HealthyConditionRule", "condition [Ready] not found")
	assert.Equal(t, k.stepCond(w, "single", "Healthy")["message"], ownerCondition(w, "ResourcesHealthy")["message"], "the step's message, bare")
	k.assertCond(ownerCondition(w, "Ready"), "Unknown", "HealthyConditionRule", "condition [Ready] not found")
	k.assertQuiet(k.wl("app"))

	// Both report Ready: all healthy.
	ready := map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Built"}}}
	setStatus(t, testGVR, k.ns, "app-single", ready)
	setStatus(t, testGVR, k.ns, "app-multi", ready)
	w = k.waitOwner("app", "ResourcesHealthy", "True", "HealthyConditionRule")
	k.assertCond(k.stepCond(w, "single", "Healthy"), "True", "ReadyCondition", "condition [Ready] is [True]")
	k.assertCond(k.stepCond(w, "multi", "Healthy"), "True", "MatchedCondition", "condition status: True")
	k.assertCond(ownerCondition(w, "Ready"), "True", "Ready")
	k.waitEvent("app", "ResourceHealthyStatusChanged", "step [single]", "True")

	// multi fails by a field; its messagePath explains.
	setStatus(t, testGVR, k.ns, "app-multi", map[string]any{"phase": "Failed", "message": "disk full",
		"conditions": ready["conditions"]})
	w = k.waitStep("app", "multi", "Healthy", "False", "MatchedField")
	k.assertCond(k.stepCond(w, "multi", "Healthy"), "False", "MatchedField", "disk full")
	w = k.waitOwner("app", "ResourcesHealthy", "False", "HealthyConditionRule")
	k.assertCond(ownerCondition(w, "ResourcesHealthy"), "False", "HealthyConditionRule", "disk full")
	k.assertCond(ownerCondition(w, "Ready"), "False", "HealthyConditionRule", "disk full")
	k.waitEvent("app", "ResourceHealthyStatusChanged", "step [multi]", "False")

	// single fails too: the last unhealthy step in chain order is reported,
	// as Cartographer's condition manager does.
	setStatus(t, testGVR, k.ns, "app-single", map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "BuildFailed", "message": "compile error"}}})
	w = k.waitStep("app", "single", "Healthy", "False", "ReadyCondition")
	k.assertCond(k.stepCond(w, "single", "Healthy"), "False", "ReadyCondition", "condition [Ready] is [False]", "BuildFailed", "compile error")
	w = k.waitOwner("app", "ResourcesHealthy", "False", "HealthyConditionRule")
	k.assertCond(ownerCondition(w, "ResourcesHealthy"), "False", "HealthyConditionRule", "disk full")
	k.assertQuiet(k.wl("app"))
}
