package step

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/runs"
	st "kontinue.dev/kontinue/reconciler/status"
)

// A Strategy decides, for the steps of one lifecycle, what to write and in
// which order. The executor (reconciler) reads what Start needs (Seen),
// then writes each Plan through stamp and hands back what happened (Got) to
// Next, until a Plan is Done. The order of the writes of a lifecycle (hold
// before apply, observe after it, the shadow last) is the sequence of Plans
// its Strategy returns, not the order of lines in the executor.
type Strategy interface {
	// Check refuses what the step's template rendered before anything is
	// read (nil: fine).
	Check(o Observed) *metav1.Condition
	// Start plans from what the cache shows before any write.
	Start(o Observed, seen Seen) Plan
	// Next plans again once the writes of p are done.
	Next(o Observed, p Plan, got Got) Plan
	// Record writes into the step's status what the decision keeps from one
	// reconcile to the next (its input set, the shadow, the last good
	// outputs); the conditions and outputs are the executor's to record.
	Record(ob Observation, res *st.Resource)
}

// Seen is what the executor read for Start.
type Seen struct {
	// Live is the primary object as the cache shows it (nil: none), read
	// when NeedsLive says so.
	Live *unstructured.Unstructured
	// Runs are the step's runs, newest first (immutable steps).
	Runs []runs.Run
	// Pending: a run for Observed.Digest was created a moment ago and the
	// cache has not shown it yet.
	Pending bool
}

// NeedsLive says whether Start decides on the primary's live object: a
// Strategy that does says when (liveReader).
func NeedsLive(spec *api.TemplateSpec) bool {
	r, ok := StrategyOf(spec).(liveReader)
	return ok && r.needsLive(spec)
}

type liveReader interface {
	needsLive(spec *api.TemplateSpec) bool
}

// Got is what the writes of a Plan did.
type Got struct {
	// Live is what each object of Apply (or the Create) is after the write.
	Live []*unstructured.Unstructured
	// Refs are the refs of Live.
	Refs []st.StampedRef
	// Wrote: the object at Plan.Primary was written (not already up to date).
	Wrote bool
	// Failed says why an absorbed write (Plan.Shadow) failed ("": it did not).
	Failed string
}

// Plan is one round of a step's writes, or its decision (Done).
type Plan struct {
	// Apply: objects to apply in place, in order.
	Apply []*unstructured.Unstructured
	// Primary is the index in Apply of the object Next reads.
	Primary int
	// Shadow: Apply is the step's shadow. A failure to write it does not
	// fail the step: the executor says why in Got.Failed.
	Shadow bool
	// Create: a run to create; its input set is Observed.Digest.
	Create *unstructured.Unstructured
	// Keep: runs that stay; Delete: runs retention no longer keeps (deleted
	// once Done: they do not change what the step reports).
	Keep, Delete []runs.Run
	// Reached: the step got to its runs (or Runnable) this time, so what
	// it made before and no longer makes may go.
	Reached bool
	// Ref is the object the step's stampedRef names from now on (nil:
	// unchanged). Objects are all the step's objects when it stamps more
	// than one (nil: unchanged; empty: it stamps one).
	Ref     *unstructured.Unstructured
	Objects []*unstructured.Unstructured
	// Requeue: look again after this long.
	Requeue time.Duration
	// Done is the step's decision: conditions, outputs, held inputs, the
	// state to keep and the shadow. Nil while writes are wanted.
	Done *Observation

	phase   phase
	pending Observation // the decision so far, for Next
	runs    []runs.Run  // the runs Start saw, for Next
}

type phase int

const (
	phaseApply phase = iota + 1
	phaseShadow
	phaseCreate
)

// Writes reports whether the plan asks for a write.
func (p Plan) Writes() bool { return len(p.Apply) > 0 || p.Create != nil }

func done(ob Observation) Plan { return Plan{Done: &ob} }

func refused(format string, args ...any) *metav1.Condition {
	c := st.Cond(st.ResourceSubmitted, st.False, ReasonStampFailure, fmt.Sprintf(format, args...))
	return &c
}

// stampedOnly: a step that stamps one object lists none in Objects.
var stampedOnly = []*unstructured.Unstructured{}
