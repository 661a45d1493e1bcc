package owner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
)

// `runnable: true` (seed 000): instead of stamping the template's object,
// Kontinue generates a ClusterRunTemplate holding the template with every
// tag turned into a read of the Runnable's inputs, and a Runnable (owned by
// the owner, in its namespace) whose inputs are the tags' current values.
// The Runnable controller then creates a new object per input set, and the
// step reads its outputs from the Runnable's status.outputs.
//
// The ClusterRunTemplate is cluster-scoped, so it cannot have a namespaced
// owner reference: its name embeds a hash of owner kind, namespace, name and
// step (unique across namespaces), its labels name the owner and step (for
// people: labels decide nothing), and the owner's status records its UID
// (generated.go): Kontinue writes only the object of that UID, and deletes
// it, with that UID as precondition, when the step stops generating it
// (owner reconcile) or the owner is deleted (the owner's last status, from
// the delete event). It is written with Kontinue's own identity: it is
// Kontinue's bookkeeping, derived from a template the platform wrote, and a
// namespaced service account could not be granted a cluster-scoped kind
// through a RoleBinding anyway. The Runnable, and every run it creates, use
// the stamping service account.

// How runnable: true steps write: the generated ClusterRunTemplate (as
// Kontinue) and Runnable (as the stamping service account) applied in
// place. load generates them; the Strategy applies them in that order.
type runnableWriter struct {
	noRuns
	op *pass // generating the objects: the owner, its chain, its records
	io *ownerIO
	sc *stepCtx
}

func newRunnableWriter(op *pass, sc *stepCtx) stepIO {
	return &runnableWriter{op: op, io: op.io(), sc: sc}
}

// load generates the ClusterRunTemplate and the Runnable from the rendered
// object (Observed.Objects becomes them, the Runnable primary) and watches
// the Runnable.
func (w *runnableWriter) load(o *step.Observed) (step.Seen, *stepFail) {
	op := w.op
	sc := w.sc
	prepared := prepare.Prepared{Kind: sc.kind, Template: sc.tmplName, Spec: sc.spec, Inputs: sc.in, Params: sc.params, Labels: sc.labels, Objects: o.Objects[:1]}
	crt, rn, refused := prepare.Runnable(op.ctx, op.env.Flavor, op.owner, op.serviceAccount(), sc.step, prepared)
	if refused != nil {
		return step.Seen{}, &stepFail{cond: st.Cond(st.ResourceSubmitted, st.False, refused.Reason, refused.Message)}
	}
	o.Objects, o.Primary = []*unstructured.Unstructured{crt, rn}, 1
	// o.Digest stays the rendered object's: the input set the Runnable's
	// inputs carry, which its runs report on (the step's provenance).
	o.Desired = rn
	key := tracking.Key{GVR: api.RunnableGVR, Selector: api.StampedSelector}
	w.io.watch(key)
	if step.NeedsLiveSet(*o) {
		// The Runnable of this render names its set (step.SetID).
		if live, err := w.io.live(key, rn.GetNamespace(), rn.GetName()); err == nil && w.io.stamps(w.sc.step.Name, w.ref(rn), live) && live.GetAnnotations()[api.AnnotationDigest] == rn.GetAnnotations()[api.AnnotationDigest] {
			o.LiveSet = live.GetAnnotations()[api.AnnotationInputSet]
		}
	}
	w.io.keep.ref(w.ref(rn))
	return step.Seen{}, nil
}

// write applies the generated objects in the Plan's order.
func (w *runnableWriter) write(o step.Observed, p step.Plan) (step.Got, *stepFail) {
	var got step.Got
	for _, u := range p.Apply {
		var live *unstructured.Unstructured
		if u.GetKind() == api.KindClusterRunTemplate {
			var stop *stepFail
			if live, stop = w.putRunTemplate(u); stop != nil {
				return got, stop
			}
		} else {
			t := target{gvr: api.RunnableGVR, what: fmt.Sprintf("%s [%s] for step [%s] (template [%s/%s] sets runnable: true)", u.GetKind(), u.GetName(), w.sc.step.Name, w.sc.kind, w.sc.tmplName)}
			var stop *stepFail
			// The Runnable carries it; its runs get it from there.
			if live, _, stop = w.io.put(w.sc.step.Name, ridersOf(w.sc, o), t, u, false); stop != nil {
				return got, stop
			}
		}
		got.Live, got.Refs = append(got.Live, live), append(got.Refs, w.ref(u))
	}
	return got, nil
}

func (w *runnableWriter) ref(u *unstructured.Unstructured) st.StampedRef {
	gvr := api.RunnableGVR
	if u.GetKind() == api.KindClusterRunTemplate {
		gvr = api.RunTemplateGVR
	}
	return st.StampedRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Resource: resourceString(gvr)}
}

// ReasonRunTemplateRecorded (Kontinue, Unknown): the ClusterRunTemplate of
// a runnable: true step is recorded in the owner's status before it is
// created, on the next reconcile.
const ReasonRunTemplateRecorded = "RunTemplateRecorded"

// recordedDelay is when a step whose ClusterRunTemplate was just recorded
// is looked at again (the owner also waits for its status in the cache).
const recordedDelay = 10 * time.Millisecond

// putRunTemplate writes the step's generated ClusterRunTemplate, as
// Kontinue, only if it is the one the owner's record names
// (decideRunTemplate): created after its record, applied with the
// recorded UID as precondition, never an object someone else made.
func (w *runnableWriter) putRunTemplate(desired *unstructured.Unstructured) (*unstructured.Unstructured, *stepFail) {
	op, sc := w.op, w.sc
	name := desired.GetName()
	what := fmt.Sprintf("ClusterRunTemplate [%s] for step [%s] (template [%s/%s] sets runnable: true)", name, sc.step.Name, sc.kind, sc.tmplName)
	stop := func(c metav1.Condition, err error) (*unstructured.Unstructured, *stepFail) {
		return nil, &stepFail{cond: c, err: err}
	}
	failed := func(err error) (*unstructured.Unstructured, *stepFail) {
		return nil, w.io.writeFailed(what, err)
	}
	rec := w.runTemplateRecord(sc.step.Name, name)
	legacy := rec == nil && w.legacyRunTemplate(sc.step.Name, name)
	live, _ := op.env.Tracker.Get(tracking.Key{GVR: api.RunTemplateGVR}, "", name)
	read := false
	readLive := func() error {
		got, err := op.w.Read(op.ctx, op.env.Dynamic, api.RunTemplateGVR, "", name)
		if err != nil {
			return err
		}
		if got != nil {
			tracking.Compact(got)
		}
		live, read = got, true
		return nil
	}
	kontinue := stamp.For{Client: op.env.Dynamic, Owner: op.owner, Step: sc.step.Name} // its own identity: see above
	for attempt := 0; ; attempt++ {
		if attempt > 3 {
			// Created and gone again between each look: someone races us.
			return stop(st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonUnknownError, fmt.Sprintf("unable to apply %s: it keeps appearing and disappearing", what)), fmt.Errorf("%s: no stable state", what))
		}
		switch decideRunTemplate(rec, legacy, seenOf(live, w.labelledFor(live, sc.step.Name)), read) {
		case crtRecord:
			r := st.GeneratedRunTemplate{Step: sc.step.Name, Name: name, Claim: newClaim()}
			w.setRunTemplateRecord(r)
			return nil, &stepFail{cond: st.Cond(st.ResourceSubmitted, st.Unknown, ReasonRunTemplateRecorded,
				fmt.Sprintf("%s is recorded in the %s's status; it is created once the record is kept", what, op.env.Flavor.OwnerKind)), requeue: recordedDelay}
		case crtRead:
			if err := readLive(); err != nil {
				return failed(err)
			}
		case crtCreate:
			created, err := op.w.Create(op.ctx, kontinue, api.RunTemplateGVR, withClaim(desired, rec.Claim))
			if err == nil {
				rec.UID = created.GetUID()
				w.setRunTemplateRecord(*rec)
				return created, nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return failed(err)
			}
			if err := readLive(); err != nil {
				return failed(err)
			}
		case crtAdopt:
			if rec == nil {
				rec = &st.GeneratedRunTemplate{Step: sc.step.Name, Name: name}
				klog.InfoS("adopted a ClusterRunTemplate generated by an earlier version (no record; listed in the owner's status, labelled for it)",
					"owner", op.user, "step", sc.step.Name, "name", name, "uid", live.GetUID())
			}
			rec.UID = live.GetUID()
			w.setRunTemplateRecord(*rec)
			return w.applyRunTemplate(kontinue, what, desired, *rec, live)
		case crtApply:
			return w.applyRunTemplate(kontinue, what, desired, *rec, live)
		case crtRefuse:
			if op.env.WaitForName != nil {
				op.env.WaitForName(name, op.owner.GetNamespace(), op.owner.GetName())
			}
			return stop(st.Cond(st.ResourceSubmitted, st.False, step.ReasonNotOwned, fmt.Sprintf(
				"unable to apply %s: a ClusterRunTemplate of that name (uid %s) exists that Kontinue did not generate for this %s; it is left as it is (labels and annotations prove nothing): delete it to let Kontinue generate its own",
				what, live.GetUID(), op.env.Flavor.OwnerKind)), nil)
		}
	}
}

// applyRunTemplate applies a ClusterRunTemplate that is Kontinue's (rec
// names live's UID), with that UID in the applied object: the API server
// refuses the write if the name now holds another object, or none.
func (w *runnableWriter) applyRunTemplate(f stamp.For, what string, desired *unstructured.Unstructured, rec st.GeneratedRunTemplate, live *unstructured.Unstructured) (*unstructured.Unstructured, *stepFail) {
	d := withClaim(desired, rec.Claim)
	d.SetUID(rec.UID)
	out, err := w.op.w.ApplyTo(w.io.ctx, f, api.RunTemplateGVR, d, live)
	switch {
	case err == nil:
		return out, nil
	case apierrors.IsConflict(err) || apierrors.IsInvalid(err) && strings.Contains(err.Error(), "metadata.uid"):
		// Deleted or replaced since it was read: decided again from
		// fresh state.
		return nil, &stepFail{err: err, cond: st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonUnknownError, fmt.Sprintf("unable to apply %s: it changed while being written: %v", what, err))}
	}
	return nil, w.io.writeFailed(what, err)
}

// withClaim is a copy of desired carrying claim (none: as it is).
func withClaim(desired *unstructured.Unstructured, claim string) *unstructured.Unstructured {
	d := desired.DeepCopy()
	if claim != "" {
		ann := d.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationClaim] = claim
		d.SetAnnotations(ann)
	}
	return d
}

// runTemplateRecord is the owner's record of the step's ClusterRunTemplate
// of that name (a copy), or nil.
func (w *runnableWriter) runTemplateRecord(step, name string) *st.GeneratedRunTemplate {
	for _, r := range w.op.status.GeneratedRunTemplates {
		if r.Step == step && r.Name == name {
			return &r
		}
	}
	return nil
}

// setRunTemplateRecord records rec, replacing the step's record of that name.
func (w *runnableWriter) setRunTemplateRecord(rec st.GeneratedRunTemplate) {
	recs := &w.op.status.GeneratedRunTemplates
	for i, r := range *recs {
		if r.Step == rec.Step && r.Name == rec.Name {
			(*recs)[i] = rec
			return
		}
	}
	*recs = append(*recs, rec)
}

// legacyRunTemplate reports whether the owner's status comes from a version
// that kept no record and already lists name for the step: its previous
// status has no record for the step, and the step's stampedObjects name
// that ClusterRunTemplate.
func (w *runnableWriter) legacyRunTemplate(stepName, name string) bool {
	op := w.op
	for _, r := range op.prev.GeneratedRunTemplates {
		if r.Step == stepName {
			return false
		}
	}
	i := slices.IndexFunc(op.prev.Resources, func(r st.Resource) bool { return r.Name == stepName })
	if i < 0 {
		return false
	}
	for _, ref := range op.prev.Resources[i].StampedObjects {
		if ref.Kind == api.KindClusterRunTemplate && ref.Name == name {
			return true
		}
	}
	return false
}

// labelledFor reports whether u's labels name this owner and step (what
// versions that kept no record wrote on a generated ClusterRunTemplate).
func (w *runnableWriter) labelledFor(u *unstructured.Unstructured, stepName string) bool {
	op := w.op
	if u == nil {
		return false
	}
	l, f := u.GetLabels(), op.env.Flavor
	return l[api.StampedLabel] == "true" && l[f.LabelOwnerName] == op.owner.GetName() && l[f.LabelOwnerNS] == op.owner.GetNamespace() && l[api.LabelResourceName] == stepName
}
