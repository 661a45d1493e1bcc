package stamp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func TestClaim(t *testing.T) {
	me := Owner{Kind: "Workload", Name: "app", UID: types.UID("u-me")}
	obj := func(ctrlKind, ctrlName, uid string, ann map[string]any) *unstructured.Unstructured {
		md := map[string]any{"name": "cm", "namespace": "dev"}
		if uid != "" {
			md["ownerReferences"] = []any{map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": ctrlKind, "name": ctrlName, "uid": uid, "controller": true}}
		}
		if ann != nil {
			md["annotations"] = ann
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}}
	}
	cases := []struct {
		name string
		live *unstructured.Unstructured
		ok   bool
		why  []string
	}{
		{"nothing there", nil, true, nil},
		{"stamped by this owner", obj("Workload", "app", "u-me", nil), true, nil},
		{"a person's object", obj("", "", "", nil), false, []string{"ConfigMap [dev/cm]", "was not stamped by this Workload", "kontinue.dev/adopt-by=Workload/app"}},
		{"another owner's", obj("Workload", "other", "u-other", nil), false, []string{"ConfigMap [dev/cm]", "controlled by Workload [other]"}},
		{"same name, other incarnation", obj("Workload", "app", "u-old", nil), false, []string{"controlled by Workload [app]"}},
		{"adoption asked for this owner", obj("", "", "", map[string]any{"kontinue.dev/adopt-by": "Workload/app"}), true, nil},
		{"adoption asked for another", obj("", "", "", map[string]any{"kontinue.dev/adopt-by": "Workload/other"}), false, []string{"was not stamped"}},
		{"adoption asked for a Deliverable of that name", obj("", "", "", map[string]any{"kontinue.dev/adopt-by": "Deliverable/app"}), false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, why := Claim(c.live, me)
			assert.Equal(t, c.ok, ok)
			for _, w := range c.why {
				assert.Contains(t, why, w)
			}
			if c.ok {
				assert.Empty(t, why)
			}
		})
	}
}
