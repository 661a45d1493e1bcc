// Package step decides, without talking to the API server, what one step of
// a chain reports and publishes. Given the template's spec, the object
// rendered now, the live object(s) from the cache and what the step
// remembers from its previous status, it returns an Observation: the step's
// conditions, the outputs downstream steps get, what the step remembers next
// time, whether new inputs are held, and which shadow object should exist.
// Writing anything (the object, the shadow, runs) is the caller's job, with
// reconciler/stamp; where a decision needs the result of a write (a shadow's
// health), the Observation says so and takes it back (WithShadow).
//
// A Strategy per way a step lives (plan.go) turns those decisions into
// Plans: what to write, in which order, and what the step reports when the
// writes are done. Each lifecycle is registered once, with its Strategy and
// all else that differs between lifecycles (lifecycle.go: Lifecycle,
// LifecycleOf), and has its file: mutable.go (updated in place; gated when
// the template says what success is), shadow.go (the last-good copy of a
// failed gated object), immutable.go (lifecycle immutable/tekton: a run per
// input set), runnable.go (runnable: true, a generated Runnable).
package step

import (
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/health"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Step reasons (ResourceSubmitted), the contract's.
const (
	ReasonSubmitted           = "ResourceSubmissionComplete"
	ReasonMissingValueAtPath  = "MissingValueAtPath"
	ReasonStampFailure        = "TemplateStampFailure"
	ReasonRejected            = "TemplateRejectedByAPIServer"
	ReasonRetrievalFailure    = "TemplateObjectRetrievalFailure"
	ReasonOptionsMatchError   = "TemplateOptionsMatchError"
	ReasonResolveOptionsError = "ResolveTemplateOptionsError"
	ReasonServiceAccountError = "ServiceAccountError"
	// ReasonNotOwned (Kontinue): an object of the stamped name exists and
	// was not stamped for this owner; Kontinue leaves it alone.
	ReasonNotOwned = "StampedObjectNotOwned"
	// ReasonContested (Kontinue): another writer sets a field of the
	// object back after each of Kontinue's writes; Kontinue stopped writing
	// it for a while (stamp.Fight) rather than fight.
	ReasonContested            = "StampedObjectContested"
	ReasonUnknownError         = "UnknownError"
	ReasonPassThrough          = "PassThrough"
	ReasonConditionNotMet      = "ConditionNotMet"
	ReasonFailedConditionMet   = "FailedConditionMet"
	ReasonHealthyConditionRule = "HealthyConditionRule"
	// ReasonInputsHeld: the step holds newer inputs until its object has
	// succeeded or failed on the ones it has.
	ReasonInputsHeld = "InputsHeld"
	// ReasonProgressDeadlineExceeded: the object worked on one input set
	// longer than the template's progressDeadline; the set counts as failed.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
)

// Reasons name the causes of a step's failed read or write
// (failure.Condition.Cond of its ResourceSubmitted).
var Reasons = failure.Reasons{Unknown: ReasonUnknownError, Refused: ReasonRejected, Account: ReasonServiceAccountError,
	NameTaken: ReasonRejected, Scope: ReasonStampFailure, Taken: ReasonNotOwned, Fought: ReasonContested}

// AnnotationDigest holds the digest of the object Kontinue last applied: its
// input set.
const AnnotationDigest = api.AnnotationDigest

// AnnotationInputSet names an object's provenance input set (provenance.go).
const AnnotationInputSet = api.AnnotationInputSet

// Outputs of a step: "url"/"revision", "image", "config", or none.
type Outputs map[string]any

// State is what a step remembers from one reconcile to the next (in its
// status): the outputs of its last success and the input set that produced
// them, the object that input set rendered, and its shadow.
type State struct {
	Good           Outputs
	GoodDigest     string
	LastGoodObject map[string]any
	ShadowRef      *st.StampedRef
	ServedBy       string
	// ProcessingDigest is the input set the object has worked on since
	// ProcessingSince without succeeding or failing (the deadline's clock).
	ProcessingDigest string
	ProcessingSince  time.Time
	// RetryHandled is the retry token the step last handled.
	RetryHandled string
	// AppliedDigest is the input set on the object as the step rendered it
	// when it applied it: the object (AppliedObject, a step that can have a
	// shadow) and, for a step whose outputs are its inputs (a deployment),
	// those inputs (AppliedOutputs). A success of that set seen only once a
	// newer set is rendered (Admit) records them: the live object is not
	// what was rendered (defaults, other controllers' fields) and the new
	// render's inputs are not the set's. Kept in the status only while the
	// set is not the last good one (Record).
	AppliedDigest  string
	AppliedObject  map[string]any
	AppliedOutputs Outputs
}

// StateOf reads the State from a step's previous status (nil: none).
func StateOf(prev *st.Resource) State {
	if prev == nil {
		return State{}
	}
	s := State{GoodDigest: prev.InputDigest, LastGoodObject: prev.LastGoodObject, ShadowRef: prev.ShadowRef, ServedBy: prev.ServedBy,
		ProcessingDigest: prev.ProcessingInputDigest, RetryHandled: prev.LastHandledRetry}
	if prev.ProcessingSince != nil {
		s.ProcessingSince = prev.ProcessingSince.Time
	}
	if prev.OutputValues != nil {
		s.Good = Outputs(prev.OutputValues)
	}
	s.AppliedDigest, s.AppliedObject = prev.AppliedInputDigest, prev.AppliedObject
	if prev.AppliedOutputValues != nil {
		s.AppliedOutputs = Outputs(prev.AppliedOutputValues)
	}
	return s
}

// Observed is what a step's decision starts from.
type Observed struct {
	Kind     string // template kind
	Step     string // step name
	Template string // template name
	Spec     *api.TemplateSpec
	// Def is the chain's step (named Step): a decision that reads a field
	// of it finds it here, as it finds the template's in Spec, with no
	// plumbing in the callers (nil: none at hand).
	Def *api.Step
	// Deployment is a deployment step's input (url, revision), which it
	// passes on as its outputs.
	Deployment Outputs
	// Desired is the primary object rendered now; Digest its input set.
	Desired *unstructured.Unstructured
	Digest  string
	State   State
	// Objects are every object to stamp, Desired at Primary.
	Objects []*unstructured.Unstructured
	Primary int
	// Now is the reconcile's time (the progress deadline's clock); step
	// never reads a clock itself.
	Now time.Time
	// Retry is the owner's retry token (annotations.Retry; "": none): an
	// immutable step whose newest run of the current inputs failed creates
	// one more, once per token.
	Retry string
	// Inputs are the values Digest was rendered from (no times, no
	// outcome), and PrevProvenance the step's provenance in its previous
	// status: what NextProvenance starts from.
	Inputs         st.InputSet
	PrevProvenance *st.Provenance
	// LiveSet is the input set the live object of this render names
	// (LiveSetOf; "": none, or not read: NeedsLiveSet).
	LiveSet string
	// Resource is the resource of Desired's kind, plural.group (as
	// StampedRef.Resource), for messages ("": not resolved).
	Resource string
}

// Observation is a step's decision in one reconcile.
type Observation struct {
	State     State
	Submitted metav1.Condition
	// Healthy is nil when there is nothing to judge yet.
	Healthy *metav1.Condition
	// Held: a gated step keeps its new input set out (HeldDigest).
	Held       bool
	HeldDigest string
	// Gated: outputs come from State (the last success), and the step's
	// status records them with their input set.
	Gated bool
	// ShadowWant is the shadow object that should exist (nil: none). The
	// caller stamps it and reports back with WithShadow or ShadowFailed
	// before it reads Outputs: a shadow in success serves the outputs.
	ShadowWant *unstructured.Unstructured
	// Recheck: look again after this long, when the progress deadline
	// passes with nothing else to wake the step (0: no need).
	Recheck   time.Duration
	out       Outputs
	runDigest string // an immutable step's: the input set of the run whose outputs are published
	runSaid   string // the set that run names (AnnotationInputSet)
	retry     string // an immutable step's: the retry token handled
	// shadowHold: Held only until the shadow is stamped (Admit); a shadow
	// that cannot be stamped lets the newer set in.
	shadowHold bool
	// applied is the applied digest of the object (or its newest run),
	// appliedSaid the input set it names and appliedOutcome what it came
	// to with it (provenance.go).
	applied, appliedSaid string
	appliedOutcome       health.Outcome
}

func healthyOf(status, reason, msg string) *metav1.Condition {
	c := st.Cond(st.Healthy, metav1.ConditionStatus(status), reason, msg)
	return &c
}

// OutputError is a failure to read an output path: Path is the
// template's field as written (messages name it, as Cartographer's do).
type OutputError struct {
	Path string
	Err  error
}

func (e *OutputError) Error() string { return e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }

// ReadOutputs evaluates the template's output paths on the object. An
// error is an *OutputError.
func ReadOutputs(kind string, spec *api.TemplateSpec, doc []byte, deployment Outputs) (Outputs, error) {
	read := func(expr string) (any, error) {
		p, err := paths.Compile(TrimTag(expr))
		if err == nil {
			var v any
			if v, err = p.Value(doc); err == nil {
				return v, nil
			}
		}
		return nil, &OutputError{Path: expr, Err: err}
	}
	out := Outputs{}
	var err error
	switch kind {
	case api.KindClusterSourceTemplate:
		if out["url"], err = read(spec.URLPath); err != nil {
			return nil, err
		}
		if out["revision"], err = read(spec.RevisionPath); err != nil {
			return nil, err
		}
	case api.KindClusterImageTemplate:
		if out["image"], err = read(spec.ImagePath); err != nil {
			return nil, err
		}
	case api.KindClusterConfigTemplate:
		if out["config"], err = read(spec.ConfigPath); err != nil {
			return nil, err
		}
	case api.KindClusterDeploymentTemplate:
		if deployment != nil {
			out["url"], out["revision"] = deployment["url"], deployment["revision"]
		}
	}
	return out, nil
}

// TrimTag accepts output paths written as a tag, "$(status.latestImage)$".
func TrimTag(expr string) string {
	e := strings.TrimSpace(expr)
	if strings.HasPrefix(e, "$(") && strings.HasSuffix(e, ")$") {
		return e[2 : len(e)-2]
	}
	return e
}

// outputsCondition says why outputs could not be read from obj, whose
// health the step judged healthy: a value not there yet is waited for, in
// Cartographer's words (MissingValue); any other error is the template's.
func outputsCondition(o Observed, obj *unstructured.Unstructured, healthy string, outErr error) metav1.Condition {
	if paths.IsNotFound(outErr) {
		path := ""
		if oe := (*OutputError)(nil); errors.As(outErr, &oe) {
			path = oe.Path
		}
		return st.Cond(st.ResourceSubmitted, st.Unknown, ReasonMissingValueAtPath, MissingValue(path, o.Resource, obj, healthy))
	}
	return st.Cond(st.ResourceSubmitted, st.False, ReasonStampFailure,
		fmt.Sprintf("unable to read outputs from %s for step [%s] (template [%s/%s]): %v", describe(obj), o.Step, o.Kind, o.Template, outErr))
}

// MissingValue is Cartographer's message for an output path that does not
// resolve on obj (of resource, plural.group) yet, by the step's health.
func MissingValue(path, resource string, obj *unstructured.Unstructured, healthy string) string {
	in := ""
	if ns := obj.GetNamespace(); ns != "" {
		in = " in namespace [" + ns + "]"
	}
	switch healthy {
	case string(st.True):
		return fmt.Sprintf("cannot read value [%s] from healthy object [%s/%s]%s, contact Platform Eng", path, resource, obj.GetName(), in)
	case string(st.False):
		return fmt.Sprintf("cannot read value [%s] from unhealthy object [%s/%s]%s, examine object, particularly whether it is receiving proper inputs", path, resource, obj.GetName(), in)
	}
	return fmt.Sprintf("waiting to read value [%s] from object [%s/%s]%s", path, resource, obj.GetName(), in)
}

// firstOutputPath is the path Cartographer names while a step has no
// object to read its outputs from: the first of its kind's ("": a kind
// without outputs).
func firstOutputPath(kind string, spec *api.TemplateSpec) string {
	switch kind {
	case api.KindClusterSourceTemplate:
		return spec.URLPath
	case api.KindClusterImageTemplate:
		return spec.ImagePath
	case api.KindClusterConfigTemplate:
		return spec.ConfigPath
	}
	return ""
}

func describe(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s [%s/%s]", u.GetKind(), u.GetNamespace(), u.GetName())
}
