package health

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"kontinue.dev/kontinue/reconciler/api"
)

func TestDeploymentConditionMessage(t *testing.T) {
	matches := &api.TemplateSpec{ObservedMatches: []api.ObservedMatch{{Input: "spec.value.some-key", Output: "spec.value.other-key"}}}
	completion := &api.TemplateSpec{ObservedCompletion: &api.ObservedCompletion{
		Succeeded: api.Rules{{Key: "status.phase", Value: "Done"}},
		Failed:    api.Rules{{Key: "status.phase", Value: "Broken"}},
	}}
	nested := &api.TemplateSpec{ObservedCompletion: &api.ObservedCompletion{
		Succeeded: api.Rules{{Or: api.Rules{{Key: "status.a", Value: "x"}, {Key: "status.b", Value: "y"}}}},
	}}
	cases := []struct {
		name string
		spec *api.TemplateSpec
		doc  string
		want string
	}{
		// The two texts Cartographer's own suite pins (delivery/deploy-w-bad-match, deploy-w-missing-match).
		{"values differ", matches, `{"spec":{"value":{"some-key":"https://github.com/ekcasey/hello-world-ops","other-key":"some-mismatching-value"}}}`,
			"input [spec.value.some-key] and output [spec.value.other-key] do not match: https://github.com/ekcasey/hello-world-ops != some-mismatching-value"},
		{"output missing", matches, `{"spec":{"value":{"some-key":"a"}}}`,
			"could not find value on output [spec.value.other-key]: jsonpath returned empty list: spec.value.other-key"},
		{"input missing", matches, `{"spec":{"value":{}}}`,
			"could not find value on input [spec.value.some-key]: jsonpath returned empty list: spec.value.some-key"},
		{"matches met", matches, `{"spec":{"value":{"some-key":"a","other-key":"a"}}}`, ""},
		{"no observedGeneration", completion, `{"metadata":{"generation":1},"status":{"phase":"Done"}}`,
			"failed to evaluate status.observedGeneration: jsonpath returned empty list: status.observedGeneration"},
		{"generation not observed", completion, `{"metadata":{"generation":2},"status":{"observedGeneration":1,"phase":"Done"}}`,
			"status.observedGeneration does not equal metadata.generation: 1 != 2"},
		{"failed", completion, `{"metadata":{"generation":1},"status":{"observedGeneration":1,"phase":"Broken"}}`,
			"deployment failure condition [status.phase] was: Broken"},
		{"not yet", completion, `{"metadata":{"generation":1},"status":{"observedGeneration":1,"phase":"Running"}}`,
			"deployment success condition [status.phase] was: Running, expected: Done"},
		{"success path missing", completion, `{"metadata":{"generation":1},"status":{"observedGeneration":1}}`,
			"failed to evaluate succeededCondition.Key [status.phase]: jsonpath returned empty list: status.phase"},
		{"succeeded", completion, `{"metadata":{"generation":1},"status":{"observedGeneration":1,"phase":"Done"}}`, ""},
		{"nested rules are described", nested, `{"metadata":{"generation":1},"status":{"observedGeneration":1}}`,
			"deployment success condition not met: " + explainUnmet(nested.ObservedCompletion.Succeeded, []byte(`{"metadata":{"generation":1},"status":{"observedGeneration":1}}`))},
		{"no rule", &api.TemplateSpec{}, `{}`, ""},
		{"no spec", nil, `{}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, DeploymentConditionMessage(c.spec, []byte(c.doc)))
		})
	}
}
