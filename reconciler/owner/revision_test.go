package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/specs"
)

// chooseDefs: the owner walks the live definitions without a policy, else
// the revision the roll-out gives it (read from the chain's status), and
// records it.
func TestChooseDefs(t *testing.T) {
	step := func(tmpl string) []any {
		return []any{map[string]any{"name": "cfg", "templateRef": map[string]any{"kind": api.KindClusterTemplate, "name": tmpl}}}
	}
	rev := func(name, tmpl, data string) map[string]any {
		return map[string]any{"name": name, "chain": map[string]any{"resources": step(tmpl)},
			"templates": []any{map[string]any{"kind": api.KindClusterTemplate, "name": tmpl, "spec": map[string]any{
				"template": map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"v": data}}}}}}
	}
	policy := map[string]any{"waves": []any{map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"canary": "true"}}}}}
	status := map[string]any{"rollout": map[string]any{"stable": "A", "target": "B", "wave": int64(0),
		"revisions": []any{rev("A", "old", "1"), rev("B", "new", "2"), rev("X", "older", "0")}}}
	for _, tt := range []struct {
		name     string
		policy   bool
		status   bool
		labels   map[string]string
		recorded string
		// want
		revision string
		tmpl     string // the template the step names
		data     string
	}{
		{name: "no policy: live", status: true, labels: map[string]string{"canary": "true"}, tmpl: "live"},
		{name: "no roll-out state yet: live", policy: true, recorded: "A", tmpl: "live"},
		{name: "admitted: the target", policy: true, status: true, labels: map[string]string{"canary": "true"}, revision: "B", tmpl: "new", data: "2"},
		{name: "not admitted: stable", policy: true, status: true, revision: "A", tmpl: "old", data: "1"},
		{name: "not admitted keeps its own", policy: true, status: true, recorded: "X", revision: "X", tmpl: "older", data: "0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := map[string]any{"resources": step("live")}
			if tt.policy {
				spec["rollout"] = policy
			}
			obj := map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": api.KindClusterSupplyChain,
				"metadata": map[string]any{"name": "web", "resourceVersion": "7"}, "spec": spec}
			if tt.status {
				obj["status"] = status
			}
			own := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "app", "namespace": "dev"}}}
			own.SetLabels(tt.labels)
			env := Env{Flavor: api.WorkloadFlavor, Templates: templates{}, revs: newRevisionBook()}
			chains := []*unstructured.Unstructured{{Object: obj}}
			live := &specs.Chain{Name: "web", RV: "7", Spec: api.ChainSpec{Resources: []api.Step{{Name: "cfg", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Name: "live"}}}}}
			defs, recorded := chooseDefs(&env, chains, live, own, tt.recorded)
			assert.Equal(t, tt.revision, defs.revision)
			assert.Equal(t, tt.revision, recorded, "recorded")
			require.Len(t, defs.spec.Resources, 1)
			assert.Equal(t, tt.tmpl, defs.spec.Resources[0].TemplateRef.Name)
			if tt.revision == "" {
				return
			}
			assert.True(t, defs.exists(api.KindClusterTemplate, tt.tmpl))
			assert.False(t, defs.exists(api.KindClusterTemplate, "live"), "a revision's templates only")
			ts, err := defs.template(api.KindClusterTemplate, tt.tmpl)
			require.NoError(t, err)
			assert.Equal(t, tt.data, ts.Template["data"].(map[string]any)["v"])
			_, err = defs.template(api.KindClusterTemplate, "live")
			assert.ErrorContains(t, err, "not found in revision "+tt.revision)
		})
	}
}
