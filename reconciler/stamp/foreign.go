package stamp

// Foreign runs (runs.SameInputs): runs of a step or a Runnable another
// controller created, Cartographer's after a switch. They lack Kontinue's
// labels, so neither its watches nor its lists of runs show them; the API
// server's list by the step's labels does. LoadRuns looks for them when it
// would create a run, or when the status names a run it does not find
// (Cartographer wrote that status), and adopts each: its labels become
// Kontinue's (the run of the current inputs, recognised by what it holds,
// gets the current digest and the riders a create would have given it;
// the others runs.ForeignDigest). Nothing else of the run changes, and no
// run is created for inputs that ran.

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/runs"
)

// Adoption is what LoadRuns needs to adopt foreign runs: who creates the
// runs (For: the service account's client, the owner or Runnable, the
// step, the riders) and the run rendered now, as CreateRun would take it.
type Adoption struct {
	For     For
	Desired *unstructured.Unstructured
}

// AdoptError is a failure to adopt foreign runs: to list them, to ask
// what the current run would be, or to label one. The step or Runnable
// says so, and creates nothing until they are adopted.
type AdoptError struct{ Err error }

func (e *AdoptError) Error() string { return e.Err.Error() }
func (e *AdoptError) Unwrap() error { return e.Err }

// lookForForeign says whether q's runs (list, newest first) call for a
// look at foreign runs: a run would be created, or the status names one
// that is not among them.
func lookForForeign(q RunQuery, list []runs.Run, pending bool) bool {
	if q.Adopt == nil {
		return false
	}
	if runs.Decide(list, q.Current, pending, false) == runs.Create {
		return true
	}
	for _, r := range list {
		if r.Name == q.Recorded {
			return false
		}
	}
	return true
}

// adoptForeign adopts q's foreign runs and returns list with them, newest
// first. An error (the list, the dry run, a patch) is noted and returned:
// nothing is created until every foreign run is adopted.
func (w *Session) adoptForeign(ctx context.Context, q RunQuery, list []runs.Run) (_ []runs.Run, err error) {
	defer func() {
		if err != nil {
			err = &AdoptError{Err: w.Note(err)}
		}
	}()
	sel := labels.NewSelector()
	for k, v := range q.Labels {
		if k == api.StampedLabel {
			continue
		}
		r, err := labels.NewRequirement(k, selection.Equals, []string{v})
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*r)
	}
	none, _ := labels.NewRequirement(runs.LabelInputDigest, selection.DoesNotExist, nil)
	sel = sel.Add(*none)
	l, err := resource(w.dyn, q.Kind.GVR, q.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return list, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the runs another controller created: %w", err)
	}
	var foreign []*unstructured.Unstructured
	for i := range l.Items {
		o := &l.Items[i]
		if c := metav1.GetControllerOfNoCopy(o); c == nil || c.UID != q.Controller || o.GetDeletionTimestamp() != nil {
			continue
		}
		foreign = append(foreign, o)
	}
	if len(foreign) == 0 {
		return list, nil
	}
	f := q.Adopt.For
	current := runs.NewestForeign(foreign, list)
	if current != nil {
		stored, err := w.dryRunCreate(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("asking the API server (dry run) what %s %s/%s would be for the current inputs: %w",
				current.GetKind(), current.GetNamespace(), current.GetName(), err)
		}
		if !runs.SameInputs(q.Adopt.Desired, stored, current) {
			current = nil
		}
	}
	for _, o := range foreign {
		digest, rides := runs.ForeignDigest, For{}
		if o == current {
			digest, rides = q.Current, f
		}
		got, err := resource(f.Client, q.Kind.GVR, o.GetNamespace()).Patch(ctx, o.GetName(), types.MergePatchType,
			adoptPatch(o.GetUID(), digest, w.Shard, rides), metav1.PatchOptions{FieldManager: FieldManager})
		w.note(true)
		if err != nil {
			return nil, fmt.Errorf("labelling %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		list = append(list, runs.FromObject(got, runs.Running))
	}
	forStep := ""
	if f.Step != "" {
		forStep = " of step [" + f.Step + "]"
	}
	msg := fmt.Sprintf("Took over %d %s run(s)%s that another controller created; none ran the current inputs", len(foreign), foreign[0].GetKind(), forStep)
	if current != nil {
		msg = fmt.Sprintf("Took over %d %s run(s)%s that another controller created; %s ran the current inputs", len(foreign), foreign[0].GetKind(), forStep, current.GetName())
	}
	w.Events.Event(f.Owner, corev1.EventTypeNormal, EventRunsAdopted, "%s", msg)
	klog.InfoS("adopted runs another controller created", "for", q.Memo, "runs", len(foreign), "current", current != nil)
	runs.SortNewestFirst(list, q.Current)
	return list, nil
}

// dryRunCreate asks the API server what it would store for the run
// rendered now (defaults, admission webhooks), as the account that
// creates runs. A run of a fixed name is asked with that name to generate
// from: the name is taken (by the foreign run, likely).
func (w *Session) dryRunCreate(ctx context.Context, q RunQuery) (*unstructured.Unstructured, error) {
	obj := ridden(q.Adopt.Desired, q.Adopt.For).DeepCopy()
	if n := obj.GetName(); n != "" {
		obj.SetGenerateName(n)
		obj.SetName("")
	}
	obj.SetNamespace(q.Namespace)
	got, err := resource(q.Adopt.For.Client, q.Kind.GVR, q.Namespace).Create(ctx, obj,
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager})
	return got, err
}

// adoptPatch makes the object of uid a run of digest in shard, with the
// riders of f (metadata.uid is a precondition: it is immutable).
func adoptPatch(uid types.UID, digest, shard string, f For) []byte {
	l := map[string]any{api.StampedLabel: "true", runs.LabelInputDigest: digest}
	if shard != "" {
		l[api.ShardLabel] = shard
	}
	md := map[string]any{"uid": uid, "labels": l}
	ann := map[string]any{}
	if f.TraceParent != "" {
		ann[api.AnnotationTraceParent] = f.TraceParent
	}
	if f.InputSet != "" {
		ann[api.AnnotationInputSet] = f.InputSet
	}
	if len(ann) > 0 {
		md["annotations"] = ann
	}
	b, _ := json.Marshal(map[string]any{"metadata": md})
	return b
}
