package spans

// A Deliverable's revision linked to the Workload revision that made what
// it delivers: an OTLP span link from the span of the Deliverable's first
// step to the span of the Workload's step that stamped the Deliverable.
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
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Feed is what a Deliverable's reconcile read of the Workload that its
// controller reference names (same UID, from the cache), and of the
// Deliverable itself: the evidence LinkOf weighs.
type Feed struct {
	// The Workload.
	Namespace, Name, UID string
	// Steps are the Workload's steps' statuses.
	Steps []st.Resource
	// Deliverable is the Deliverable's name (in the Workload's
	// namespace); Applied and TraceParent are its annotations
	// kontinue.dev/applied-digest and kontinue.dev/traceparent.
	Deliverable          string
	Applied, TraceParent string
}

// Link is a span of another trace: the Workload's step span a Deliverable's
// revision came from.
type Link struct {
	TraceID [16]byte
	SpanID  [8]byte
	Owner   Owner  // the Workload: kind, namespace, name
	Step    string // its step
}

// LinkOf is the link of the span of root's input set set, root being a
// first step of a Deliverable (its published outputs are the revision),
// when f proves which Workload revision made them; else why says which
// proof failed:
//  1. a step of the Workload names the Deliverable as its object in its
//     status (Kontinue stamped it for that Workload, not someone who copied
//     a controller reference);
//  2. that step's provenance records the input set the Deliverable carries
//     (its applied digest), and that set traces back to a revision of the
//     Workload known for sure;
//  3. the Deliverable's traceparent is that revision's trace and that
//     step's span: what Kontinue put on it with that set;
//  4. what root published from set is, value for value, something that set
//     took: a source's or deployment's revision, an image, a config (by
//     digest). A repository URL alone proves nothing: every revision has
//     it.
func LinkOf(f *Feed, root *st.Resource, set *st.InputSet) (Link, string) {
	if f == nil {
		return Link{}, "no Workload controls the Deliverable"
	}
	if root == nil || root.Provenance == nil || root.Provenance.Current == nil || set == nil ||
		root.Provenance.Current.Digest != set.Digest || len(root.Outputs) == 0 {
		return Link{}, "the Deliverable's first step published nothing from this input set"
	}
	w := stamping(f)
	if w == nil {
		return Link{}, "no step of the Workload's status names the Deliverable"
	}
	var made *st.InputSet
	for _, s := range w.Provenance.Sets() {
		if f.Applied != "" && s.Digest == f.Applied {
			made = s
		}
	}
	if made == nil {
		return Link{}, "the Workload's step records no input set the Deliverable carries"
	}
	rev := history.RevisionOf(f.Steps, w.Name, made)
	if !rev.Proven() {
		return Link{}, "the Workload's input set traces to no known revision"
	}
	tid := TraceID(f.UID, rev.Key())
	l := Link{TraceID: tid, SpanID: SpanID(tid, w.Name), Step: w.Name,
		Owner: Owner{Kind: api.KindWorkload, Namespace: f.Namespace, Name: f.Name, UID: f.UID}}
	if tp, err := Parse(f.TraceParent); err != nil || tp.TraceID != l.TraceID || tp.SpanID != l.SpanID {
		return Link{}, "the Deliverable's traceparent is not that revision's"
	}
	took := revisionValues(made)
	for _, o := range root.Outputs {
		if took[o.Digest] {
			return l, ""
		}
	}
	return Link{}, "the Deliverable's revision is no value the Workload's step took"
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
