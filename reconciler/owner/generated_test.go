package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
