package health

import (
	"fmt"

	"kontinue.dev/kontinue/reconciler/api"
)

// DeploymentConditionMessage says, in Cartographer's words, why a
// ClusterDeploymentTemplate's observedMatches or observedCompletion does not
// hold on doc, or what failure it met. Deliverable owners' tooling reads
// these texts (Cartographer's suite pins them); Kontinue's own, more
// detailed explanation stays in the step's Healthy condition. It returns ""
// when the template has neither rule, or when nothing is unmet.
func DeploymentConditionMessage(spec *api.TemplateSpec, doc []byte) string {
	switch {
	case spec == nil:
		return ""
	case spec.ObservedCompletion != nil:
		return completionMessage(spec.ObservedCompletion, doc)
	case len(spec.ObservedMatches) > 0:
		return matchesMessage(spec.ObservedMatches, doc)
	}
	return ""
}

func emptyList(path string) string { return "jsonpath returned empty list: " + path }

func matchesMessage(matches []api.ObservedMatch, doc []byte) string {
	for _, m := range matches {
		in, found, err := lookup(m.Input, doc)
		if err != nil || !found {
			return fmt.Sprintf("could not find value on input [%s]: %s", m.Input, notFoundText(m.Input, err))
		}
		out, found, err := lookup(m.Output, doc)
		if err != nil || !found {
			return fmt.Sprintf("could not find value on output [%s]: %s", m.Output, notFoundText(m.Output, err))
		}
		if !ValuesEqual(in, out) {
			return fmt.Sprintf("input [%s] and output [%s] do not match: %s != %s", m.Input, m.Output, show(in), show(out))
		}
	}
	return ""
}

func notFoundText(path string, err error) string {
	if err != nil {
		return err.Error()
	}
	return emptyList(path)
}

// completionMessage follows Cartographer's order: generation observed, then
// the failed condition, then the succeeded one. Nested rules (Kontinue's
// and/or/not) have no Cartographer wording: they are described instead.
func completionMessage(oc *api.ObservedCompletion, doc []byte) string {
	observed, found, err := lookup("status.observedGeneration", doc)
	if err != nil || !found {
		return "failed to evaluate status.observedGeneration: " + notFoundText("status.observedGeneration", err)
	}
	if gen, found, _ := lookup("metadata.generation", doc); found && !ValuesEqual(observed, gen) {
		return fmt.Sprintf("status.observedGeneration does not equal metadata.generation: %s != %s", show(observed), show(gen))
	}
	if len(oc.Failed) > 0 {
		if held, err := evalRules(oc.Failed, doc, 0); err == nil && held {
			if isLeaf(oc.Failed) {
				v, _, _ := lookup(oc.Failed[0].Key, doc)
				return fmt.Sprintf("deployment failure condition [%s] was: %s", oc.Failed[0].Key, show(v))
			}
			return "deployment failure condition met: " + describeRules(oc.Failed, 0)
		}
	}
	if held, err := evalRules(oc.Succeeded, doc, 0); err == nil && held {
		return ""
	}
	if !isLeaf(oc.Succeeded) {
		return "deployment success condition not met: " + explainUnmet(oc.Succeeded, doc)
	}
	key := oc.Succeeded[0].Key
	v, found, err := lookup(key, doc)
	if err != nil || !found {
		return fmt.Sprintf("failed to evaluate succeededCondition.Key [%s]: %s", key, notFoundText(key, err))
	}
	return fmt.Sprintf("deployment success condition [%s] was: %s, expected: %s", key, show(v), show(oc.Succeeded[0].Value))
}
