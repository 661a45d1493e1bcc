package spans

// A Deliverable's revision linked to the Workload revision that made what
// it delivers: an OTLP span link from the span of the Deliverable's first
// step to the span of the Workload's step that stamped the Deliverable,
// and the hop `kontinue trace` prints between the two chains. Both ask
// LinkOf, so that a trace and a span link never disagree.
// A link, not a parent: the two are revisions of two owners, each its own
// trace (a parent would have to share the Workload's trace ID, and the
// Deliverable's spans of one revision written before and after the proof
// could be had would land in two traces), and a revision may come from no
// Workload at all.
//
// A link is made only when it is proven, never when it is merely likely:
// that a Workload stamped the Deliverable says nothing of which of its
// revisions made the commit or image the Deliverable's source step found
// (a Deliverable that follows a branch is stamped once and delivers every
// commit the Workload's config writer pushes later).

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Feed is what a caller read of the Workload that a Deliverable's
// controller reference names (same UID), and of the Deliverable itself:
// the evidence LinkOf weighs.
type Feed struct {
	// The Workload.
	Namespace, Name, UID string
	// Steps are the Workload's steps' statuses.
	Steps []st.Resource
	// Deliverable is the Deliverable's name (in the Workload's
	// namespace); Applied, Set and TraceParent are its annotations
	// kontinue.dev/applied-digest, kontinue.dev/input-set and
	// kontinue.dev/traceparent.
	Deliverable               string
	Applied, Set, TraceParent string
	// Traced says the caller knows traces are on, so that Kontinue puts
	// a traceparent on what it stamps: an absent one fails condition 3
	// (the controller's span links). Else (kontinue trace, which cannot
	// know whether traces were on when the Deliverable was written) an
	// absent traceparent is not weighed, and a present one must agree.
	Traced bool
}

// Link is a span of another trace: the Workload's step span a Deliverable's
// revision came from.
type Link struct {
	TraceID [16]byte
	SpanID  [8]byte
	Owner   Owner  // the Workload: kind, namespace, name
	Step    string // its step
}

// Condition is one of LinkOf's proofs, numbered as docs/operations.md
// lists them.
type Condition int

// The conditions, in the order LinkOf weighs them.
const (
	// CondOwner (1): the Deliverable's controller reference names the
	// Workload (same UID), and a step of the Workload's status names the
	// Deliverable as its object.
	CondOwner Condition = iota + 1
	// CondApplied (2): that step's provenance records the input set the
	// Deliverable carries (its applied digest), which traces back to a
	// known revision of the Workload.
	CondApplied
	// CondTraceParent (3): the Deliverable's traceparent is that
	// revision's trace and that step's span.
	CondTraceParent
	// CondValue (4): what the Deliverable's first step published is, by
	// digest, a value that set took.
	CondValue
)

// String is the condition's name, as `kontinue trace` prints it.
func (c Condition) String() string {
	switch c {
	case CondOwner:
		return "owner"
	case CondApplied:
		return "applied-digest"
	case CondTraceParent:
		return "traceparent"
	case CondValue:
		return "value"
	}
	return ""
}

// Proof is LinkOf's verdict: a link when every condition it weighed held
// (Failed is 0), else the first condition that failed and why. What the
// conditions that held found is kept either way.
type Proof struct {
	Link   Link
	Failed Condition
	Why    string
	// Held are the conditions that held, in order: CondTraceParent is
	// missing from a proof that did not weigh it (not Traced, and no
	// traceparent on the Deliverable).
	Held []Condition
	// Step is the Workload's step whose status names the Deliverable
	// (condition 1).
	Step string
	// Set is that step's input set the Deliverable carries, and
	// Revision the label of the Workload revision it traces back to
	// (condition 2).
	Set      *st.InputSet
	Revision string
	// Output is the name of the first step's output that is a value Set
	// took (condition 4).
	Output string
}

// Proven reports whether p links the revision to the Workload's.
func (p Proof) Proven() bool { return p.Failed == 0 }

func (p Proof) fail(c Condition, why string) Proof {
	p.Failed, p.Why, p.Link = c, why, Link{}
	return p
}

// LinkOf weighs whether f proves which Workload revision made the
// revision root published from set, root being a first step of a
// Deliverable (its published outputs are the revision):
//  1. a step of the Workload names the Deliverable as its object in its
//     status (Kontinue stamped it for that Workload, not someone who copied
//     a controller reference); f is nil when no Workload of the UID the
//     Deliverable's controller reference names could be read;
//  2. that step's provenance records the input set the Deliverable carries
//     (its applied digest), and that set traces back to a revision of the
//     Workload known for sure;
//  3. the Deliverable's traceparent is that revision's trace and that
//     step's span: what Kontinue put on it with that set (weighed when f
//     is Traced or the Deliverable carries one);
//  4. what root published from set is, value for value, something that set
//     took: a source's or deployment's revision, an image, a config (by
//     digest). A repository URL alone proves nothing: every revision has
//     it.
func LinkOf(f *Feed, root *st.Resource, set *st.InputSet) Proof {
	var p Proof
	if f == nil {
		return p.fail(CondOwner, "no Workload controls the Deliverable")
	}
	w := stamping(f)
	if w == nil {
		return p.fail(CondOwner, "no step of the Workload's status names the Deliverable")
	}
	p.Step = w.Name
	p.Held = append(p.Held, CondOwner)
	for _, s := range w.Provenance.Sets() {
		if f.carries(s.Digest) {
			p.Set = s
			break
		}
	}
	if p.Set == nil {
		return p.fail(CondApplied, "the Workload's step records no input set the Deliverable carries")
	}
	rev := history.RevisionOf(f.Steps, w.Name, p.Set)
	if !rev.Proven() {
		return p.fail(CondApplied, "the Workload's input set traces to no known revision")
	}
	p.Revision = rev.Label()
	p.Held = append(p.Held, CondApplied)
	tid := TraceID(f.UID, rev.Key())
	p.Link = Link{TraceID: tid, SpanID: SpanID(tid, w.Name), Step: w.Name,
		Owner: Owner{Kind: api.KindWorkload, Namespace: f.Namespace, Name: f.Name, UID: f.UID}}
	if f.Traced || f.TraceParent != "" {
		if tp, err := Parse(f.TraceParent); err != nil || tp.TraceID != p.Link.TraceID || tp.SpanID != p.Link.SpanID {
			return p.fail(CondTraceParent, "the Deliverable's traceparent is not that revision's")
		}
		p.Held = append(p.Held, CondTraceParent)
	}
	if root == nil || root.Provenance == nil || root.Provenance.Current == nil || set == nil ||
		root.Provenance.Current.Digest != set.Digest || len(root.Outputs) == 0 {
		return p.fail(CondValue, "the Deliverable's first step published nothing from this input set")
	}
	took := revisionValues(p.Set)
	for _, o := range root.Outputs {
		if took[o.Digest] {
			p.Output = o.Name
			p.Held = append(p.Held, CondValue)
			return p
		}
	}
	return p.fail(CondValue, "the Deliverable's revision is no value the Workload's step took")
}

// FeedOf is the Feed of Deliverable d stamped by Workload w, whose steps'
// statuses are steps: what the Deliverable's own annotations say of the
// set it was written for.
func FeedOf(w, d metav1.Object, steps []st.Resource) *Feed {
	ann := d.GetAnnotations()
	return &Feed{Namespace: w.GetNamespace(), Name: w.GetName(), UID: string(w.GetUID()), Steps: steps,
		Deliverable: d.GetName(), Applied: ann[api.AnnotationDigest], Set: ann[api.AnnotationInputSet], TraceParent: ann[api.AnnotationTraceParent]}
}

// carries reports whether the Deliverable was written for the Workload
// step's set id: it names the set, or it is that set's first render (an
// object written before objects named their set, or one whose set was
// taken again, re-rendered the same, since).
func (f *Feed) carries(id string) bool {
	return id != "" && (id == f.Set || id == f.Applied)
}

// StampedBy is the Workload's step whose status names the Deliverable as
// its object ("" when none does): condition 1 short of the first step.
func (f *Feed) StampedBy() string {
	if f == nil {
		return ""
	}
	if w := stamping(f); w != nil {
		return w.Name
	}
	return ""
}

// stamping is the Workload's step whose status names the Deliverable.
func stamping(f *Feed) *st.Resource {
	is := func(r *st.StampedRef) bool {
		return r != nil && r.Kind == api.KindDeliverable && r.APIVersion == api.Group+"/"+api.Version &&
			r.Namespace == f.Namespace && r.Name == f.Deliverable
	}
	for i := range f.Steps {
		r := &f.Steps[i]
		if is(r.StampedRef) {
			return r
		}
		for j := range r.StampedObjects {
			if is(&r.StampedObjects[j]) {
				return r
			}
		}
	}
	return nil
}

// revisionValues are the digests (as outputs carry them) of the values set
// took that name one revision: revisions, images, configs.
func revisionValues(set *st.InputSet) map[string]bool {
	out := map[string]bool{}
	add := func(v string) {
		if v != "" {
			_, d := st.Preview(v)
			out[d] = true
		}
	}
	for _, s := range set.Sources {
		add(s.Revision)
	}
	if d := set.Deployment; d != nil {
		add(d.Revision)
	}
	for _, i := range set.Images {
		add(i.Image)
	}
	for _, c := range set.Configs {
		if c.Digest != "" {
			out[c.Digest] = true
		}
	}
	return out
}
