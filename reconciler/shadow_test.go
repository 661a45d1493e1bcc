package reconciler

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"kontinue.dev/kontinue/reconciler/api"
)

func TestShadowName(t *testing.T) {
	assert.Equal(t, "app-build-last-good", shadowName("app-build"))
	long := strings.Repeat("a", 60)
	n := shadowName(long)
	assert.LessOrEqual(t, len(n), maxNameLen)
	assert.True(t, strings.HasSuffix(n, shadowSuffix))
	assert.NotEqual(t, n, shadowName(strings.Repeat("a", 61)), "different primaries get different shadows")
	assert.Equal(t, n, shadowName(long), "stable")
	dashy := strings.Repeat("a", 40) + "-" + strings.Repeat("b", 30)
	assert.NotContains(t, shadowName(dashy), "--", "no separator pile-up at the cut")
}

func TestShadowCapable(t *testing.T) {
	no := false
	failing := &api.ObservedCompletion{Succeeded: api.Rules{{Key: "a", Value: "b"}}, Failed: api.Rules{{Key: "a", Value: "c"}}}
	succeedOnly := &api.ObservedCompletion{Succeeded: api.Rules{{Key: "a", Value: "b"}}}
	cases := []struct {
		name string
		kind string
		spec api.TemplateSpec
		want bool
	}{
		{"failure rule", api.KindClusterImageTemplate, api.TemplateSpec{ObservedCompletion: failing}, true},
		{"no failure rule", api.KindClusterImageTemplate, api.TemplateSpec{ObservedCompletion: succeedOnly}, false},
		{"opted out", api.KindClusterImageTemplate, api.TemplateSpec{ObservedCompletion: failing, Shadow: &no}, false},
		{"immutable", api.KindClusterImageTemplate, api.TemplateSpec{ObservedCompletion: failing, Lifecycle: api.LifecycleTekton}, false},
		{"deployment", api.KindClusterDeploymentTemplate, api.TemplateSpec{ObservedCompletion: failing}, false},
		{"healthRule only", api.KindClusterImageTemplate, api.TemplateSpec{HealthRule: &api.HealthRule{SingleConditionType: "Ready"}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, shadowCapable(c.kind, &c.spec)) })
	}
}
