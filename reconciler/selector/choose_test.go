package selector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/api"
)

func mustCompile(t *testing.T, labels map[string]string, fields ...api.FieldRequirement) *Selector {
	t.Helper()
	s, err := Compile(labels, nil, fields)
	require.NoError(t, err)
	return s
}

func TestBest(t *testing.T) {
	web := map[string]string{"app": "web"}
	git := field("spec.source.git", api.OpExists)
	image := field("spec.source.image", api.OpExists)
	ambiguous := field(`spec.params[?(@.name=="a")].value`, api.OpIn, "x")

	tests := []struct {
		name         string
		cands        []Candidate
		emptyMatches bool
		want         []string
		wantErrName  string
	}{
		{"none", nil, false, nil, ""},
		{"single match", []Candidate{{"a", mustCompile(t, web)}}, false, []string{"a"}, ""},
		{"non match skipped", []Candidate{{"a", mustCompile(t, nil, image)}, {"b", mustCompile(t, nil, git)}}, false, []string{"b"}, ""},
		{"most specific wins", []Candidate{
			{"labels", mustCompile(t, web)},
			{"labels+git", mustCompile(t, web, git)},
			{"git", mustCompile(t, nil, git)},
		}, false, []string{"labels+git"}, ""},
		{"more specific non-match does not count", []Candidate{
			{"labels", mustCompile(t, web)},
			{"labels+image", mustCompile(t, web, image)},
		}, false, []string{"labels"}, ""},
		{"tie keeps input order", []Candidate{
			{"z", mustCompile(t, nil, git)},
			{"labels", mustCompile(t, web)},
			{"a", mustCompile(t, map[string]string{"app.kubernetes.io/part-of": "shop"})},
		}, false, []string{"z", "labels", "a"}, ""},
		{"tie after a lower one", []Candidate{
			{"low", mustCompile(t, web)},
			{"x", mustCompile(t, web, git)},
			{"y", mustCompile(t, nil, git, field("spec.replicas", api.OpIn, 3))},
		}, false, []string{"x", "y"}, ""},
		{"empty chain never matches", []Candidate{{"empty", mustCompile(t, nil)}, {"nil", nil}}, false, nil, ""},
		{"empty chain ignored next to a match", []Candidate{{"empty", mustCompile(t, nil)}, {"a", mustCompile(t, nil, git)}}, false, []string{"a"}, ""},
		{"empty option is a fallback", []Candidate{{"fallback", mustCompile(t, nil)}, {"image", mustCompile(t, nil, image)}}, true, []string{"fallback"}, ""},
		{"nil option is a fallback", []Candidate{{"fallback", nil}}, true, []string{"fallback"}, ""},
		{"fallback loses to a match", []Candidate{{"fallback", nil}, {"git", mustCompile(t, nil, git)}}, true, []string{"git"}, ""},
		{"two fallbacks tie", []Candidate{{"f1", nil}, {"f2", mustCompile(t, nil)}}, true, []string{"f1", "f2"}, ""},
		{"error names the candidate", []Candidate{{"ok", mustCompile(t, nil, git)}, {"broken", mustCompile(t, nil, ambiguous)}}, false, nil, "broken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Best(workload, tt.cands, tt.emptyMatches)
			if tt.wantErrName != "" {
				var ce *CandidateError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tt.wantErrName, ce.Name)
				var ee *EvalError
				assert.ErrorAs(t, err, &ee)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestChooseChain(t *testing.T) {
	web := map[string]string{"app": "web"}
	git := field("spec.source.git", api.OpExists)
	deliverable := Owner{Kind: api.KindDeliverable, Labels: workload.Labels, Doc: workload.Doc}
	noLabelsW := Owner{Kind: api.KindWorkload, Doc: workload.Doc}
	noLabelsD := Owner{Kind: api.KindDeliverable, Labels: map[string]string{}, Doc: workload.Doc}
	onlyApp := Owner{Kind: api.KindWorkload, Labels: web, Doc: workload.Doc}

	tests := []struct {
		name   string
		owner  Owner
		chains []Candidate
		want   ChainChoice
	}{
		{"workload chosen", workload, []Candidate{{"basic", mustCompile(t, web)}, {"other", mustCompile(t, map[string]string{"app": "api"})}},
			ChainChoice{Name: "basic"}},
		{"deliverable chosen", deliverable, []Candidate{{"delivery", mustCompile(t, web)}},
			ChainChoice{Name: "delivery"}},
		{"most specific chosen", workload, []Candidate{{"basic", mustCompile(t, web)}, {"git", mustCompile(t, web, git)}},
			ChainChoice{Name: "git"}},
		{"workload without labels", noLabelsW, []Candidate{{"fields-only", mustCompile(t, nil, git)}},
			ChainChoice{Reason: "WorkloadLabelsMissing",
				Message: "workload has no labels to match to supply chain"}},
		{"deliverable without labels", noLabelsD, []Candidate{{"d", mustCompile(t, web)}},
			ChainChoice{Reason: "DeliverableLabelsMissing",
				Message: "deliverable has no labels to match to delivery"}},
		{"supply chain not found", onlyApp, []Candidate{{"api", mustCompile(t, map[string]string{"app": "api"})}, {"empty", nil}},
			ChainChoice{Reason: "SupplyChainNotFound",
				Message: "no supply chain found where full selector is satisfied by labels: map[app:web]"}},
		{"no chains at all", onlyApp, nil,
			ChainChoice{Reason: "SupplyChainNotFound",
				Message: "no supply chain found where full selector is satisfied by labels: map[app:web]"}},
		{"delivery not found", deliverable, []Candidate{{"api", mustCompile(t, web, field("spec.source.image", api.OpExists))}},
			ChainChoice{Reason: "DeliveryNotFound",
				Message: "no delivery found where full selector is satisfied by labels: map[app:web app.kubernetes.io/part-of:shop]"}},
		{"multiple supply chains", workload, []Candidate{{"b", mustCompile(t, web)}, {"a", mustCompile(t, nil, git)}, {"c", mustCompile(t, nil)}},
			ChainChoice{Reason: "MultipleSupplyChainMatches",
				Message: "workload may only match a single supply chain's selector", Candidates: []string{"b", "a"}}},
		{"multiple deliveries", deliverable, []Candidate{{"b", mustCompile(t, web)}, {"a", mustCompile(t, web)}},
			ChainChoice{Reason: "MultipleDeliveryMatches",
				Message: "deliverable may only match a single delivery's selector", Candidates: []string{"b", "a"}}},
		{"evaluation error", workload, []Candidate{{"broken", mustCompile(t, web, field(`spec.params[?(@.name=="a")].value`, api.OpIn, "x"))}},
			ChainChoice{Reason: "SupplyChainNotFound",
				Message: `cannot evaluate the selector of ClusterSupplyChain [broken] on workload [web]: selector match field [0] with key [spec.params[?(@.name=="a")].value]: path "spec.params[?(@.name==\"a\")].value" yields 2 values, expected exactly one`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ChooseChain(tt.owner, "web", tt.chains))
		})
	}
}

func TestChooseOption(t *testing.T) {
	git := field("workload.spec.source.git", api.OpExists)
	gitURL := field("workload.spec.source.git.url", api.OpExists)
	image := field("workload.spec.source.image", api.OpExists)

	tests := []struct {
		name      string
		chainKind string
		options   []Candidate
		want      string
		wantErr   string
		matches   []string
	}{
		{"one match", api.KindClusterSupplyChain, []Candidate{
			{"git-template", mustCompile(t, nil, git)},
			{"imgpkg-bundle-template", mustCompile(t, nil, image)},
		}, "git-template", "", nil},
		{"pass through with fallback", api.KindClusterSupplyChain, []Candidate{
			{"passThrough:source", mustCompile(t, nil, image)},
			{"default", nil},
		}, "default", "", nil},
		{"most specific option", api.KindClusterSupplyChain, []Candidate{
			{"git", mustCompile(t, nil, git)},
			{"git-web", mustCompile(t, map[string]string{"app": "web"}, git)},
		}, "git-web", "", nil},
		{"zero matches", api.KindClusterSupplyChain, []Candidate{{"image", mustCompile(t, nil, image)}}, "",
			"expected exactly 1 option to match, found [0] matching options [] for resource [source-provider] in supply chain [responsible-ops]", []string(nil)},
		{"no options", api.KindClusterSupplyChain, nil, "",
			"expected exactly 1 option to match, found [0] matching options [] for resource [source-provider] in supply chain [responsible-ops]", []string(nil)},
		{"two matches", api.KindClusterSupplyChain, []Candidate{
			{"a", mustCompile(t, nil, git)},
			{"image", mustCompile(t, nil, image)},
			{"b", mustCompile(t, nil, gitURL)},
		}, "", "expected exactly 1 option to match, found [2] matching options [a, b] for resource [source-provider] in supply chain [responsible-ops]", []string{"a", "b"}},
		{"pass through in a tie is named with its input", api.KindClusterSupplyChain, []Candidate{
			{"passThrough:source", mustCompile(t, nil, git)},
			{"b", mustCompile(t, nil, gitURL)},
			{"fallback", nil},
		}, "", "expected exactly 1 option to match, found [2] matching options [passThrough:source, b] for resource [source-provider] in supply chain [responsible-ops]", []string{"passThrough:source", "b"}},
		{"deliverable key prefix", api.KindClusterDelivery, []Candidate{
			{"git", mustCompile(t, nil, field("deliverable.spec.source.git", api.OpExists))},
			{"image", mustCompile(t, nil, field("deliverable.spec.source.image", api.OpExists))},
		}, "git", "", nil},
		{"two matches in a delivery", api.KindClusterDelivery, []Candidate{
			{"a", mustCompile(t, nil, git)},
			{"b", mustCompile(t, nil, gitURL)},
		}, "", "expected exactly 1 option to match, found [2] matching options [a, b] for resource [source-provider] in delivery [responsible-ops]", []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChooseOption(workload, tt.chainKind, "responsible-ops", "source-provider", tt.options)
			if tt.wantErr != "" {
				var me *OptionsMatchError
				require.ErrorAs(t, err, &me)
				assert.Equal(t, tt.wantErr, err.Error())
				assert.Equal(t, tt.matches, me.Matches)
				assert.Equal(t, "source-provider", me.Step)
				assert.Equal(t, "responsible-ops", me.Chain)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestChooseOptionEvaluationError(t *testing.T) {
	key := `workload.spec.params[?(@.name=="a")].value`
	options := []Candidate{
		{"fine", mustCompile(t, nil, field("spec.source.image", api.OpExists))},
		{"broken", mustCompile(t, nil, field("spec.source.git", api.OpExists), field(key, api.OpIn, "x"))},
	}
	_, err := ChooseOption(workload, api.KindClusterDelivery, "deliver", "deployer", options)
	var re *ResolveOptionsError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "deployer", re.Step)
	assert.Equal(t, "deliver", re.Chain)
	assert.Equal(t, "broken", re.Option)
	assert.Equal(t, key, re.Path)
	assert.Equal(t, `error matching against template option [broken] for resource [deployer] in delivery [deliver] at key [`+key+
		`]: path ".spec.params[?(@.name==\"a\")].value" yields 2 values, expected exactly one`, err.Error())
}
