package step

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
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
		if o.Kind == api.KindClusterDeploymentTemplate {
			if judged[0].Outcome == runs.Failed {
				res.Submitted = st.Cond(st.ResourceSubmitted, st.False, ReasonFailedConditionMet, fmt.Sprintf("step [%s], %s: %s", o.Step, describe(newest), h.Message))
			} else {
				res.Submitted = st.Cond(st.ResourceSubmitted, st.Unknown, ReasonConditionNotMet, fmt.Sprintf("step [%s], %s: %s", o.Step, describe(newest), h.Message))
			}
		}
		return res
	}
	good := read[hi]
	if good.outErr != nil {
		ok := judged[hi].Obj
		if paths.IsNotFound(good.outErr) {
			res.Submitted = st.Cond(st.ResourceSubmitted, st.Unknown, ReasonMissingValueAtPath,
				fmt.Sprintf("waiting to read value from healthy run %s for step [%s] (template [%s/%s]): %v", describe(ok), o.Step, o.Kind, o.Template, good.outErr))
		} else {
			res.Submitted = st.Cond(st.ResourceSubmitted, st.False, ReasonStampFailure,
				fmt.Sprintf("unable to read outputs from run %s for step [%s] (template [%s/%s]): %v", describe(ok), o.Step, o.Kind, o.Template, good.outErr))
		}
		return res
	}
	res.InputDigest = judged[hi].Digest
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
	return runRead{out: out, outErr: outErr, h: health.Evaluate(o.Spec, o.Kind, doc, outErr)}
}
