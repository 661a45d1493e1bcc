package health

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
)

// decodeSpec decodes a template spec written as JSON, as the reconciler
// does with the unstructured spec.
func decodeSpec(t *testing.T, js string) *api.TemplateSpec {
	t.Helper()
	var s api.TemplateSpec
	require.NoError(t, json.Unmarshal([]byte(js), &s), js)
	return &s
}

const readyPath = `status.conditions[?(@.type==\"Ready\")].status`

type evalCase struct {
	name    string
	spec    string // TemplateSpec as JSON
	kind    string // default ClusterSourceTemplate
	obj     string
	outErr  error
	def     *api.HealthRule // the lifecycle's default rule
	outcome Outcome
	status  string
	reason  string
	msg     []string // substrings of the message
}

// tekton is lifecycle tekton's default rule (reconciler/step's Lifecycle.Health).
var tekton = &api.HealthRule{SingleConditionType: "Succeeded"}

func runEval(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kind := tc.kind
			if kind == "" {
				kind = api.KindClusterSourceTemplate
			}
			var obj []byte
			if tc.obj != "" {
				obj = []byte(tc.obj)
			}
			r := EvaluateWith(decodeSpec(t, tc.spec), tc.def, kind, obj, tc.outErr)
			assert.Equal(t, tc.outcome, r.Outcome, "outcome; message: %s", r.Message)
			assert.Equal(t, tc.status, r.Status, "status")
			assert.Equal(t, tc.reason, r.Reason, "reason")
			for _, m := range tc.msg {
				assert.Contains(t, r.Message, m)
			}
		})
	}
}

func TestOutcomeString(t *testing.T) {
	assert.Equal(t, "Processing", Processing.String())
	assert.Equal(t, "Succeeded", Succeeded.String())
	assert.Equal(t, "Failed", Failed.String())
	assert.Equal(t, "Outcome(7)", Outcome(7).String())
}

func TestValuesEqual(t *testing.T) {
	cases := []struct {
		a, b any
		want bool
	}{
		{"True", true, true},
		{"true", true, true},
		{"TRUE", true, true},
		{"False", false, true},
		{"True", false, false},
		{"yes", true, false},
		{true, true, true},
		{true, false, false},
		{"3", int64(3), true},
		{"3", float64(3), true},
		{"3.0", int64(3), true},
		{"3.5", 3.5, true},
		{"3", int64(4), false},
		{" 3", int64(3), false},
		{"0x3", int64(3), false},
		{"Inf", 1e308, false},
		{int64(3), float64(3), true},
		{3, int64(3), true},
		{json.Number("3"), int64(3), true},
		{int64(1) << 53, float64(1<<53) + 1, true}, // the float rounds to 2^53
		{int64(1)<<53 + 1, float64(1 << 53), false},
		{"a", "a", true},
		{"a", "A", false},
		{"True", "true", false}, // two strings compare strictly
		{nil, nil, true},
		{nil, "null", false},
		{nil, false, false},
		{[]any{"1", true}, []any{int64(1), "True"}, true},
		{[]any{int64(1)}, []any{int64(1), int64(2)}, false},
		{map[string]any{"a": "3"}, map[string]any{"a": 3.0}, true},
		{map[string]any{"a": 1}, map[string]any{"b": 1}, false},
		{map[string]any{"a": 1}, []any{1}, false},
		{true, int64(1), false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, ValuesEqual(tc.a, tc.b), "%#v == %#v", tc.a, tc.b)
		assert.Equal(t, tc.want, ValuesEqual(tc.b, tc.a), "%#v == %#v (swapped)", tc.b, tc.a)
	}
}

func TestRulesDecodeBothSpellings(t *testing.T) {
	one := decodeSpec(t, `{"observedCompletion":{"succeeded":{"key":"status.a","value":"x"}}}`)
	many := decodeSpec(t, `{"observedCompletion":{"succeeded":[{"key":"status.a","value":"x"}]}}`)
	require.Len(t, one.ObservedCompletion.Succeeded, 1)
	assert.Equal(t, one.ObservedCompletion.Succeeded, many.ObservedCompletion.Succeeded)
	doc := []byte(`{"status":{"a":"x"}}`)
	for _, s := range []*api.TemplateSpec{one, many} {
		r := Evaluate(s, api.KindClusterSourceTemplate, doc, nil)
		assert.Equal(t, Succeeded, r.Outcome, r.Message)
	}
}

func TestObservedCompletion(t *testing.T) {
	single := `{"observedCompletion":{"succeeded":{"key":"` + readyPath + `","value":true},
		"failed":{"key":"` + readyPath + `","value":"False"}}}`
	list := `{"observedCompletion":{"succeeded":[{"key":"` + readyPath + `","value":"True"}],
		"failed":[{"key":"` + readyPath + `","value":false}]}}`
	ready := func(status string) string {
		return `{"metadata":{"generation":2},"status":{"observedGeneration":2,"conditions":[{"type":"Ready","status":"` + status + `"}]}}`
	}
	runEval(t, []evalCase{
		{name: "single object spelling succeeds", spec: single, obj: ready("True"),
			outcome: Succeeded, status: "True", reason: "SucceededConditionMet",
			msg: []string{"succeeded condition met", "[True]"}},
		{name: "list spelling succeeds", spec: list, obj: ready("True"),
			outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "failed", spec: single, obj: ready("False"),
			outcome: Failed, status: "False", reason: "FailedConditionMet",
			msg: []string{`failed condition met: value at path [status.conditions[?(@.type=="Ready")].status] is [False]`}},
		{name: "list spelling fails", spec: list, obj: ready("False"),
			outcome: Failed, status: "False", reason: "FailedConditionMet"},
		{name: "in progress names path, expected and actual", spec: single, obj: ready("Unknown"),
			outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{`[status.conditions[?(@.type=="Ready")].status]`, "to be [true]", "found [Unknown]"}},
		{name: "missing path", spec: single, obj: `{"status":{}}`,
			outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"the path is missing", "to be [true]"}},
		{name: "no status at all", spec: single, obj: `{"metadata":{"name":"x"}}`,
			outcome: Processing, status: "Unknown", reason: "ConditionNotMet"},
		{name: "generation not yet observed", spec: single,
			obj:     `{"metadata":{"generation":2},"status":{"observedGeneration":1,"conditions":[{"type":"Ready","status":"True"}]}}`,
			outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"waiting for status.observedGeneration [1] to equal metadata.generation [2]"}},
		{name: "generation not yet observed hides failure too", spec: single,
			obj:     `{"metadata":{"generation":3},"status":{"observedGeneration":2,"conditions":[{"type":"Ready","status":"False"}]}}`,
			outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"[2] to equal metadata.generation [3]"}},
		{name: "no observedGeneration: check skipped", spec: single,
			obj:     `{"metadata":{"generation":5},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`,
			outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "observedGeneration but no generation: check skipped", spec: single,
			obj:     `{"status":{"observedGeneration":5,"conditions":[{"type":"Ready","status":"True"}]}}`,
			outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "several Ready conditions are undecided, not failed", spec: single,
			obj:     `{"status":{"conditions":[{"type":"Ready","status":"False"},{"type":"Ready","status":"False"}]}}`,
			outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"cannot evaluate the failed condition", "yields 2 values"}},
		{name: "failed absent: only succeeded", spec: `{"observedCompletion":{"succeeded":{"key":"status.phase","value":"Done"}}}`,
			obj: `{"status":{"phase":"Broken"}}`, outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"expected value at path [status.phase] to be [Done], found [Broken]"}},
		{name: "number leniency", spec: `{"observedCompletion":{"succeeded":{"key":"status.replicas","value":"3"}}}`,
			obj: `{"status":{"replicas":3}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "number leniency other way", spec: `{"observedCompletion":{"succeeded":{"key":"status.replicas","value":3}}}`,
			obj: `{"status":{"replicas":"3"}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "object value", spec: `{"observedCompletion":{"succeeded":{"key":"status.ref","value":{"name":"a","n":1}}}}`,
			obj: `{"status":{"ref":{"n":1,"name":"a"}}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "a list of rules is an and", spec: `{"observedCompletion":{"succeeded":[{"key":"status.a","value":1},{"key":"status.b","value":2}]}}`,
			obj: `{"status":{"a":1,"b":3}}`, outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"value at path [status.a] == [1] and value at path [status.b] == [2]", "found value at path [status.a] is [1], value at path [status.b] is [3]"}},
		{name: "a list of rules all hold", spec: `{"observedCompletion":{"succeeded":[{"key":"status.a","value":1},{"key":"status.b","value":2}]}}`,
			obj: `{"status":{"a":1,"b":2}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
	})
}

func TestNestedRules(t *testing.T) {
	oc := func(succeeded string) string {
		return `{"observedCompletion":{"succeeded":` + succeeded + `}}`
	}
	ocFailed := func(failed string) string {
		return `{"observedCompletion":{"succeeded":{"key":"status.done","value":true},"failed":` + failed + `}}`
	}
	runEval(t, []evalCase{
		{name: "or: second holds", spec: oc(`{"or":[{"key":"status.a","value":"x"},{"key":"status.b","value":"y"}]}`),
			obj: `{"status":{"b":"y"}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "or: none holds", spec: oc(`{"or":[{"key":"status.a","value":"x"},{"key":"status.b","value":"y"}]}`),
			obj: `{"status":{"a":"z"}}`, outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"(value at path [status.a] == [x] or value at path [status.b] == [y])",
				"value at path [status.a] is [z]", "path [status.b] is missing"}},
		{name: "and: all hold", spec: oc(`{"and":[{"key":"status.a","value":"x"},{"key":"status.b","value":true}]}`),
			obj: `{"status":{"a":"x","b":"True"}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "and: one missing", spec: oc(`{"and":[{"key":"status.a","value":"x"},{"key":"status.b","value":true}]}`),
			obj: `{"status":{"a":"x"}}`, outcome: Processing, status: "Unknown", reason: "ConditionNotMet"},
		{name: "not of a missing path holds", spec: oc(`{"not":{"key":"status.error","value":"x"}}`),
			obj: `{"status":{}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "not of a present matching value", spec: oc(`{"not":{"key":"status.error","value":"x"}}`),
			obj: `{"status":{"error":"x"}}`, outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"not (value at path [status.error] == [x])", "value at path [status.error] is [x]"}},
		{name: "not of and", spec: oc(`{"not":{"and":[{"key":"status.a","value":1},{"key":"status.b","value":2}]}}`),
			obj: `{"status":{"a":1,"b":3}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "not of and that holds", spec: oc(`{"not":{"and":[{"key":"status.a","value":1},{"key":"status.b","value":2}]}}`),
			obj: `{"status":{"a":1,"b":2}}`, outcome: Processing, status: "Unknown", reason: "ConditionNotMet"},
		{name: "or of and and not", spec: oc(`{"or":[{"and":[{"key":"status.a","value":1},{"key":"status.b","value":2}]},{"not":{"key":"status.c","value":"bad"}}]}`),
			obj: `{"status":{"a":1,"b":0,"c":"good"}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "not not", spec: oc(`{"not":{"not":{"key":"status.a","value":"True"}}}`),
			obj: `{"status":{"a":true}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "nested failed rule holds", spec: ocFailed(`{"or":[{"key":"status.phase","value":"Failed"},{"key":"status.phase","value":"Error"}]}`),
			obj: `{"status":{"phase":"Error"}}`, outcome: Failed, status: "False", reason: "FailedConditionMet",
			msg: []string{"failed condition met", "value at path [status.phase] is [Error]"}},
		{name: "or: true beats undecided", spec: oc(`{"or":[{"key":"status.l[*]","value":1},{"key":"status.b","value":2}]}`),
			obj: `{"status":{"l":[1,1],"b":2}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
		{name: "not of undecided stays undecided", spec: ocFailed(`{"not":{"key":"status.l[*]","value":1}}`),
			obj: `{"status":{"l":[1,2],"done":true}}`, outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"cannot evaluate the failed condition"}},
		{name: "and: false beats undecided", spec: ocFailed(`{"and":[{"key":"status.l[*]","value":1},{"key":"status.b","value":2}]}`),
			obj: `{"status":{"l":[1,2],"b":3,"done":true}}`, outcome: Succeeded, status: "True", reason: "SucceededConditionMet"},
	})
}

func TestObservedMatches(t *testing.T) {
	spec := `{"observedMatches":[{"input":"spec.x","output":"status.y"},{"input":"spec.n","output":"status.n"}]}`
	runEval(t, []evalCase{
		{name: "all match", spec: spec, obj: `{"spec":{"x":"a","n":3},"status":{"y":"a","n":"3"}}`,
			outcome: Succeeded, status: "True", reason: "ObservedMatchesMet",
			msg: []string{"input [spec.x] equals output [status.y]: [a]"}},
		{name: "one differs", spec: spec, obj: `{"spec":{"x":"a","n":3},"status":{"y":"b","n":3}}`,
			outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"input [spec.x] is [a], output [status.y] is [b]"}},
		{name: "output missing", spec: spec, obj: `{"spec":{"x":"a","n":3},"status":{"n":3}}`,
			outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"input [spec.x] is [a], output [status.y] is missing"}},
		{name: "both missing is not a match", spec: spec, obj: `{"spec":{"n":3},"status":{"n":3}}`,
			outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"input [spec.x] is missing, output [status.y] is missing"}},
		{name: "deployment template", kind: api.KindClusterDeploymentTemplate, spec: spec,
			obj:     `{"spec":{"x":{"url":"u"},"n":1},"status":{"y":{"url":"u"},"n":1}}`,
			outcome: Succeeded, status: "True", reason: "ObservedMatchesMet"},
	})
}

func TestHealthRule(t *testing.T) {
	cond := func(typ, status, reason, msg string) string {
		return `{"status":{"conditions":[{"type":"Other","status":"False"},{"type":"` + typ + `","status":"` + status +
			`","reason":"` + reason + `","message":"` + msg + `"}]}}`
	}
	single := `{"healthRule":{"singleConditionType":"Ready"}}`
	multi := `{"healthRule":{"multiMatch":{
		"healthy":{"matchConditions":[{"type":"Ready","status":"True"}]},
		"unhealthy":{"matchFields":[{"key":"status.phase","operator":"In","values":["Failed","Error"],"messagePath":"status.message"}]}}}}`
	multiFields := `{"healthRule":{"multiMatch":{
		"healthy":{"matchConditions":[{"type":"Ready","status":"True"}],
		           "matchFields":[{"key":"status.replicas","operator":"In","values":[3]}]},
		"unhealthy":{"matchConditions":[{"type":"Stalled","status":"True"}]}}}}`
	runEval(t, []evalCase{
		{name: "alwaysHealthy", spec: `{"healthRule":{"alwaysHealthy":{}}}`, obj: `{}`,
			outcome: Succeeded, status: "True", reason: "AlwaysHealthy"},
		{name: "single condition True", spec: single, obj: cond("Ready", "True", "Done", "all good"),
			outcome: Succeeded, status: "True", reason: "ReadyCondition", msg: []string{"condition [Ready] is [True]"}},
		{name: "single condition False", spec: single, obj: cond("Ready", "False", "BuildFailed", "no space left"),
			outcome: Failed, status: "False", reason: "ReadyCondition",
			msg: []string{"condition [Ready] is [False]", "[BuildFailed]", "no space left"}},
		{name: "single condition Unknown", spec: single, obj: cond("Ready", "Unknown", "Building", "step 2"),
			outcome: Processing, status: "Unknown", reason: "ReadyCondition", msg: []string{"[Unknown]", "step 2"}},
		{name: "single condition missing", spec: single, obj: `{"status":{"conditions":[{"type":"Other","status":"True"}]}}`,
			outcome: Processing, status: "Unknown", reason: "ReadyCondition",
			msg: []string{"condition [Ready] not found in status.conditions"}},
		{name: "single condition: conditions not a list", spec: single, obj: `{"status":{"conditions":"Ready"}}`,
			outcome: Processing, status: "Unknown", reason: "ReadyCondition"},
		{name: "single condition with an odd type name", spec: `{"healthRule":{"singleConditionType":"a\"b]"}}`,
			obj:     `{"status":{"conditions":[{"type":"a\"b]","status":"True"}]}}`,
			outcome: Succeeded, status: "True", reason: `a"b]Condition`},

		{name: "multi: healthy condition", spec: multi, obj: cond("Ready", "True", "", ""),
			outcome: Succeeded, status: "True", reason: "MatchedCondition", msg: []string{"condition status: True, message: "}},
		{name: "multi: unhealthy field with messagePath", spec: multi,
			obj:     `{"status":{"phase":"Error","message":"image pull failed","conditions":[{"type":"Ready","status":"True"}]}}`,
			outcome: Failed, status: "False", reason: "MatchedField", msg: []string{"image pull failed"}},
		{name: "multi: unhealthy field, messagePath missing", spec: multi, obj: `{"status":{"phase":"Failed"}}`,
			outcome: Failed, status: "False", reason: "MatchedField",
			msg: []string{"field value: Failed, message: unknown, error retrieving message path [status.message]"}},
		{name: "multi: nothing yet", spec: multi, obj: `{"status":{"phase":"Running"}}`,
			outcome: Processing, status: "Unknown", reason: "NoMatchesFulfilled",
			msg: []string{"expected condition [Ready] to be [True], but it is not in status.conditions"}},
		{name: "multi: all healthy incl. field, said by the first matcher", spec: multiFields,
			obj:     `{"status":{"replicas":"3","conditions":[{"type":"Ready","status":"True","message":"up"}]}}`,
			outcome: Succeeded, status: "True", reason: "MatchedCondition", msg: []string{"condition status: True, message: up"}},
		{name: "multi: only some healthy", spec: multiFields,
			obj:     `{"status":{"replicas":2,"conditions":[{"type":"Ready","status":"True"}]}}`,
			outcome: Processing, status: "Unknown", reason: "NoMatchesFulfilled",
			msg: []string{"expected field [status.replicas] In [3], found value at path [status.replicas] is [2]"}},
		{name: "multi: unhealthy condition wins over healthy", spec: multiFields,
			obj:     `{"status":{"replicas":3,"conditions":[{"type":"Ready","status":"True"},{"type":"Stalled","status":"True","message":"quota exceeded"}]}}`,
			outcome: Failed, status: "False", reason: "MatchedCondition", msg: []string{"condition status: True, message: quota exceeded"}},
		{name: "multi: condition status compares case-insensitively", spec: multi, obj: cond("Ready", "true", "", ""),
			outcome: Succeeded, status: "True", reason: "MatchedCondition"},
		{name: "multi: healthy messagePath is the message", spec: `{"healthRule":{"multiMatch":{
			"healthy":{"matchFields":[{"key":"status.url","operator":"Exists","messagePath":"status.url"}]},
			"unhealthy":{}}}}`,
			obj: `{"status":{"url":"https://x"}}`, outcome: Succeeded, status: "True", reason: "MatchedField",
			msg: []string{"field value: https://x, message: https://x"}},
		// Cartographer's own suite pins this text (supplychain/workload-status).
		{name: "multi: field value and message, Cartographer's words", spec: `{"healthRule":{"multiMatch":{
			"healthy":{"matchFields":[{"key":"data.player_loves","operator":"In","values":["knitting"],"messagePath":"metadata.name"}]},
			"unhealthy":{"matchFields":[{"key":"data.player_loves","operator":"NotIn","values":["knitting"],"messagePath":"metadata.name"}]}}}}`,
			obj: `{"metadata":{"name":"example-config-configmap"},"data":{"player_loves":"knitting"}}`, outcome: Succeeded, status: "True", reason: "MatchedField",
			msg: []string{"field value: knitting, message: example-config-configmap"}},
		{name: "multi: field without messagePath", spec: `{"healthRule":{"multiMatch":{
			"healthy":{"matchFields":[{"key":"status.n","operator":"Exists"}]},"unhealthy":{}}}}`,
			obj: `{"status":{"n":3}}`, outcome: Succeeded, status: "True", reason: "MatchedField", msg: []string{"field value: 3"}},
	})
}

// shadow: true makes a healthRule a success rule: it holds only once the
// object reports on its current spec; without it, Cartographer's rule reads
// the conditions as they are.
func TestHealthRuleWithShadowWaitsForObservedGeneration(t *testing.T) {
	stale := `{"metadata":{"generation":3},"status":{"observedGeneration":2,"conditions":[{"type":"Ready","status":"False"}]}}`
	current := `{"metadata":{"generation":3},"status":{"observedGeneration":3,"conditions":[{"type":"Ready","status":"False"}]}}`
	unreported := `{"metadata":{"generation":3},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`
	runEval(t, []evalCase{
		{name: "shadow: true, stale status", spec: `{"shadow":true,"healthRule":{"singleConditionType":"Ready"}}`, obj: stale,
			outcome: Processing, status: "Unknown", reason: ReasonConditionNotMet,
			msg: []string{"waiting for status.observedGeneration [2] to equal metadata.generation [3]"}},
		{name: "shadow: true, current status", spec: `{"shadow":true,"healthRule":{"singleConditionType":"Ready"}}`, obj: current,
			outcome: Failed, status: "False", reason: "ReadyCondition"},
		{name: "shadow: true, no observedGeneration: the conditions decide", spec: `{"shadow":true,"healthRule":{"singleConditionType":"Ready"}}`, obj: unreported,
			outcome: Succeeded, status: "True", reason: "ReadyCondition"},
		{name: "Cartographer's healthRule reads a stale status as it is", spec: `{"healthRule":{"singleConditionType":"Ready"}}`, obj: stale,
			outcome: Failed, status: "False", reason: "ReadyCondition"},
		{name: "shadow: false keeps Cartographer's rule", spec: `{"shadow":false,"healthRule":{"singleConditionType":"Ready"}}`, obj: stale,
			outcome: Failed, status: "False", reason: "ReadyCondition"},
	})
}

func TestMatchFieldOperators(t *testing.T) {
	mm := func(op, values string) string {
		return `{"healthRule":{"multiMatch":{"healthy":{"matchFields":[{"key":"status.a","operator":"` + op + `"` + values + `}]},"unhealthy":{}}}}`
	}
	cases := []struct {
		op, values, obj string
		want            Outcome
	}{
		{"In", `,"values":["x","y"]`, `{"status":{"a":"y"}}`, Succeeded},
		{"In", `,"values":["x","y"]`, `{"status":{"a":"z"}}`, Processing},
		{"In", `,"values":["x"]`, `{"status":{}}`, Processing},
		{"In", `,"values":[true]`, `{"status":{"a":"True"}}`, Succeeded},
		{"In", `,"values":[null]`, `{"status":{"a":null}}`, Succeeded},
		{"NotIn", `,"values":["x"]`, `{"status":{"a":"y"}}`, Succeeded},
		{"NotIn", `,"values":["x"]`, `{"status":{"a":"x"}}`, Processing},
		{"NotIn", `,"values":["x"]`, `{"status":{}}`, Succeeded},
		{"Exists", ``, `{"status":{"a":null}}`, Succeeded},
		{"Exists", ``, `{"status":{}}`, Processing},
		{"DoesNotExist", ``, `{"status":{}}`, Succeeded},
		{"DoesNotExist", ``, `{"status":{"a":1}}`, Processing},
	}
	for _, tc := range cases {
		r := Evaluate(decodeSpec(t, mm(tc.op, tc.values)), api.KindClusterConfigTemplate, []byte(tc.obj), nil)
		assert.Equal(t, tc.want, r.Outcome, "%s %s on %s: %s", tc.op, tc.values, tc.obj, r.Message)
	}
}

func TestAlwaysSuccessfulAndPrecedence(t *testing.T) {
	failing := `{"status":{"phase":"Failed","conditions":[{"type":"Ready","status":"False"}]},"spec":{"x":1}}`
	runEval(t, []evalCase{
		{name: "alwaysSuccessful", spec: `{"alwaysSuccessful":true}`, obj: `{}`,
			outcome: Succeeded, status: "True", reason: "AlwaysHealthy"},
		{name: "alwaysSuccessful beats observedCompletion",
			spec: `{"alwaysSuccessful":true,"observedCompletion":{"succeeded":{"key":"status.phase","value":"Done"},"failed":{"key":"status.phase","value":"Failed"}}}`,
			obj:  failing, outcome: Succeeded, status: "True", reason: "AlwaysHealthy"},
		{name: "observedCompletion beats observedMatches and healthRule",
			spec: `{"observedCompletion":{"succeeded":{"key":"status.phase","value":"Done"},"failed":{"key":"status.phase","value":"Failed"}},
				"observedMatches":[{"input":"spec.x","output":"spec.x"}],"healthRule":{"alwaysHealthy":{}}}`,
			obj: failing, outcome: Failed, status: "False", reason: "FailedConditionMet"},
		{name: "observedMatches beats healthRule",
			spec: `{"observedMatches":[{"input":"spec.x","output":"spec.x"}],"healthRule":{"singleConditionType":"Ready"}}`,
			obj:  failing, outcome: Succeeded, status: "True", reason: "ObservedMatchesMet"},
		{name: "healthRule beats the default", spec: `{"healthRule":{"singleConditionType":"Ready"}}`,
			obj: failing, outcome: Failed, status: "False", reason: "ReadyCondition"},
		{name: "healthRule beats the lifecycle's default", spec: `{"lifecycle":"tekton","healthRule":{"alwaysHealthy":{}}}`,
			def: tekton, obj: failing, outcome: Succeeded, status: "True", reason: "AlwaysHealthy"},
	})
}

func TestDefaultRule(t *testing.T) {
	other := errors.New("boom")
	notFound := &paths.NotFoundError{Path: "status.artifact.url"}
	runEval(t, []evalCase{
		{name: "ClusterTemplate", kind: api.KindClusterTemplate, spec: `{}`, obj: `{}`, outErr: notFound,
			outcome: Succeeded, status: "True", reason: "AlwaysHealthy"},
		{name: "outputs available", kind: api.KindClusterImageTemplate, spec: `{}`, obj: `{}`,
			outcome: Succeeded, status: "True", reason: "OutputsAvailable"},
		{name: "outputs not yet", kind: api.KindClusterSourceTemplate, spec: `{}`, obj: `{}`, outErr: notFound,
			outcome: Processing, status: "Unknown", reason: "OutputNotAvailable", msg: []string{"status.artifact.url"}},
		{name: "wrapped not found", kind: api.KindClusterConfigTemplate, spec: `{}`, obj: `{}`,
			outErr: errors.Join(errors.New("config"), notFound), outcome: Processing, status: "Unknown",
			reason: "OutputNotAvailable", msg: []string{"waiting for outputs"}},
		{name: "other output error", kind: api.KindClusterConfigTemplate, spec: `{}`, obj: `{}`, outErr: other,
			outcome: Processing, status: "Unknown", reason: "OutputNotAvailable", msg: []string{"cannot read outputs: boom"}},
		{name: "tekton reads Succeeded", kind: api.KindClusterTemplate, spec: `{"lifecycle":"tekton"}`, def: tekton,
			obj:     `{"status":{"conditions":[{"type":"Succeeded","status":"False","message":"step failed"}]}}`,
			outcome: Failed, status: "False", reason: "SucceededCondition", msg: []string{"step failed"}},
		{name: "tekton running", kind: api.KindClusterTemplate, spec: `{"lifecycle":"tekton"}`, def: tekton,
			obj:     `{"status":{"conditions":[{"type":"Succeeded","status":"Unknown"}]}}`,
			outcome: Processing, status: "Unknown", reason: "SucceededCondition"},
	})
}

func TestNoObjectAndOddDocuments(t *testing.T) {
	spec := decodeSpec(t, `{"observedCompletion":{"succeeded":{"key":"status.a","value":1},"failed":{"key":"status.a","value":2}}}`)
	for _, obj := range [][]byte{nil, {}, []byte("  "), []byte("null")} {
		r := Evaluate(spec, api.KindClusterSourceTemplate, obj, nil)
		assert.Equal(t, Result{Outcome: Processing, Status: "Unknown", Reason: "NoStampedObject",
			Message: "no object has been stamped yet", HasRule: true, CanFail: true}, r, "%q", obj)
	}
	r := Evaluate(spec, api.KindClusterSourceTemplate, []byte(`{"status":`), nil)
	assert.Equal(t, "InvalidObject", r.Reason)
	assert.Equal(t, Processing, r.Outcome)
	for _, obj := range []string{`[1,2]`, `3`, `"s"`, `true`, `{"status":null}`, `{"status":[1]}`} {
		r := Evaluate(spec, api.KindClusterSourceTemplate, []byte(obj), nil)
		assert.Equal(t, Processing, r.Outcome, obj)
		assert.Equal(t, "ConditionNotMet", r.Reason, obj)
	}
	// A nil spec is the default rule.
	r = Evaluate(nil, api.KindClusterTemplate, []byte(`{}`), nil)
	assert.Equal(t, Result{Outcome: Succeeded, Status: "True", Reason: "AlwaysHealthy", Message: r.Message}, r)
}

func TestHasRuleCanFail(t *testing.T) {
	cases := []struct {
		spec             string
		hasRule, canFail bool
		def              *api.HealthRule
	}{
		{`{}`, false, false, nil},
		{`{"lifecycle":"tekton"}`, false, true, tekton},
		{`{"lifecycle":"tekton"}`, false, false, nil},
		{`{"alwaysSuccessful":true}`, true, false, nil},
		{`{"healthRule":{"alwaysHealthy":{}}}`, true, false, nil},
		{`{"healthRule":{"singleConditionType":"Ready"}}`, true, true, nil},
		{`{"healthRule":{"multiMatch":{"healthy":{"matchConditions":[{"type":"Ready","status":"True"}]},"unhealthy":{}}}}`, true, false, nil},
		{`{"healthRule":{"multiMatch":{"healthy":{"matchConditions":[{"type":"Ready","status":"True"}]},"unhealthy":{"matchConditions":[{"type":"Ready","status":"False"}]}}}}`, true, true, nil},
		{`{"observedCompletion":{"succeeded":{"key":"a","value":1}}}`, true, false, nil},
		{`{"observedCompletion":{"succeeded":{"key":"a","value":1},"failed":{"key":"a","value":2}}}`, true, true, nil},
		{`{"observedMatches":[{"input":"a","output":"b"}]}`, true, false, nil},
		{`{"alwaysSuccessful":true,"healthRule":{"singleConditionType":"Ready"}}`, true, false, nil},
	}
	for _, tc := range cases {
		for _, obj := range []string{"", `{}`} {
			r := EvaluateWith(decodeSpec(t, tc.spec), tc.def, api.KindClusterSourceTemplate, []byte(obj), nil)
			assert.Equal(t, tc.hasRule, r.HasRule, "HasRule %s", tc.spec)
			assert.Equal(t, tc.canFail, r.CanFail, "CanFail %s", tc.spec)
		}
	}
}

func TestInvalidRuleAtEvaluate(t *testing.T) {
	runEval(t, []evalCase{
		{name: "bad path", spec: `{"observedCompletion":{"succeeded":{"key":"status.[","value":1}}}`, obj: `{}`,
			outcome: Processing, status: "Unknown", reason: "InvalidRule", msg: []string{"observedCompletion.succeeded[0].key", "invalid path"}},
		{name: "invalid even without object", spec: `{"observedMatches":[{"input":"spec.[x","output":"status.y"}]}`,
			outcome: Processing, status: "Unknown", reason: "InvalidRule", msg: []string{"observedMatches[0].input"}},
		{name: "empty healthRule", spec: `{"healthRule":{}}`, obj: `{}`,
			outcome: Processing, status: "Unknown", reason: "InvalidRule", msg: []string{"healthRule"}},
	})
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name, kind, spec string
		errs             []string // substrings; none means valid
	}{
		{name: "empty spec", spec: `{}`},
		{name: "nested rules", spec: `{"observedCompletion":{"succeeded":[{"or":[{"key":"a","value":1},{"not":{"and":[{"key":"b","value":2}]}}]}],"failed":{"key":"c","value":true}}}`},
		{name: "deployment with observedMatches", kind: api.KindClusterDeploymentTemplate,
			spec: `{"observedMatches":[{"input":"spec.a","output":"status.a"}]}`},
		{name: "deployment with alwaysSuccessful", kind: api.KindClusterDeploymentTemplate, spec: `{"alwaysSuccessful":true}`},
		{name: "deployment without rule", kind: api.KindClusterDeploymentTemplate, spec: `{}`,
			errs: []string{"needs exactly one of observedMatches or observedCompletion"}},
		{name: "deployment with both", kind: api.KindClusterDeploymentTemplate,
			spec: `{"observedMatches":[{"input":"a","output":"b"}],"observedCompletion":{"succeeded":{"key":"a","value":1}}}`,
			errs: []string{"not both"}},
		{name: "empty succeeded", spec: `{"observedCompletion":{"succeeded":[]}}`,
			errs: []string{"observedCompletion.succeeded: must have at least one rule"}},
		{name: "missing succeeded", spec: `{"observedCompletion":{"failed":{"key":"a","value":1}}}`,
			errs: []string{"observedCompletion.succeeded: must have at least one rule"}},
		{name: "key and or", spec: `{"observedCompletion":{"succeeded":{"key":"a","value":1,"or":[{"key":"b","value":1}]}}}`,
			errs: []string{"observedCompletion.succeeded[0]: a rule has either key"}},
		{name: "and and or", spec: `{"observedCompletion":{"succeeded":{"and":[{"key":"a","value":1}],"or":[{"key":"b","value":1}]}}}`,
			errs: []string{"observedCompletion.succeeded[0]: a rule has exactly one of and/or/not"}},
		{name: "empty rule", spec: `{"observedCompletion":{"succeeded":{"value":1}}}`,
			errs: []string{"observedCompletion.succeeded[0]: a rule needs key"}},
		{name: "deep bad path", spec: `{"observedCompletion":{"succeeded":{"key":"a","value":1},"failed":{"or":[{"key":"a","value":1},{"not":{"key":"a[","value":2}}]}}}`,
			errs: []string{"observedCompletion.failed[0].or[1].not.key: invalid path"}},
		{name: "observedMatches empty output", spec: `{"observedMatches":[{"input":"a"}]}`,
			errs: []string{"observedMatches[0].output: must not be empty"}},
		{name: "healthRule two fields", spec: `{"healthRule":{"alwaysHealthy":{},"singleConditionType":"Ready"}}`,
			errs: []string{"healthRule: set exactly one", "found 2"}},
		{name: "multiMatch empty healthy", spec: `{"healthRule":{"multiMatch":{"healthy":{},"unhealthy":{}}}}`,
			errs: []string{"healthRule.multiMatch.healthy: needs at least one"}},
		{name: "multiMatch bad fields", spec: `{"healthRule":{"multiMatch":{
			"healthy":{"matchConditions":[{"type":"","status":"True"}],"matchFields":[{"key":"a","operator":"Equals","values":[1]}]},
			"unhealthy":{"matchFields":[{"key":"b","operator":"In"},{"key":"c","operator":"Exists","values":[1],"messagePath":"x["}]}}}}`,
			errs: []string{
				"healthRule.multiMatch.healthy.matchConditions[0].type: must not be empty",
				"healthRule.multiMatch.healthy.matchFields[0].operator: unknown operator [Equals]",
				"healthRule.multiMatch.unhealthy.matchFields[0].values: operator In needs at least one value",
				"healthRule.multiMatch.unhealthy.matchFields[1].values: operator Exists takes no values",
				"healthRule.multiMatch.unhealthy.matchFields[1].messagePath: invalid path",
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kind := tc.kind
			if kind == "" {
				kind = api.KindClusterSourceTemplate
			}
			err := Validate(decodeSpec(t, tc.spec), kind)
			if len(tc.errs) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, e := range tc.errs {
				assert.Contains(t, err.Error(), e)
			}
		})
	}
	assert.NoError(t, Validate(nil, api.KindClusterTemplate))
}

func TestDeepAndCyclicRules(t *testing.T) {
	// A rule cycle can only be built in code; it must not hang or overflow.
	r := api.Rule{}
	r.Not = &r
	spec := &api.TemplateSpec{ObservedCompletion: &api.ObservedCompletion{Succeeded: api.Rules{r}}}
	require.Error(t, Validate(spec, api.KindClusterSourceTemplate))
	res := Evaluate(spec, api.KindClusterSourceTemplate, []byte(`{}`), nil)
	assert.Equal(t, "InvalidRule", res.Reason)
	assert.Contains(t, res.Message, "deeper than")
}

func TestShowAndNumbers(t *testing.T) {
	s := show(strings.Repeat("é", 300))
	assert.LessOrEqual(t, len(s), maxShown+len("…"))
	assert.True(t, utf8.ValidString(s), "cut inside a rune")
	assert.True(t, strings.HasSuffix(s, "…"))
	assert.Equal(t, "null", show(nil))
	assert.Equal(t, `{"a":[1,true]}`, show(map[string]any{"a": []any{int64(1), true}}))
	assert.True(t, ValuesEqual(uint64(7), "7"))
	assert.True(t, ValuesEqual(uint64(1<<63), float64(1<<63)))
	assert.True(t, ValuesEqual(float32(1.5), "1.5"))
	assert.False(t, ValuesEqual(1.5, int64(1)))
	assert.False(t, ValuesEqual(1e300, int64(1)))
}

func TestUndecidedPaths(t *testing.T) {
	runEval(t, []evalCase{
		{name: "observedMatches with several values", spec: `{"observedMatches":[{"input":"spec.l[*]","output":"status.y"}]}`,
			obj: `{"spec":{"l":[1,2]},"status":{"y":1}}`, outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"input [spec.l[*]] cannot be read", "yields 2 values"}},
		{name: "multiMatch with several values never succeeds", spec: `{"healthRule":{"multiMatch":{
			"healthy":{"matchFields":[{"key":"status.l[*]","operator":"In","values":[1]}]},"unhealthy":{}}}}`,
			obj: `{"status":{"l":[1,1]}}`, outcome: Processing, status: "Unknown", reason: "NoMatchesFulfilled",
			msg: []string{"cannot evaluate", "yields 2 values"}},
		{name: "unhealthy undecided blocks success", spec: `{"healthRule":{"multiMatch":{
			"healthy":{"matchFields":[{"key":"status.ok","operator":"Exists"}]},
			"unhealthy":{"matchFields":[{"key":"status.l[*]","operator":"In","values":["bad"]}]}}}}`,
			obj: `{"status":{"ok":1,"l":[1,2]}}`, outcome: Processing, status: "Unknown", reason: "NoMatchesFulfilled"},
		{name: "succeeded undecided", spec: `{"observedCompletion":{"succeeded":{"key":"status.l[*]","value":1}}}`,
			obj: `{"status":{"l":[1,1]}}`, outcome: Processing, status: "Unknown", reason: "ConditionNotMet",
			msg: []string{"cannot evaluate the succeeded condition"}},
	})
}

// A ClusterDeploymentTemplate's observedCompletion needs the object to report
// status.observedGeneration (Cartographer's rule); other kinds skip the check
// when the object does not report it.
func TestObservedGenerationRequiredForDeployments(t *testing.T) {
	spec := &api.TemplateSpec{ObservedCompletion: &api.ObservedCompletion{
		Succeeded: api.Rules{{Key: "status.phase", Value: "Done"}},
	}}
	noObserved := []byte(`{"metadata":{"generation":2},"status":{"phase":"Done"}}`)
	observed := []byte(`{"metadata":{"generation":2},"status":{"phase":"Done","observedGeneration":2}}`)

	r := Evaluate(spec, api.KindClusterDeploymentTemplate, noObserved, nil)
	assert.Equal(t, Processing, r.Outcome)
	assert.Contains(t, r.Message, "status.observedGeneration")
	assert.Equal(t, Succeeded, Evaluate(spec, api.KindClusterDeploymentTemplate, observed, nil).Outcome)
	assert.Equal(t, Succeeded, Evaluate(spec, api.KindClusterImageTemplate, noObserved, nil).Outcome)
}
