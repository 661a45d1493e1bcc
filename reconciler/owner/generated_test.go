package owner

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/paths"
	st "kontinue.dev/kontinue/reconciler/status"
)

func TestDecideRunTemplate(t *testing.T) {
	pending := &st.GeneratedRunTemplate{Step: "s", Name: "n", Claim: "c1"}
	recorded := &st.GeneratedRunTemplate{Step: "s", Name: "n", UID: "u1", Claim: "c1"}
	migrated := &st.GeneratedRunTemplate{Step: "s", Name: "n", UID: "u1"}
	none := crtSeen{}
	ours := crtSeen{Exists: true, UID: "u1", Claim: "c1"}
	copied := crtSeen{Exists: true, UID: "u2", Claim: "c1", Labelled: true} // a person's copy: labels and annotations too
	claimed := crtSeen{Exists: true, UID: "u2", Claim: "c1"}                // created by Kontinue, the record not yet written
	foreign := crtSeen{Exists: true, UID: "u3", Labelled: true}
	for _, tt := range []struct {
		name   string
		rec    *st.GeneratedRunTemplate
		legacy bool
		seen   crtSeen
		read   bool
		want   crtAction
	}{
		{"new step, name free: record before creating", nil, false, none, false, crtRecord},
		{"new step, name taken by a labelled object: refused", nil, false, foreign, false, crtRefuse},
		{"new step, name taken by a copy carrying an old claim: refused", nil, false, copied, false, crtRefuse},
		{"recorded, not created yet: create", pending, false, none, false, crtCreate},
		{"recorded, created, crashed before the UID was kept: the claim proves it", pending, false, claimed, false, crtAdopt},
		{"recorded, but the name holds an object without the claim: refused", pending, false, foreign, false, crtRefuse},
		{"UID recorded and seen: apply", recorded, false, ours, false, crtApply},
		{"UID recorded, the cache has nothing (it may lag): read", recorded, false, none, false, crtRead},
		{"UID recorded, the API server has nothing: start again", recorded, false, none, true, crtRecord},
		{"UID recorded, another object holds the name (even with the same claim and labels): refused", recorded, false, copied, false, crtRefuse},
		{"migrated record without claim: apply by UID", migrated, false, ours, false, crtApply},
		{"migrated record, replaced: refused", migrated, false, foreign, true, crtRefuse},
		{"earlier version's object, listed in status and labelled: adopted once", nil, true, foreign, false, crtAdopt},
		{"earlier version's status, but the object is not labelled for the step: refused", nil, true, crtSeen{Exists: true, UID: "u4"}, false, crtRefuse},
		{"earlier version's status, object gone: record", nil, true, none, false, crtRecord},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, decideRunTemplate(tt.rec, tt.legacy, tt.seen, tt.read))
		})
	}
}

func TestOwnedRunTemplate(t *testing.T) {
	for _, tt := range []struct {
		name string
		rec  st.GeneratedRunTemplate
		seen crtSeen
		uid  string
		ok   bool
	}{
		{"the recorded UID", st.GeneratedRunTemplate{Name: "n", UID: "u1", Claim: "c"}, crtSeen{Exists: true, UID: "u1", Claim: "c"}, "u1", true},
		{"another UID, same claim and labels: a copy", st.GeneratedRunTemplate{Name: "n", UID: "u1", Claim: "c"}, crtSeen{Exists: true, UID: "u2", Claim: "c", Labelled: true}, "", false},
		{"no UID yet: the claim", st.GeneratedRunTemplate{Name: "n", Claim: "c"}, crtSeen{Exists: true, UID: "u2", Claim: "c"}, "u2", true},
		{"no UID yet, another claim", st.GeneratedRunTemplate{Name: "n", Claim: "c"}, crtSeen{Exists: true, UID: "u2", Claim: "d"}, "", false},
		{"no UID, no claim: nothing proves it", st.GeneratedRunTemplate{Name: "n"}, crtSeen{Exists: true, UID: "u2"}, "", false},
		{"gone", st.GeneratedRunTemplate{Name: "n", UID: "u1"}, crtSeen{}, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			uid, ok := ownedRunTemplate(tt.rec, tt.seen)
			assert.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, tt.uid, string(uid))
			}
		})
	}
}

func TestStaleRunTemplate(t *testing.T) {
	want := func(step string) string { return "gen-" + step }
	runnable := &st.StampedRef{Kind: "Runnable", Name: "r"}
	cm := &st.StampedRef{Kind: "ConfigMap", Name: "c"}
	for _, tt := range []struct {
		name    string
		rec     st.GeneratedRunTemplate
		reached map[string]bool
		current map[string]*st.StampedRef
		stale   bool
	}{
		{"generated this time", st.GeneratedRunTemplate{Step: "a", Name: "gen-a"}, map[string]bool{"a": true}, map[string]*st.StampedRef{"a": runnable}, false},
		{"reached, another name", st.GeneratedRunTemplate{Step: "a", Name: "old"}, map[string]bool{"a": true}, map[string]*st.StampedRef{"a": runnable}, true},
		{"failed early, still points at its Runnable", st.GeneratedRunTemplate{Step: "a", Name: "gen-a"}, nil, map[string]*st.StampedRef{"a": runnable}, false},
		{"step removed", st.GeneratedRunTemplate{Step: "a", Name: "gen-a"}, nil, nil, true},
		{"runnable flipped to false: the step stamps a ConfigMap", st.GeneratedRunTemplate{Step: "a", Name: "gen-a"}, nil, map[string]*st.StampedRef{"a": cm}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.stale, staleRunTemplate(tt.rec, tt.reached, want, tt.current))
		})
	}
}

func TestRecordsOf(t *testing.T) {
	owner := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"generatedRunTemplates": []any{
		map[string]any{"step": "a", "name": "n1", "uid": "u1", "claim": "c1"},
		map[string]any{"step": "b", "name": "n2", "claim": "c2"},
		map[string]any{"step": "c"}, // no name: nothing to act on
		"garbage",
	}}}}
	assert.Equal(t, []st.GeneratedRunTemplate{{Step: "a", Name: "n1", UID: "u1", Claim: "c1"}, {Step: "b", Name: "n2", Claim: "c2"}}, RecordsOf(owner))
	assert.Empty(t, RecordsOf(&unstructured.Unstructured{Object: map[string]any{}}))
}

func TestTranslateTemplate(t *testing.T) {
	in := map[string]any{
		"apiVersion": "tekton.dev/v1beta1",
		"kind":       "PipelineRun",
		"metadata":   map[string]any{"name": "$(workload.metadata.name)$-linter", "labels": map[string]any{"fixed": "yes"}},
		"spec": map[string]any{
			"params": []any{
				map[string]any{"name": "repository", "value": "$(workload.spec.source.git.url)$"},
				map[string]any{"name": "both", "value": "$( params.a )$/$(workload.metadata.labels['app.kubernetes.io/name'])$@$(params.it's)$"},
			},
			"count": int64(3),
		},
	}
	out, exprs := translateTemplate(in)
	assert.Equal(t, []string{"params.a", "params.it's", "workload.metadata.labels['app.kubernetes.io/name']", "workload.metadata.name", "workload.spec.source.git.url"}, exprs)
	md := out["metadata"].(map[string]any)
	assert.Equal(t, "$(runnable.spec.inputs['workload.metadata.name'])$-linter-", md["generateName"], "a name becomes a generateName")
	assert.NotContains(t, md, "name")
	assert.Equal(t, map[string]any{"fixed": "yes"}, md["labels"], "hard-coded fields copied")
	params := out["spec"].(map[string]any)["params"].([]any)
	assert.Equal(t, "$(runnable.spec.inputs['workload.spec.source.git.url'])$", params[0].(map[string]any)["value"])
	both := params[1].(map[string]any)["value"].(string)
	assert.Equal(t, `$(runnable.spec.inputs['params.a'])$/$(runnable.spec.inputs['workload.metadata.labels[\'app.kubernetes.io/name\']'])$@$(runnable.spec.inputs['params.it\'s'])$`, both)
	assert.Equal(t, int64(3), out["spec"].(map[string]any)["count"])
	assert.Equal(t, "$(workload.metadata.name)$-linter", in["metadata"].(map[string]any)["name"], "the template is not modified")

	// Every translated tag is a valid path that reads the input by its name.
	doc := []byte(`{"runnable":{"spec":{"inputs":{"params.a":"A","params.it's":"I","workload.metadata.labels['app.kubernetes.io/name']":"N"}}}}`)
	for _, part := range strings.Split(both, ")$") {
		i := strings.Index(part, "$(")
		if i < 0 {
			continue
		}
		p, err := paths.Compile(part[i+2:])
		require.NoError(t, err, part)
		v, err := p.Value(doc)
		require.NoError(t, err, part)
		assert.Contains(t, []any{"A", "I", "N"}, v)
	}

	// generateName is kept; a template without tags has no inputs.
	out, exprs = translateTemplate(map[string]any{"metadata": map[string]any{"generateName": "x-"}})
	assert.Empty(t, exprs)
	assert.Equal(t, map[string]any{"generateName": "x-"}, out["metadata"])
}

func TestGeneratedRunTemplateName(t *testing.T) {
	a := generatedRunTemplateName("Workload", "a-b", "c", "lint")
	b := generatedRunTemplateName("Workload", "a", "b-c", "lint")
	assert.NotEqual(t, a, b, "the hash tells apart what the readable part does not")
	assert.True(t, strings.HasPrefix(a, "a-b-c-lint-"), a)
	assert.NotEqual(t, a, generatedRunTemplateName("Deliverable", "a-b", "c", "lint"))
	assert.Equal(t, a, generatedRunTemplateName("Workload", "a-b", "c", "lint"), "stable")
	long := generatedRunTemplateName("Workload", strings.Repeat("n", 63), strings.Repeat("w", 253), "Step_One")
	assert.LessOrEqual(t, len(long), 253)
	for _, c := range long {
		assert.True(t, c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.', "valid name %q", long)
	}
	assert.Contains(t, generatedRunTemplateName("Workload", "ns", "app", "Step_One"), "ns-app-step-one-")
}
