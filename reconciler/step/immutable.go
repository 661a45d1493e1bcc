package step

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/apply"
	"kontinue.dev/kontinue/reconciler/health"
	"kontinue.dev/kontinue/reconciler/runs"
	st "kontinue.dev/kontinue/reconciler/status"
)

// A step of lifecycle immutable or tekton creates a run per input set
// (runs.NeedsCreate decides when) and never updates one.

// runRead is what was read from one run.
type runRead struct {
	out    Outputs
	outErr error
	h      health.Result
}

// Runs is what an immutable step decided from its runs.
type Runs struct {
	Observation
	// Newest is the newest run: the step's stampedRef (nil: none listed).
	Newest *unstructured.Unstructured
	// InputDigest is the input set of the run whose outputs are published.
	InputDigest string
	// Judged is the list with every run's outcome: retention prunes by it.
	Judged []runs.Run
}

// ObserveRuns judges every run (newest first) once, then reports: the
// stampedRef is the newest run, outputs come from the newest run that
// succeeded (downstream waits until there is one), Healthy is the newest
// run's health unless it is still running and an older run succeeded.
func ObserveRuns(o Observed, list []runs.Run) Runs {
	judged := make([]runs.Run, len(list))
	read := make([]runRead, len(list))
	for i, r := range list {
		read[i] = readRun(o, r.Obj)
		r.Outcome = outcomeOf(read[i].h)
		judged[i] = r
	}
	res := Runs{Judged: judged, Observation: Observation{State: o.State}}
	if len(judged) == 0 {
		// Only while the cache catches up with a run just created.
		res.Submitted = st.Cond(st.ResourceSubmitted, st.Unknown, ReasonSubmitted, fmt.Sprintf("step [%s]: waiting for the new run to appear", o.Step))
		return res
	}
	newest := judged[0].Obj
	res.Newest = newest
	res.noteApplied(judged[0].Digest, saidSet(newest), read[0].h.Outcome)
	hi := runs.NewestSucceeded(judged)
	h := read[0].h
	res.Healthy = healthyOf(h.Status, h.Reason, describe(newest)+": "+h.Message)
	if hi > 0 && judged[0].Outcome == runs.Running {
		hh := read[hi].h
		res.Healthy = healthyOf(hh.Status, hh.Reason,
			fmt.Sprintf("outputs from %s; newest run %s is still running: %s", describe(judged[hi].Obj), describe(newest), h.Message))
	}
	res.Submitted = st.Cond(st.ResourceSubmitted, st.True, ReasonSubmitted, "")
	if hi < 0 {
		switch path := firstOutputPath(o.Kind, o.Spec); {
		case o.Kind == api.KindClusterDeploymentTemplate && judged[0].Outcome == runs.Failed:
			res.Submitted = st.Cond(st.ResourceSubmitted, st.False, ReasonFailedConditionMet, fmt.Sprintf("step [%s], %s: %s", o.Step, describe(newest), h.Message))
		case o.Kind == api.KindClusterDeploymentTemplate:
			res.Submitted = st.Cond(st.ResourceSubmitted, st.Unknown, ReasonConditionNotMet, fmt.Sprintf("step [%s], %s: %s", o.Step, describe(newest), h.Message))
		case path != "":
			// No run to read outputs from yet: Cartographer's words, naming
			// the newest run by its health.
			res.Submitted = st.Cond(st.ResourceSubmitted, st.Unknown, ReasonMissingValueAtPath, MissingValue(path, o.Resource, newest, h.Status))
		}
		return res
	}
	good := read[hi]
	if good.outErr != nil {
		res.Submitted = outputsCondition(o, judged[hi].Obj, string(st.True), good.outErr)
		return res
	}
	res.InputDigest, res.runSaid = judged[hi].Digest, saidSet(judged[hi].Obj)
	res.out = good.out
	return res
}

func outcomeOf(h health.Result) runs.Outcome {
	switch h.Outcome {
	case health.Succeeded:
		return runs.Succeeded
	case health.Failed:
		return runs.Failed
	}
	return runs.Running
}

func readRun(o Observed, obj *unstructured.Unstructured) runRead {
	doc, err := obj.MarshalJSON()
	if err != nil {
		return runRead{outErr: err, h: health.Result{Outcome: health.Processing, Status: health.StatusUnknown, Reason: health.ReasonInvalidObject, Message: err.Error()}}
	}
	out, outErr := ReadOutputs(o.Kind, o.Spec, doc, o.Deployment)
	return runRead{out: out, outErr: outErr, h: health.EvaluateWith(o.Spec, LifecycleOf(o.Spec).Health, o.Kind, doc, outErr)}
}

// immutable is the Strategy of lifecycle immutable and tekton: the step
// creates a run when its input set has none yet (never applies), reads
// outputs from its runs, then deletes the runs retention does not keep.
type immutable struct{}

func (immutable) Check(o Observed) *metav1.Condition {
	if len(o.Objects) != 1 {
		return refused("step [%s]: a template with lifecycle %s stamps exactly one object per input set; template [%s/%s] rendered %d",
			o.Step, o.Spec.Lifecycle, o.Kind, o.Template, len(o.Objects))
	}
	return nil
}

// RunOf is the run the step creates for its rendered object, and its input
// set: runs are never applied, so the digest annotation is left out and the
// input digest label (stamp.Writer.Create) identifies them.
//
// The shard label is left out of the input set: an owner that moves shard
// keeps its runs (the new shard relabels them) and never runs again.
func RunOf(desired *unstructured.Unstructured) (*unstructured.Unstructured, string) {
	run := desired.DeepCopy()
	ann := run.GetAnnotations()
	delete(ann, AnnotationDigest)
	run.SetAnnotations(ann)
	l := run.GetLabels()
	shard, sharded := l[api.ShardLabel]
	if !sharded {
		return run, apply.Digest(run.Object)
	}
	delete(l, api.ShardLabel)
	if len(l) == 0 {
		l = nil // as rendered: no labels at all
	}
	run.SetLabels(l)
	digest := apply.Digest(run.Object)
	if l == nil {
		l = map[string]string{}
	}
	l[api.ShardLabel] = shard
	run.SetLabels(l)
	return run, digest
}

// Start creates a run for Observed.Digest (the run's input set, RunOf)
// unless one exists or was just created; a run the cache does not show yet
// is looked for again shortly.
//
// A retry token the step has not handled (Observed.Retry) makes one more
// run of the same inputs when the newest run failed (runs.Retry), marked
// with the token and the run it retries.
func (s immutable) Start(o Observed, seen Seen) Plan {
	retry := retryAsked(o, seen.Runs)
	switch runs.Decide(seen.Runs, o.Digest, seen.Pending, retry) {
	case runs.Create:
		create := o.Desired
		if retry {
			create = runs.RetryRun(create, o.Retry, seen.Runs[0])
		}
		return Plan{Create: create, phase: phaseCreate, runs: seen.Runs}
	case runs.Wait:
		p := s.observe(o, seen.Runs)
		p.Requeue = runs.PendingWait
		return p
	}
	return s.observe(o, seen.Runs)
}

// retryAsked says whether o's retry token asks for one more run (of the
// newest, failed). Only the newest run is judged here (ObserveRuns judges
// them all after).
func retryAsked(o Observed, list []runs.Run) bool {
	if o.Retry == "" || o.Retry == o.State.RetryHandled || len(list) == 0 {
		return false
	}
	judged := append([]runs.Run{list[0]}, list[1:]...)
	judged[0].Outcome = outcomeOf(readRun(o, list[0].Obj).h)
	return runs.Retry(judged, o.Digest, o.Retry)
}

func (s immutable) Next(o Observed, p Plan, got Got) Plan {
	if p.phase != phaseCreate {
		return p
	}
	return s.observe(o, append([]runs.Run{runs.FromObject(got.Live[0], runs.Running)}, p.runs...))
}

// observe decides from the runs (newest first), and which of them retention
// lets go.
func (immutable) observe(o Observed, list []runs.Run) Plan {
	obs := ObserveRuns(o, list)
	obs.runDigest, obs.retry = obs.InputDigest, o.Retry
	p := Plan{Done: &obs.Observation, Reached: true, Delete: runs.Prune(obs.Judged, runs.PolicyOf(o.Spec.RetentionPolicy))}
	doomed := map[*unstructured.Unstructured]bool{}
	for _, d := range p.Delete {
		doomed[d.Obj] = true
	}
	for _, r := range obs.Judged {
		if !doomed[r.Obj] {
			p.Keep = append(p.Keep, r)
		}
	}
	if obs.Newest != nil {
		p.Ref, p.Objects = obs.Newest, stampedOnly
	}
	return p
}

func (immutable) Record(ob Observation, res *st.Resource) {
	if ob.runDigest != "" {
		res.InputDigest = ob.runDigest
	}
	// Handled, whatever the runs said: a token asks once.
	res.LastHandledRetry = ob.retry
}
