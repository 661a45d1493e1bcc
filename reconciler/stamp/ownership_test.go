package stamp

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// owned is a ConfigMap dev/cm controlled by ctrlKind/ctrlName of uid ("":
// no controller), labelled for step ("": no label), with annotations.
func owned(ctrlKind, ctrlName, uid, step string, ann map[string]any) *unstructured.Unstructured {
	md := map[string]any{"name": "cm", "namespace": "dev"}
	if uid != "" {
		md["ownerReferences"] = []any{map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": ctrlKind, "name": ctrlName, "uid": uid, "controller": true}}
	}
	if step != "" {
		md["labels"] = map[string]any{"carto.run/resource-name": step}
	}
	if ann != nil {
		md["annotations"] = ann
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}}
}

var me = Owner{Kind: "Workload", Name: "app", UID: types.UID("u-me")}

// holding is a Holds: the steps named hold what they labelled.
func holding(steps ...string) func(string, *unstructured.Unstructured) bool {
	return func(s string, _ *unstructured.Unstructured) bool {
		for _, x := range steps {
			if x == s {
				return true
			}
		}
		return false
	}
}

func TestClaim(t *testing.T) {
	obj := func(ctrlKind, ctrlName, uid string, ann map[string]any) *unstructured.Unstructured {
		return owned(ctrlKind, ctrlName, uid, "", ann)
	}
	config := Claimant{Owner: me, Step: "config", Holds: holding("config", "deploy")}
	cases := []struct {
		name string
		live *unstructured.Unstructured
		c    Claimant
		ok   bool
		held string // the step that holds it (HeldByStep)
		why  []string
	}{
		{"nothing there", nil, config, true, "", nil},
		{"stamped by this owner", obj("Workload", "app", "u-me", nil), config, true, "", nil},
		{"a person's object", obj("", "", "", nil), config, false, "", []string{"ConfigMap [dev/cm]", "was not stamped by this Workload", "kontinue.dev/adopt-by=Workload/app"}},
		{"another owner's", obj("Workload", "other", "u-other", nil), config, false, "", []string{"ConfigMap [dev/cm]", "controlled by Workload [other]"}},
		{"same name, other incarnation", obj("Workload", "app", "u-old", nil), config, false, "", []string{"controlled by Workload [app]"}},
		{"adoption asked for this owner", obj("", "", "", map[string]any{"kontinue.dev/adopt-by": "Workload/app"}), config, true, "", nil},
		{"adoption asked for this owner, from another owner", obj("Workload", "other", "u-other", map[string]any{"kontinue.dev/adopt-by": "Workload/app"}), config, true, "", nil},
		{"adoption asked for another", obj("", "", "", map[string]any{"kontinue.dev/adopt-by": "Workload/other"}), config, false, "", []string{"was not stamped"}},
		{"adoption asked for a Deliverable of that name", obj("", "", "", map[string]any{"kontinue.dev/adopt-by": "Deliverable/app"}), config, false, "", nil},
		// One owner, one step.
		{"this step's", owned("Workload", "app", "u-me", "config", nil), config, true, "", nil},
		{"another step's that still stamps it", owned("Workload", "app", "u-me", "deploy", nil), config, false, "deploy",
			[]string{"ConfigMap [dev/cm] is stamped by step [deploy] of this Workload", "step [config] renders an object of the same name"}},
		{"another step's, holds not known: it holds", owned("Workload", "app", "u-me", "deploy", nil), Claimant{Owner: me, Step: "config"}, false, "deploy", nil},
		{"a step renamed or removed since (orphan): the new step takes it", owned("Workload", "app", "u-me", "old-config", nil), config, true, "", nil},
		{"a step that stamps another name now", owned("Workload", "app", "u-me", "deploy", nil), Claimant{Owner: me, Step: "config", Holds: holding("config")}, true, "", nil},
		{"no step label (stamped before labels): the owner's", owned("Workload", "app", "u-me", "", nil), config, true, "", nil},
		{"a write that is no step's", owned("Workload", "app", "u-me", "deploy", nil), Claimant{Owner: me}, true, "", nil},
		{"adopted by one step, asked by another", owned("Workload", "app", "u-me", "deploy", map[string]any{"kontinue.dev/adopt-by": "Workload/app"}), config, false, "deploy", nil},
		{"another owner's object labelled for this step", owned("Workload", "other", "u-other", "config", nil), config, false, "", []string{"controlled by Workload [other]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, why := Claim(c.live, c.c)
			assert.Equal(t, c.ok, ok, why)
			for _, w := range c.why {
				assert.Contains(t, why, w)
			}
			if c.ok {
				assert.Empty(t, why)
			}
			var held *HeldByStep
			err := claim(c.live, c.c)
			if c.held != "" && assert.ErrorAs(t, err, &held) {
				assert.Equal(t, c.held, held.Step)
			} else if c.held == "" {
				assert.False(t, errors.As(err, &held), "held by a step")
			}
			assert.Equal(t, c.ok && c.live != nil && metaController(c.live) == c.c.UID, Stamps(c.live, c.c), "Stamps")
		})
	}
}

func metaController(u *unstructured.Unstructured) types.UID {
	for _, r := range u.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return r.UID
		}
	}
	return ""
}
