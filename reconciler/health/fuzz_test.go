package health

import (
	"testing"

	"kontinue.dev/kontinue/reconciler/api"
)

// FuzzEvaluate feeds arbitrary object documents and rule keys (both written
// by users: the object by a controller, the key by a template author) through
// every rule kind. Evaluate must not panic and must return a consistent
// Result.
func FuzzEvaluate(f *testing.F) {
	seeds := []struct{ obj, key string }{
		{`{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`, `status.conditions[?(@.type=="Ready")].status`},
		{`{"metadata":{"generation":2},"status":{"observedGeneration":1}}`, `.status.observedGeneration`},
		{`{"status":{"l":[1,2,3]}}`, `status.l[*]`},
		{`{"metadata":{"labels":{"a.b/c":"x"}}}`, `metadata.labels['a.b/c']`},
		{`[1,2]`, `[0]`},
		{`null`, `a`},
		{`{"status":`, `status`},
		{`"str"`, ``},
		{`{"status":{"conditions":"x"}}`, `status.conditions[-1]`},
	}
	for _, s := range seeds {
		f.Add([]byte(s.obj), s.key)
	}
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		specs := []*api.TemplateSpec{
			{ObservedCompletion: &api.ObservedCompletion{
				Succeeded: api.Rules{{Key: key, Value: "True"}},
				Failed:    api.Rules{{Or: api.Rules{{Key: key, Value: int64(3)}, {Not: &api.Rule{Key: key, Value: nil}}}}},
			}},
			{ObservedMatches: []api.ObservedMatch{{Input: key, Output: "status.a"}}},
			{HealthRule: &api.HealthRule{SingleConditionType: key}},
			{HealthRule: &api.HealthRule{MultiMatch: &api.MultiMatch{
				Healthy: api.MatchSet{
					MatchConditions: []api.ConditionMatch{{Type: key, Status: "True"}},
					MatchFields:     []api.FieldRequirement{{Key: key, Operator: api.OpIn, Values: []any{"a", 1.5}, MessagePath: key}},
				},
				Unhealthy: api.MatchSet{MatchFields: []api.FieldRequirement{
					{Key: key, Operator: api.OpExists, MessagePath: key},
					{Key: key, Operator: api.OpNotIn, Values: []any{true}},
				}},
			}}},
			{Lifecycle: api.LifecycleTekton},
			{},
		}
		for _, spec := range specs {
			var def *api.HealthRule
			if spec.Lifecycle == api.LifecycleTekton {
				def = tekton // the lifecycle's default rule
			}
			for _, kind := range []string{api.KindClusterTemplate, api.KindClusterDeploymentTemplate} {
				r := EvaluateWith(spec, def, kind, obj, nil)
				want := map[Outcome]string{Processing: StatusUnknown, Succeeded: StatusTrue, Failed: StatusFalse}[r.Outcome]
				if want == "" || r.Status != want {
					t.Fatalf("outcome %v with status %q", r.Outcome, r.Status)
				}
				if r.Reason == "" || r.Message == "" {
					t.Fatalf("empty reason or message: %+v", r)
				}
				if r.Outcome == Failed && !r.CanFail {
					t.Fatalf("failed although the rule cannot fail: %+v", r)
				}
			}
		}
	})
}
