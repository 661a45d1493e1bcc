package selector

import (
	"encoding/json"
	"strings"
	"testing"

	"kontinue.dev/kontinue/reconciler/api"
)

// fuzzValues reads values as a JSON array when it is one, else as a
// comma-separated list of strings (how a person might type them).
func fuzzValues(s string) []any {
	var vs []any
	if json.Unmarshal([]byte(s), &vs) == nil {
		return vs
	}
	if s == "" {
		return nil
	}
	for _, v := range strings.Split(s, ",") {
		vs = append(vs, v)
	}
	return vs
}

func FuzzCompileMatch(f *testing.F) {
	f.Add("workload.spec.source.git", "Exists", "", "")
	f.Add("spec.replicas", "In", `[3, "4"]`, "")
	f.Add(".spec.source.git.ref.branch", "NotIn", "dev,main", "")
	f.Add(`deliverable.spec.params[?(@.name=="a")].value`, "In", "x", "")
	f.Add(`metadata.labels['app.kubernetes.io/part-of']`, "DoesNotExist", "", `{"metadata":{"labels":{}}}`)
	f.Add("{$.workload}", "In", `[null, true, {"a":[1]}]`, `{"workload":null}`)
	f.Add("workload[0]", "Bogus", "[]", "[1,2]")
	f.Add("spec.x", "In", "[1e400]", `{"spec":{"x":1e400}}`)
	f.Fuzz(func(t *testing.T, key, op, values, doc string) {
		owner := Owner{Kind: api.KindWorkload, Labels: map[string]string{"k": "v"}, Doc: workload.Doc}
		if doc != "" {
			owner = Owner{Kind: api.KindDeliverable, Labels: map[string]string{"k": "v"}, Doc: []byte(doc)}
		}
		vals := fuzzValues(values)
		s, err := Compile(map[string]string{"k": "v"}, nil, []api.FieldRequirement{{Key: key, Operator: op, Values: vals}})
		if err != nil {
			if _, ok := err.(*SelectorError); !ok {
				t.Fatalf("Compile error %T is not a *SelectorError: %v", err, err)
			}
			return
		}
		if s.Specificity() != 2 {
			t.Fatalf("specificity %d, want 2", s.Specificity())
		}
		got, err := s.Matches(owner)
		if err != nil && got {
			t.Fatalf("match with an error: %v", err)
		}
		if err != nil {
			if _, ok := err.(*EvalError); !ok {
				t.Fatalf("Matches error %T is not an *EvalError: %v", err, err)
			}
		}

		// The negated operator gives the opposite answer whenever there is
		// a value to talk about.
		neg := map[string]string{api.OpIn: api.OpNotIn, api.OpNotIn: api.OpIn, api.OpExists: api.OpDoesNotExist, api.OpDoesNotExist: api.OpExists}[op]
		ns, err2 := Compile(map[string]string{"k": "v"}, nil, []api.FieldRequirement{{Key: key, Operator: neg, Values: vals}})
		if err2 != nil {
			t.Fatalf("negated operator %s does not compile: %v", neg, err2)
		}
		ngot, nerr := ns.Matches(owner)
		if (err == nil) != (nerr == nil) {
			t.Fatalf("%s error %v, %s error %v", op, err, neg, nerr)
		}
		if err != nil {
			return
		}
		missing := false
		if op == api.OpIn || op == api.OpNotIn {
			ex, _ := Compile(nil, nil, []api.FieldRequirement{{Key: key, Operator: api.OpExists}})
			found, _ := ex.Matches(owner)
			missing = !found
		}
		if missing {
			if got || ngot {
				t.Fatalf("In/NotIn on a missing path matched: %s=%v %s=%v", op, got, neg, ngot)
			}
		} else if got == ngot {
			t.Fatalf("%s and %s both %v", op, neg, got)
		}

		_, _ = ChooseOption(owner, api.KindClusterSupplyChain, "sc", "step", []Candidate{{"a", s}, {"b", ns}, {"c", nil}})
		_ = ChooseChain(owner, "o", []Candidate{{"a", s}, {"b", ns}})
	})
}
