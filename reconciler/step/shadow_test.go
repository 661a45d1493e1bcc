package step

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

func TestShadowName(t *testing.T) {
	assert.Equal(t, "app-build-last-good", ShadowName("app-build"))
	long := strings.Repeat("a", 60)
	n := ShadowName(long)
	assert.LessOrEqual(t, len(n), maxNameLen)
	assert.True(t, strings.HasSuffix(n, shadowSuffix))
	assert.NotEqual(t, n, ShadowName(strings.Repeat("a", 61)), "different primaries get different shadows")
	assert.Equal(t, n, ShadowName(long), "stable")
	dashy := strings.Repeat("a", 40) + "-" + strings.Repeat("b", 30)
	assert.NotContains(t, ShadowName(dashy), "--", "no separator pile-up at the cut")
}

func TestShadowCapable(t *testing.T) {
	no, yes := false, true
	failing := &api.ObservedCompletion{Succeeded: api.Rules{{Key: "a", Value: "b"}}, Failed: api.Rules{{Key: "a", Value: "c"}}}
	succeedOnly := &api.ObservedCompletion{Succeeded: api.Rules{{Key: "a", Value: "b"}}}
	cases := []struct {
		name string
		kind string
		spec api.TemplateSpec
		want bool
	}{
		{"failure rule", api.KindClusterImageTemplate, api.TemplateSpec{ObservedCompletion: failing}, true},
		{"no failure rule: the progress deadline fails it", api.KindClusterImageTemplate, api.TemplateSpec{ObservedCompletion: succeedOnly}, true},
		{"observedMatches: the progress deadline fails it", api.KindClusterImageTemplate, api.TemplateSpec{ObservedMatches: []api.ObservedMatch{{Input: "a", Output: "b"}}}, true},
		{"alwaysSuccessful never fails", api.KindClusterImageTemplate, api.TemplateSpec{AlwaysSuccessful: true}, false},
		{"healthRule only: not gated, Cartographer's behaviour", api.KindClusterImageTemplate, api.TemplateSpec{HealthRule: &api.HealthRule{SingleConditionType: "Ready"}}, false},
		{"healthRule with shadow: true", api.KindClusterImageTemplate, api.TemplateSpec{HealthRule: &api.HealthRule{SingleConditionType: "Ready"}, Shadow: &yes}, true},
		{"healthRule multiMatch with shadow: true", api.KindClusterSourceTemplate, api.TemplateSpec{HealthRule: &api.HealthRule{MultiMatch: &api.MultiMatch{}}, Shadow: &yes}, true},
		{"healthRule with shadow: false", api.KindClusterImageTemplate, api.TemplateSpec{HealthRule: &api.HealthRule{SingleConditionType: "Ready"}, Shadow: &no}, false},
		{"shadow: true without any rule: nothing to fail", api.KindClusterImageTemplate, api.TemplateSpec{Shadow: &yes}, false},
		{"healthRule with shadow: true, deployment", api.KindClusterDeploymentTemplate, api.TemplateSpec{HealthRule: &api.HealthRule{SingleConditionType: "Ready"}, Shadow: &yes}, false},
		{"opted out", api.KindClusterImageTemplate, api.TemplateSpec{ObservedCompletion: failing, Shadow: &no}, false},
		{"immutable", api.KindClusterImageTemplate, api.TemplateSpec{ObservedCompletion: failing, Lifecycle: api.LifecycleTekton}, false},
		{"deployment", api.KindClusterDeploymentTemplate, api.TemplateSpec{ObservedCompletion: failing}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, ShadowCapable(c.kind, &c.spec)) })
	}
}

func TestShadowLifecycle(t *testing.T) {
	lastGood := object("app", "d0", nil).Object
	shadowRef := &st.StampedRef{APIVersion: "kpack.io/v1alpha2", Kind: "Image", Namespace: "ns", Name: "app-last-good"}
	tests := []struct {
		name     string
		state    State
		live     *unstructured.Unstructured
		want     bool   // a shadow is wanted
		ref      bool   // the step keeps its shadow ref (else it is removed as an orphan)
		servedBy string // before WithShadow
	}{
		{"failed on new inputs: shadow from the last good set", State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: lastGood},
			object("app", "d1", failedOn()), true, false, ServedByPrimary},
		{"no input set ever succeeded: no shadow", State{}, object("app", "d1", failedOn()), false, false, ServedByPrimary},
		{"failed on the last good inputs: external, no shadow", State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: lastGood},
			object("app", "d0", failedOn()), false, false, ServedByPrimary},
		{"a shadow stays while the primary works on new inputs", State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: lastGood, ShadowRef: shadowRef},
			object("app", "d1", processing()), true, true, ServedByPrimary},
		{"primary recovers: shadow removed", State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: lastGood, ShadowRef: shadowRef, ServedBy: ServedByShadow},
			object("app", "d1", succeededOn("img@d1")), false, false, ServedByPrimary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ob := Observe(observed(gatedSpec(), "d1", tt.state), tt.live, false)
			assert.Equal(t, tt.want, ob.ShadowWant != nil)
			assert.Equal(t, tt.ref, ob.State.ShadowRef != nil)
			assert.Equal(t, tt.servedBy, ob.State.ServedBy)
			if ob.ShadowWant != nil {
				assert.Equal(t, "app-last-good", ob.ShadowWant.GetName())
				assert.Equal(t, "true", ob.ShadowWant.GetLabels()[ShadowLabel])
				assert.Equal(t, "x", ob.ShadowWant.GetLabels()["app"], "the primary's labels are kept")
				assert.Equal(t, "d0", ob.ShadowWant.GetAnnotations()[AnnotationDigest], "stamped from the last good input set")
				assert.Equal(t, "d0", lastGood["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnotationDigest], "the recorded object is not changed")
			}
		})
	}
}

// The order that matters: outputs are read after the shadow reported.
func TestShadowServesOutputs(t *testing.T) {
	s := State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: object("app", "d0", nil).Object}
	o := observed(gatedSpec(), "d1", s)
	ob := Observe(o, object("app", "d1", failedOn()), false)
	require.NotNil(t, ob.ShadowWant)
	ref := st.StampedRef{Kind: "Image", Namespace: "ns", Name: "app-last-good"}

	served := ob.WithShadow(ref, object("app-last-good", "d0", succeededOn("img@rebased")), o)
	assert.Equal(t, Outputs{"image": "img@rebased"}, served.Outputs(), "a rebased image reaches downstream")
	assert.Equal(t, ServedByShadow, served.State.ServedBy)
	assert.Equal(t, &ref, served.State.ShadowRef)
	assert.Equal(t, st.False, served.Healthy.Status, "Healthy still reports the primary's failure")
	assert.Contains(t, served.Healthy.Message, "outputs served by shadow Image [ns/app-last-good]")
	assert.Equal(t, "d0", served.State.GoodDigest, "outputs stay tied to the last good input set")

	busy := ob.WithShadow(ref, object("app-last-good", "d0", processing()), o)
	assert.Equal(t, Outputs{"image": "img@d0"}, busy.Outputs(), "not in success yet: the last good outputs")
	assert.Equal(t, ServedByPrimary, busy.State.ServedBy)
	assert.Contains(t, busy.Healthy.Message, "is not in success yet")

	failed := ob.ShadowFailed("forbidden")
	assert.Contains(t, failed.Healthy.Message, "shadow could not be stamped: forbidden")
	assert.Equal(t, Outputs{"image": "img@d0"}, failed.Outputs())
	assert.Nil(t, failed.State.ShadowRef)
}

// A healthRule template that opts in (shadow: true) is gated like
// observedCompletion: unhealthy on new inputs wants a shadow from the last
// healthy input set, the shadow serves while healthy, and the primary's
// recovery releases it. The rule is the same for Ready=False as for a
// Tekton-style Succeeded=False.
func TestShadowForHealthRuleFailure(t *testing.T) {
	yes := true
	cond := func(typ, status, image string) map[string]any {
		return map[string]any{"image": image, "conditions": []any{map[string]any{"type": typ, "status": status}}}
	}
	for _, typ := range []string{"Ready", "Succeeded"} {
		t.Run(typ, func(t *testing.T) {
			spec := &api.TemplateSpec{ImagePath: ".status.image", HealthRule: &api.HealthRule{SingleConditionType: typ}, Shadow: &yes}
			good := State{Good: Outputs{"image": "img@d0"}, GoodDigest: "d0", LastGoodObject: object("app", "d0", nil).Object}
			o := observed(spec, "d1", good)

			ob := Observe(o, object("app", "d1", cond(typ, "False", "img@d0")), false)
			require.NotNil(t, ob.ShadowWant, "unhealthy on new inputs: a shadow")
			assert.Equal(t, "app-last-good", ob.ShadowWant.GetName())
			assert.Equal(t, "d0", ob.ShadowWant.GetAnnotations()[AnnotationDigest])
			assert.Equal(t, st.False, ob.Healthy.Status)
			assert.Equal(t, typ+"Condition", ob.Healthy.Reason)
			assert.Equal(t, Outputs{"image": "img@d0"}, ob.Outputs(), "an unhealthy primary's outputs are not passed on")

			ref := st.StampedRef{Kind: "Image", Namespace: "ns", Name: "app-last-good"}
			served := ob.WithShadow(ref, object("app-last-good", "d0", cond(typ, "True", "img@rebased")), o)
			assert.Equal(t, Outputs{"image": "img@rebased"}, served.Outputs())
			assert.Equal(t, ServedByShadow, served.State.ServedBy)

			o.State = served.State
			rec := Observe(o, object("app", "d1", cond(typ, "True", "img@d1")), false)
			assert.Nil(t, rec.ShadowWant, "the primary recovered")
			assert.Nil(t, rec.State.ShadowRef)
			assert.Equal(t, Outputs{"image": "img@d1"}, rec.Outputs())
			assert.Equal(t, "d1", rec.State.GoodDigest)

			ext := Observe(observed(spec, "d0", good), object("app", "d0", cond(typ, "False", "img@d0")), false)
			assert.Nil(t, ext.ShadowWant, "unhealthy on the last good inputs: external, no shadow")
		})
	}
}
