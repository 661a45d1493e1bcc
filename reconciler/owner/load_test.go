package owner

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/specs"
	st "kontinue.dev/kontinue/reconciler/status"
)

// chainObj is a ClusterSupplyChain in the cache.
func chainObj(t *testing.T, name string, spec api.ChainSpec) *unstructured.Unstructured {
	t.Helper()
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": api.KindClusterSupplyChain,
		"metadata": map[string]any{"name": name, "resourceVersion": "1"}, "spec": m}}
	return u
}

// asObject is v as an unstructured object holds it.
func asObject(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// The load stage: the chain chosen by the owner's labels, its templates,
// the account; what fails there is the owner's chain condition and Ready,
// and nothing is written. The cache (chains, templates, accounts) and the
// steps' writes are fakes.
func TestPassLoad(t *testing.T) {
	web := api.ChainSpec{Selector: map[string]string{"app": "web"}, Resources: walkChain}
	withSA := web
	withSA.ServiceAccountRef = &api.ServiceAccountRef{Name: "builder"}
	prevRef := &st.ObjectRef{Kind: api.KindClusterSupplyChain, Name: "before"}
	for _, tt := range []struct {
		name     string
		labels   map[string]string
		spec     any // the owner's spec
		chains   map[string]api.ChainSpec
		missing  map[string]bool // templates not in the cache
		accounts []string        // accounts that exist
		// want
		conds    []string
		chainRef string
		indexed  *Used // what the index is told (nil: nothing)
		written  bool  // the steps ran
		events   int
	}{
		{name: "chosen, ready: the steps run", labels: map[string]string{"app": "web"}, chains: map[string]api.ChainSpec{"web": web},
			accounts: []string{"dev/default"}, written: true, chainRef: "web",
			conds: []string{"SupplyChainReady True Ready", "ResourcesSubmitted True ResourceSubmissionComplete",
				"ResourcesHealthy True HealthyConditionRule", "Ready True Ready"},
			indexed: &Used{Chain: "web", Templates: []TemplateRef{{api.KindClusterSourceTemplate, "src"}, {api.KindClusterImageTemplate, "img"}},
				Account: api.ServiceAccountRef{Namespace: "dev", Name: "default"}}},
		{name: "the chain's service account when the owner names none", labels: map[string]string{"app": "web"},
			chains: map[string]api.ChainSpec{"web": withSA}, accounts: []string{"dev/builder"}, written: true, chainRef: "web",
			conds: []string{"SupplyChainReady True Ready", "ResourcesSubmitted True ResourceSubmissionComplete",
				"ResourcesHealthy True HealthyConditionRule", "Ready True Ready"},
			indexed: &Used{Chain: "web", Templates: []TemplateRef{{api.KindClusterSourceTemplate, "src"}, {api.KindClusterImageTemplate, "img"}},
				Account: api.ServiceAccountRef{Namespace: "dev", Name: "builder"}}},
		{name: "no chain matches: the chain it had stays", labels: map[string]string{"app": "api"}, chains: map[string]api.ChainSpec{"web": web},
			chainRef: "before", conds: []string{"SupplyChainReady False SupplyChainNotFound", "Ready False SupplyChainNotFound"}},
		{name: "two chains equally specific: refused and told", labels: map[string]string{"app": "web"},
			chains:   map[string]api.ChainSpec{"web": web, "web2": web},
			chainRef: "before", events: 1,
			conds: []string{"SupplyChainReady False MultipleSupplyChainMatches", "Ready False MultipleSupplyChainMatches"}},
		{name: "a template missing: indexed first, nothing runs", labels: map[string]string{"app": "web"}, chains: map[string]api.ChainSpec{"web": web},
			missing: map[string]bool{"img": true}, accounts: []string{"dev/default"}, chainRef: "web",
			conds: []string{"SupplyChainReady False TemplatesNotFound", "Ready False TemplatesNotFound"},
			indexed: &Used{Chain: "web", Templates: []TemplateRef{{api.KindClusterSourceTemplate, "src"}, {api.KindClusterImageTemplate, "img"}},
				Account: api.ServiceAccountRef{Namespace: "dev", Name: "default"}}},
		{name: "the account does not exist: nothing is written", labels: map[string]string{"app": "web"}, chains: map[string]api.ChainSpec{"web": web},
			chainRef: "web", events: 1,
			conds: []string{"SupplyChainReady True Ready", "ResourcesSubmitted False ServiceAccountError",
				"ResourcesHealthy True HealthyConditionRule", "Ready False ServiceAccountError"},
			indexed: &Used{Chain: "web", Templates: []TemplateRef{{api.KindClusterSourceTemplate, "src"}, {api.KindClusterImageTemplate, "img"}},
				Account: api.ServiceAccountRef{Namespace: "dev", Name: "default"}}},
		{name: "an unreadable spec", labels: map[string]string{"app": "web"}, spec: "not an object", chains: map[string]api.ChainSpec{"web": web},
			chainRef: "before", conds: []string{"SupplyChainReady False InvalidSpec", "Ready False InvalidSpec"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := world{status: map[string]map[string]any{"source": sourceReady, "image": imageReady}}
			var indexed *Used
			ev := &events{}
			env := Env{Flavor: api.WorkloadFlavor, Events: ev, Templates: templates{missing: tt.missing}, Chains: specs.NewChains(),
				AccountExists: func(ns, name string) bool { return slices.Contains(tt.accounts, ns+"/"+name) },
				Index:         func(_, _ string, u Used) { indexed = &u }}
			own := walkOwner()
			own.SetLabels(tt.labels)
			if tt.spec != nil {
				own.Object["spec"] = tt.spec
			}
			orphan := st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "app-old", Resource: "configmaps"}
			own.Object["status"] = asObject(t, st.OwnerStatus{SupplyChainRef: prevRef,
				GeneratedRunTemplates: []st.GeneratedRunTemplate{{Step: "tests", Name: "kept"}}, Orphans: []st.StampedRef{orphan}})
			var chains []*unstructured.Unstructured
			for n, c := range tt.chains {
				chains = append(chains, chainObj(t, n, c))
			}
			l := load(&env, chains, own, "Workload/dev/app", metav1.NewTime(time.Unix(1000, 0)))
			require.NoError(t, l.err)
			status := fold(&env, l, walked{})
			if l.walk {
				o := &owned{env: &env, l: l, w: &w, x: &ownerIO{ctx: context.Background(), keep: newKeepSet(), owner: own, user: l.user,
					records: &records{prev: l.prev, list: l.status.GeneratedRunTemplates}, steps: newStepObjects(l.defs.spec.Resources, nil, own.GetUID())}}
				_, status = o.steps()
			}
			assert.Equal(t, tt.conds, conds(status))
			require.NotNil(t, status.SupplyChainRef)
			assert.Equal(t, tt.chainRef, status.SupplyChainRef.Name)
			assert.Equal(t, tt.indexed, indexed)
			assert.Equal(t, tt.written, len(w.applied) > 0, "the steps wrote")
			assert.Len(t, *ev, tt.events)
			assert.Equal(t, tt.conds[len(tt.conds)-1] == "Ready False ServiceAccountError", l.noAccount, "cleanup is skipped only without the account")
			assert.Equal(t, "kept", status.GeneratedRunTemplates[0].Name, "records stay until their objects are gone")
			if l.noAccount {
				// The cleanup does not run: the orphans stay named.
				assert.Equal(t, []st.StampedRef{orphan}, status.Orphans)
			}
		})
	}
}
