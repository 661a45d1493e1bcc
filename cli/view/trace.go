package view

// Trace: the provenance chain of a step, back to its source (docs/cli.md,
// `kontinue trace`). Pure: it reads owners' statuses as the API server
// returned them; which owners to read is the caller's.

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/verify"
)

// KindTrace is the data model kind of `kontinue trace -o json`.
const KindTrace = "Trace"

// Trace is the provenance of one step: the hops from the source revision to
// the step, oldest first, and across chains when it can be followed.
type Trace struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"` // Trace
	// Hops are the steps, upstream first: each one's inputs are what the
	// hops before it published.
	Hops []Hop `json:"hops"`
	// Notes say which links could not be proven, and why.
	Notes []string `json:"notes,omitempty"`
}

// Hop is one step of one owner and the input set behind its outputs.
type Hop struct {
	Owner   string `json:"owner"` // Kind/namespace/name
	Step    string `json:"step"`
	Stamped string `json:"stamped,omitempty"` // Kind/namespace/name
	// Set is which of the step's recorded sets this is: current (its
	// outputs now), or latest when nothing succeeded yet.
	Set   string       `json:"set,omitempty"`
	Input *st.InputSet `json:"input,omitempty"`
	// Outputs are the step's outputs now (name: first line of the preview).
	Outputs map[string]string `json:"outputs,omitempty"`
	// Links say, per input, whether it is what the earlier step publishes
	// now (proven by value or digest) or an older output of it.
	Links []Link `json:"links,omitempty"`
	// Verification is how each input the chain's verify policy names was
	// checked (the step's status.resources[].verification, as `kontinue
	// get` shows it): result, digest, rule, held, why.
	Verification []st.InputVerification `json:"verification,omitempty"`
	// From is, on a first step of a Deliverable a Workload claims (its
	// controller reference), the hop across chains: the Workload
	// revision that made what the step published, proven or not.
	From *Crossing `json:"from,omitempty"`
}

// Crossing is the hop from a Workload revision to the revision a
// Deliverable's first step published: proven by spans.LinkOf, the proof
// the controller's span links use, or not, and why.
type Crossing struct {
	Workload string `json:"workload"` // Kind/namespace/name
	// Step is the Workload's step whose status names the Deliverable.
	Step   string `json:"step,omitempty"`
	Proven bool   `json:"proven"`
	// Evidence are the conditions that held (all of them when proven):
	// owner, applied-digest, traceparent (weighed only when the
	// Deliverable carries one), value.
	Evidence []string `json:"evidence,omitempty"`
	// Revision is the label of the Workload revision, and Set the
	// input set of Step the Deliverable carries (its values and times).
	Revision string       `json:"revision,omitempty"`
	Set      *st.InputSet `json:"set,omitempty"`
	// Output is the output of the Deliverable's step that is a value Set
	// took.
	Output string `json:"output,omitempty"`
	// Failed is the condition that failed, Condition its number in
	// docs/operations.md, Reason why.
	Failed    string `json:"failed,omitempty"`
	Condition int    `json:"condition,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Upstream is the Workload a Deliverable's controller reference names, as
// the caller read it.
type Upstream struct {
	Ref string // Workload/namespace/name
	// Workload and Feed: the Workload read with the UID the reference
	// names, and the evidence spans.LinkOf weighs (Feed.Traced false: a
	// CLI cannot know whether traces were on). Feed nil: not read, Why
	// says why.
	Workload TraceOwner
	Feed     *spans.Feed
	Why      string
}

// Link is one input of a hop and the earlier step it came from.
type Link struct {
	Input    string `json:"input"` // source, image, config, deployment: name
	Resource string `json:"resource"`
	Value    string `json:"value"`
	// Matches: the earlier step's outputs now are this value; false: the
	// earlier step has moved on, and its current hop is not what made it.
	Matches bool `json:"matches"`
}

// TraceOwner is an owner as read, for Trace.
type TraceOwner struct {
	Kind, Namespace, Name string
	Status                st.OwnerStatus
}

// DecodeTraceOwner reads an owner's status.
func DecodeTraceOwner(u *unstructured.Unstructured) (TraceOwner, error) {
	o := TraceOwner{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	raw, ok := u.Object["status"]
	if !ok {
		return o, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return o, err
	}
	return o, json.Unmarshal(b, &o.Status)
}

func (o TraceOwner) ref() string { return o.Kind + "/" + o.Namespace + "/" + o.Name }

func (o TraceOwner) step(name string) *st.Resource {
	for i := range o.Status.Resources {
		if o.Status.Resources[i].Name == name {
			return &o.Status.Resources[i]
		}
	}
	return nil
}

// Leaves are the steps of an owner no later step reads: where its chains end.
func (o TraceOwner) Leaves() []string {
	read := map[string]bool{}
	for _, r := range o.Status.Resources {
		for _, in := range r.Inputs {
			read[in.Name] = true
		}
	}
	var out []string
	for _, r := range o.Status.Resources {
		if !read[r.Name] {
			out = append(out, r.Name)
		}
	}
	return out
}

// TraceStep follows steps of owner back through the inputs its provenance
// records. up, when the owner is a Deliverable whose controller reference
// names a Workload, is that Workload: when its status names the
// Deliverable, its chains are traced too, before the Deliverable's, since
// they produced what the Deliverable deploys; and each first step of the
// Deliverable says whether the Workload revision that made what it
// published is proven (Hop.From; Notes say why not).
func TraceStep(owner TraceOwner, steps []string, up *Upstream) (Trace, error) {
	t := Trace{APIVersion: APIVersion, Kind: KindTrace}
	for _, step := range steps {
		if owner.step(step) == nil {
			return t, fmt.Errorf("%s has no step [%s] in its status", owner.ref(), step)
		}
	}
	if up != nil && up.Feed.StampedBy() != "" {
		seen := map[string]bool{}
		for _, leaf := range up.Workload.Leaves() {
			t.walk(up.Workload, leaf, seen)
		}
	}
	first := len(t.Hops)
	seen := map[string]bool{}
	for _, step := range steps {
		t.walk(owner, step, seen)
	}
	if up == nil {
		return t, nil
	}
	for i := first; i < len(t.Hops); i++ {
		r := owner.step(t.Hops[i].Step)
		if len(r.Inputs) > 0 {
			continue
		}
		var set *st.InputSet
		if r.Provenance != nil {
			set = r.Provenance.Current
		}
		c := crossing(up, spans.LinkOf(up.Feed, r, set))
		t.Hops[i].From = &c
		if !c.Proven {
			by := up.Ref
			if c.Step != "" {
				by += " step [" + c.Step + "]"
			}
			t.Notes = append(t.Notes, fmt.Sprintf("%s step [%s]: that %s made the revision it published is not proven (condition %d, %s): %s",
				owner.ref(), r.Name, by, c.Condition, c.Failed, c.Reason))
		}
	}
	return t, nil
}

// crossing is p as the trace shows it.
func crossing(up *Upstream, p spans.Proof) Crossing {
	c := Crossing{Workload: up.Ref, Step: p.Step, Proven: p.Proven(), Revision: p.Revision, Set: p.Set, Output: p.Output}
	for _, h := range p.Held {
		c.Evidence = append(c.Evidence, h.String())
	}
	if !c.Proven {
		c.Failed, c.Condition, c.Reason = p.Failed.String(), int(p.Failed), p.Why
		if up.Feed == nil && up.Why != "" {
			c.Reason = up.Why
		}
	}
	return c
}

// walk appends the hops of step's inputs (depth first, each once), then step's.
func (t *Trace) walk(o TraceOwner, step string, seen map[string]bool) {
	if seen[step] {
		return
	}
	seen[step] = true
	r := o.step(step)
	if r == nil {
		t.Notes = append(t.Notes, fmt.Sprintf("%s has no step [%s] in its status", o.ref(), step))
		return
	}
	h := Hop{Owner: o.ref(), Step: step, Verification: r.Verification}
	if r.StampedRef != nil {
		h.Stamped = r.StampedRef.Kind + "/" + r.StampedRef.Namespace + "/" + r.StampedRef.Name
	}
	if len(r.Outputs) > 0 {
		h.Outputs = map[string]string{}
		for _, out := range r.Outputs {
			h.Outputs[out.Name] = firstLine(out.Preview)
		}
	}
	var set *st.InputSet
	switch p := r.Provenance; {
	case p == nil:
		t.Notes = append(t.Notes, fmt.Sprintf("%s step [%s] records no provenance (not reconciled since Kontinue recorded it, or cut from a status too large)", o.ref(), step))
	case p.Current != nil:
		set, h.Set = p.Current, "current"
	case p.Latest != nil:
		set, h.Set = p.Latest, "latest"
		t.Notes = append(t.Notes, fmt.Sprintf("%s step [%s] has not succeeded yet: its latest input set is shown", o.ref(), step))
	}
	h.Input = set
	if set != nil {
		for _, l := range links(o, set, r.Verification) {
			t.walk(o, l.Resource, seen)
			if !l.Matches {
				t.Notes = append(t.Notes, fmt.Sprintf("%s step [%s] took %s from step [%s], which has published other outputs since: the hop shown for [%s] is its newer set, not the one that made this input",
					o.ref(), step, l.Value, l.Resource, l.Resource))
			}
			h.Links = append(h.Links, l)
		}
	}
	t.Hops = append(t.Hops, h)
}

// links are the inputs of set, each checked against what its step
// publishes now: values for sources and images, the digest for configs.
// An image a verify policy checked was taken pinned to the digest checked
// (ver): it matches the tag its step publishes pinned to that digest.
func links(o TraceOwner, set *st.InputSet, ver []st.InputVerification) []Link {
	var out []Link
	outputs := func(step string) []st.Output {
		if r := o.step(step); r != nil {
			return r.Outputs
		}
		return nil
	}
	same := func(step, name, v string) bool {
		r := o.step(step)
		return r != nil && r.Publishes(name, v)
	}
	configDigest := func(step string) string {
		for _, out := range outputs(step) {
			if out.Name == "config" {
				return out.Digest
			}
		}
		return ""
	}
	for _, s := range set.Sources {
		out = append(out, Link{Input: "source: " + s.Name, Resource: s.Resource, Value: s.URL + "@" + s.Revision,
			Matches: same(s.Resource, "url", s.URL) && same(s.Resource, "revision", s.Revision)})
	}
	pinned := func(step, input, image string) bool {
		var published string
		for _, out := range outputs(step) {
			if out.Name == "image" && yaml.Unmarshal([]byte(out.Preview), &published) != nil {
				return false
			}
		}
		t, err := verify.TargetOf(verify.TypeImage, input, published)
		if err != nil {
			return false
		}
		for _, v := range ver {
			if v.Type == verify.TypeImage && v.Name == input && v.Digest != "" && t.Pinned(v.Digest) == image {
				return true
			}
		}
		return false
	}
	for _, i := range set.Images {
		out = append(out, Link{Input: "image: " + i.Name, Resource: i.Resource, Value: i.Image,
			Matches: same(i.Resource, "image", i.Image) || pinned(i.Resource, i.Name, i.Image)})
	}
	for _, c := range set.Configs {
		out = append(out, Link{Input: "config: " + c.Name, Resource: c.Resource, Value: c.Digest, Matches: configDigest(c.Resource) == c.Digest})
	}
	if d := set.Deployment; d != nil {
		out = append(out, Link{Input: "deployment", Resource: d.Resource, Value: d.URL + "@" + d.Revision,
			Matches: same(d.Resource, "url", d.URL) && same(d.Resource, "revision", d.Revision)})
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSuffix(s, "\n")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
