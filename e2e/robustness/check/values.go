package check

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"
)

// ValueRule says that the objects a template stamps hold an owner's
// param, whole, at a path.
type ValueRule struct {
	Template string // carto.run/cluster-template-name
	Param    string // the owner's spec.params[].name
	Path     string // gjson path in the stamped object
	// OwnerReady: judge only when the owner is Ready (the value came
	// through an earlier step's outputs, which keep the last good value
	// while that step fails).
	OwnerReady bool
}

// ExactValues is invariant 6, on the cluster read at the end: for every
// object Kontinue stamped with a template of a rule, whose owner a replica
// serves, whose status describes its current generation, and whose step
// has its input set in for that generation (ResourceSubmitted True and
// observed at it, nothing held), the value
// at the rule's path is the owner's param exactly, compared as the JSON
// text the API server sends for both (so 9007199254740993 must stay that,
// and 1.7976931348623157e+308 too).
func ExactValues(h *History, final *Snapshot, rules []ValueRule, served Served) []Violation {
	mine := createdByKontinue(h)
	byTemplate := map[string][]ValueRule{}
	for _, r := range rules {
		byTemplate[r.Template] = append(byTemplate[r.Template], r)
	}
	var vs []Violation
	for _, k := range final.Keys() {
		obj := final.Objects[k]
		m := MetaOf(obj)
		if m == nil || !mine[m.UID] || m.Labels[LabelShadow] == "true" {
			continue
		}
		rs := byTemplate[m.Labels[LabelTemplate]]
		if len(rs) == 0 {
			continue
		}
		role := RoleOf(m)
		o := final.OwnerByUID(role.OwnerUID)
		if o == nil || !o.served(served) || !o.Settled() {
			continue
		}
		st := o.Step(role.Step)
		submitted := condition(st.Get("conditions"), "ResourceSubmitted")
		if submitted.Get("status").String() != "True" || st.Get("heldInputDigest").String() != "" {
			continue
		}
		if og := submitted.Get("observedGeneration"); og.Exists() && og.Int() != o.Meta.Generation {
			// The step was not walked for this generation (the owner
			// stopped before its steps: a missing service account, a chain
			// that does not select it): what it says is of an older spec.
			continue
		}
		ready := condition(gjson.GetBytes(o.JSON, "status.conditions"), "Ready").Get("status").String() == "True"
		for _, r := range rs {
			if r.OwnerReady && !ready {
				continue
			}
			want, ok := o.Param(r.Param)
			if !ok {
				continue
			}
			got := gjson.GetBytes(obj, r.Path)
			if !sameJSON(want, got.Raw) {
				vs = append(vs, Violation{Invariant: 6, Check: "exact values", At: final.At, Object: k.String(),
					Message: fmt.Sprintf("%s holds %s at %s, but %s's param %s is %s", k.Name, clip(got.Raw), r.Path, o.Key, r.Param, clip(want))})
			}
		}
	}
	return vs
}

// sameJSON compares two JSON texts: equal as text, or equal once both are
// re-encoded with sorted keys and every number kept as written.
func sameJSON(a, b string) bool {
	if a == b {
		return true
	}
	ca, ea := canonical(a)
	cb, eb := canonical(b)
	return ea == nil && eb == nil && bytes.Equal(ca, cb)
}

func canonical(s string) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func clip(s string) string {
	if len(s) > 120 {
		return fmt.Sprintf("%s… (%d bytes)", s[:120], len(s))
	}
	return s
}
