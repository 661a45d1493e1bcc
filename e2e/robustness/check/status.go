package check

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tidwall/gjson"
)

// Outputs says where a template's outputs are read from: output name
// (url, revision, image, config) to a gjson path in the stamped object.
type Outputs map[string]map[string]string

// TruthfulStatus is invariant 8, on the cluster read at the end. For every
// owner a replica serves:
//
//   - (a) its status describes its current generation (observedGeneration);
//   - (b) each step's stampedRef names an object that exists and that the
//     owner controls (a run of an immutable step included: the final input
//     set has its run), unless the step is refused;
//   - (c) a step whose Ready is True, served by its primary with nothing
//     held, shows as outputs what its object holds at the template's
//     output paths (plain strings only: the preview is YAML);
//   - (d) a step refused with StampedObjectNotOwned names an object that
//     is there and still blocks: not the owner's, not handed to it;
//   - (e) a step's shadowRef names a shadow (kontinue.dev/shadow) that
//     exists and that the owner controls, unless the step is refused or
//     says its shadow could not be stamped (invariant 5 (b) judges the
//     other way: every shadow is named).
func TruthfulStatus(final *Snapshot, outputs Outputs, served Served) []Violation {
	var vs []Violation
	for _, o := range final.Owners() {
		if !o.served(served) || o.Meta.Deleting {
			continue
		}
		obs := gjson.GetBytes(o.JSON, "status.observedGeneration").Int()
		if obs != o.Meta.Generation {
			vs = append(vs, Violation{Invariant: 8, Check: "truthful status", At: final.At, Object: o.Key.String(),
				Message: fmt.Sprintf("status describes generation %d, the owner is at %d (conditions %s)", obs, o.Meta.Generation,
					clip(gjson.GetBytes(o.JSON, "status.conditions").Raw))})
			continue
		}
		if o.Unwalked() {
			// No chain selects the owner: as Cartographer's, its steps'
			// entries stay those of the last walk, and Ready says so (seed
			// 300: it left every chain by a label, which leaves the
			// generation as it was, then a person deleted an object).
			continue
		}
		if condition(gjson.GetBytes(o.JSON, "status.conditions"), "ResourcesSubmitted").Get("reason").String() == "ServiceAccountError" {
			// Its service account is gone: nothing is written as it, the
			// steps keep the last walk's entries (docs/security.md;
			// seed 700: a refusal stood after the object was handed over,
			// the account deleted 4 s before the handover).
			continue
		}
		gjson.GetBytes(o.JSON, "status.resources").ForEach(func(_, st gjson.Result) bool {
			step := st.Get("name").String()
			submitted := condition(st.Get("conditions"), "ResourceSubmitted")
			if og := submitted.Get("observedGeneration"); og.Exists() && og.Int() != o.Meta.Generation {
				// The step was not walked for this generation (seeds 214,
				// 219: the Workload left every chain, SupplyChainNotFound):
				// its entry says what was so as of an older one.
				return true
			}
			if submitted.Get("reason").String() == "StampedObjectNotOwned" {
				if v := blocker(final, &o, step, submitted.Get("message").String()); v != "" {
					vs = append(vs, Violation{Invariant: 8, Check: "truthful status", At: final.At, Object: o.Key.String(),
						Message: fmt.Sprintf("step %s is refused (%s), but %s", step, clip(submitted.Get("message").String()), v)})
				}
				return true
			}
			if v := shadowTruth(final, &o, st, submitted); v != "" {
				vs = append(vs, Violation{Invariant: 8, Check: "truthful status", At: final.At, Object: o.Key.String(),
					Message: fmt.Sprintf("step %s %s", step, v)})
			}
			ref := st.Get("stampedRef")
			if !ref.Exists() {
				return true
			}
			k := KeyOfRef(ref)
			obj, ok := final.Objects[k]
			if !ok && submitted.Exists() && submitted.Get("status").String() != "True" {
				// The step's write failed (RBAC revoked, a template the
				// API server refuses): stampedRef names the last object it
				// stamped, as Cartographer's does, and its condition says
				// why it is not there now (robustness seed 200: a person
				// deleted it, the account may no longer create it).
				return true
			}
			if !ok {
				vs = append(vs, Violation{Invariant: 8, Check: "truthful status", At: final.At, Object: o.Key.String(),
					Message: fmt.Sprintf("step %s names %s as its object, which does not exist", step, k)})
				return true
			}
			m := MetaOf(obj)
			if c := m.Controller(); c == nil || c.UID != o.Meta.UID {
				vs = append(vs, Violation{Invariant: 8, Check: "truthful status", At: final.At, Object: o.Key.String(),
					Message: fmt.Sprintf("step %s names %s as its object, which is not controlled by the owner (%s)", step, k, describe(m))})
				return true
			}
			ready := condition(st.Get("conditions"), "Ready").Get("status").String()
			paths := outputs[m.Labels[LabelTemplate]]
			if ready != "True" || st.Get("servedBy").String() == "shadow" || st.Get("heldInputDigest").String() != "" || paths == nil {
				return true
			}
			st.Get("outputs").ForEach(func(_, out gjson.Result) bool {
				name := out.Get("name").String()
				path, ok := paths[name]
				if !ok {
					return true
				}
				v := gjson.GetBytes(obj, path)
				if v.Type != gjson.String || !plain.MatchString(v.Str) {
					return true
				}
				if p := strings.TrimSuffix(out.Get("preview").String(), "\n"); p != v.Str {
					vs = append(vs, Violation{Invariant: 8, Check: "truthful status", At: final.At, Object: o.Key.String(),
						Message: fmt.Sprintf("step %s is Ready with output %s %q, but %s holds %q at %s", step, name, p, k, v.Str, path)})
				}
				return true
			})
			return true
		})
	}
	return vs
}

// Unwalked: no chain selects the owner (its Ready reason says so):
// nothing is walked, written or deleted for it, and its status keeps the
// last walk's entries (docs/concepts.md).
func (o *Owner) Unwalked() bool {
	return unwalked[condition(gjson.GetBytes(o.JSON, "status.conditions"), "Ready").Get("reason").String()]
}

// unwalked are the owner's Ready reasons when no chain is selected
// (reconciler/api's contract): nothing is walked, nothing updated.
var unwalked = map[string]bool{
	"SupplyChainNotFound": true, "MultipleSupplyChainMatches": true, "WorkloadLabelsMissing": true,
	"DeliveryNotFound": true, "MultipleDeliveryMatches": true, "DeliverableLabelsMissing": true,
}

// plain strings are their own YAML (no quoting, not a number or bool).
var plain = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9._/:@-]*$`)

var refusedObject = regexp.MustCompile(`(\w+) \[([^/\]]*)/([^\]]+)\] already exists`)

// blocker says what is wrong with a refusal ("" when the object it names
// still blocks).
func blocker(final *Snapshot, o *Owner, step, msg string) string {
	m := refusedObject.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	kind, ns, name := m[1], m[2], m[3]
	for k, obj := range final.Objects {
		if k.Namespace != ns || k.Name != name {
			continue
		}
		meta := MetaOf(obj)
		if meta.Kind != kind {
			continue
		}
		// Another step's object of the same owner blocks (two steps, one
		// name); the step's own does not.
		if c := meta.Controller(); c != nil && c.UID == o.Meta.UID && meta.Labels[LabelStep] == step {
			return fmt.Sprintf("%s is the step's own object now", k)
		}
		if meta.Annotations[AnnotationAdoptBy] == o.Meta.Kind+"/"+o.Meta.Name {
			return fmt.Sprintf("%s is handed over to it (%s)", k, AnnotationAdoptBy)
		}
		return ""
	}
	return fmt.Sprintf("%s %s/%s does not exist any more", kind, ns, name)
}

// shadowTruth says what is wrong with a step's shadowRef ("" when it is
// true or absent).
func shadowTruth(final *Snapshot, o *Owner, st, submitted gjson.Result) string {
	ref := st.Get("shadowRef")
	if !ref.Exists() {
		return ""
	}
	if submitted.Get("status").String() != "True" ||
		strings.Contains(condition(st.Get("conditions"), "Healthy").Get("message").String(), "shadow could not be stamped") {
		return "" // the last shadow it stamped, and its conditions say why it may not be there
	}
	k := KeyOfRef(ref)
	obj, ok := final.Objects[k]
	if !ok {
		return fmt.Sprintf("names %s as its shadow, which does not exist", k)
	}
	m := MetaOf(obj)
	if c := m.Controller(); c == nil || c.UID != o.Meta.UID {
		return fmt.Sprintf("names %s as its shadow, which is not controlled by the owner (%s)", k, describe(m))
	}
	if m.Labels[LabelShadow] != "true" {
		return fmt.Sprintf("names %s as its shadow, which is not labelled one", k)
	}
	return ""
}
