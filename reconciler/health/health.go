// Package health decides whether a stamped object has succeeded, failed or
// is still processing, and what the step's Healthy condition says.
//
// It is one model for Cartographer's healthRule (alwaysHealthy,
// singleConditionType, multiMatch) and seed 002's observedCompletion,
// observedMatches and alwaysSuccessful, with nestable and/or/not rules.
//
// When a template sets several rules, the first of these decides:
//
//  1. alwaysSuccessful
//  2. observedCompletion
//  3. observedMatches
//  4. healthRule
//  5. the default: the lifecycle's rule, when it has one (EvaluateWith:
//     lifecycle tekton reads the Succeeded condition, as singleConditionType:
//     Succeeded; reconciler/step's Lifecycle.Health); else a ClusterTemplate
//     is healthy once stamped, and other kinds once their outputs can be read.
//
// The more specific seed 002 rules come before healthRule because they can
// also tie an output to its input (observedGeneration, observedMatches).
//
// Everything here is pure: it reads the template spec and the object's JSON
// and never panics, whatever the object holds.
package health

import (
	"bytes"
	"fmt"

	"github.com/tidwall/gjson"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
)

// Outcome is what a step's object has come to.
type Outcome int

const (
	// Processing means not yet known or still in progress.
	Processing Outcome = iota
	Succeeded
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Processing:
		return "Processing"
	case Succeeded:
		return "Succeeded"
	case Failed:
		return "Failed"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Condition statuses.
const (
	StatusTrue    = "True"
	StatusFalse   = "False"
	StatusUnknown = "Unknown"
)

// Reasons of the step's Healthy condition. singleConditionType uses
// "<Type>Condition" (ConditionReason).
const (
	ReasonAlwaysHealthy         = "AlwaysHealthy"
	ReasonOutputsAvailable      = "OutputsAvailable"
	ReasonOutputNotAvailable    = "OutputNotAvailable"
	ReasonNoStampedObject       = "NoStampedObject"
	ReasonMatchedCondition      = "MatchedCondition"
	ReasonMatchedField          = "MatchedField"
	ReasonNoMatchesFulfilled    = "NoMatchesFulfilled"
	ReasonSucceededConditionMet = "SucceededConditionMet"
	ReasonFailedConditionMet    = "FailedConditionMet"
	ReasonConditionNotMet       = "ConditionNotMet"
	ReasonObservedMatchesMet    = "ObservedMatchesMet"
	ReasonInvalidRule           = "InvalidRule"
	ReasonInvalidObject         = "InvalidObject"
)

// ConditionReason is the reason singleConditionType gives for condition type t.
func ConditionReason(t string) string { return t + "Condition" }

// Result is the decision for one stamped object.
type Result struct {
	Outcome Outcome
	// Status is the step's Healthy condition status: "True", "False" or "Unknown".
	Status  string
	Reason  string
	Message string
	// HasRule is true when the template defines an explicit success rule
	// (healthRule, observedCompletion, observedMatches, alwaysSuccessful).
	HasRule bool
	// CanFail is true when the deciding rule can ever report failure
	// (observedCompletion.failed, singleConditionType, multiMatch.unhealthy).
	CanFail bool
}

// rule is the rule that decides, after precedence.
type rule int

const (
	ruleDefault rule = iota
	ruleAlwaysSuccessful
	ruleObservedCompletion
	ruleObservedMatches
	ruleHealthRule
	ruleLifecycle // the lifecycle's default rule
)

// decidingRule applies the precedence documented on the package; def is
// the lifecycle's default rule (nil: none).
func decidingRule(spec *api.TemplateSpec, def *api.HealthRule) rule {
	switch {
	case spec.AlwaysSuccessful:
		return ruleAlwaysSuccessful
	case spec.ObservedCompletion != nil:
		return ruleObservedCompletion
	case len(spec.ObservedMatches) > 0:
		return ruleObservedMatches
	case spec.HealthRule != nil:
		return ruleHealthRule
	case def != nil:
		return ruleLifecycle
	}
	return ruleDefault
}

func canFail(spec *api.TemplateSpec, def *api.HealthRule, r rule) bool {
	switch r {
	case ruleObservedCompletion:
		return len(spec.ObservedCompletion.Failed) > 0
	case ruleHealthRule:
		return healthRuleCanFail(spec.HealthRule)
	case ruleLifecycle:
		return healthRuleCanFail(def)
	}
	return false
}

func healthRuleCanFail(hr *api.HealthRule) bool {
	return hr.SingleConditionType != "" || (hr.MultiMatch != nil && !matchSetEmpty(hr.MultiMatch.Unhealthy))
}

// Evaluate decides on the stamped object's JSON document obj (nil: nothing
// stamped yet). templateKind is the template's kind; outputsErr is the result
// of reading the template's outputs (nil: available or none; a
// paths.NotFoundError: not yet), used by the default rule.
//
// A spec that fails Validate is Unknown with reason InvalidRule, whatever the
// object says, because the rule cannot be trusted.
func Evaluate(spec *api.TemplateSpec, templateKind string, obj []byte, outputsErr error) Result {
	return EvaluateWith(spec, nil, templateKind, obj, outputsErr)
}

// EvaluateWith is Evaluate with def, the default rule of the step's
// lifecycle (nil: none), which decides as a healthRule would when the
// template sets no rule; it is no rule of the template's (HasRule).
func EvaluateWith(spec *api.TemplateSpec, def *api.HealthRule, templateKind string, obj []byte, outputsErr error) Result {
	if spec == nil {
		spec = &api.TemplateSpec{}
	}
	r := decidingRule(spec, def)
	res := decide(spec, def, r, templateKind, obj, outputsErr)
	res.HasRule = r != ruleDefault && r != ruleLifecycle
	res.CanFail = canFail(spec, def, r)
	return res
}

func decide(spec *api.TemplateSpec, def *api.HealthRule, r rule, templateKind string, obj []byte, outputsErr error) Result {
	if err := Validate(spec, templateKind); err != nil {
		return unknown(ReasonInvalidRule, err.Error())
	}
	doc := bytes.TrimSpace(obj)
	if len(doc) == 0 || string(doc) == "null" {
		return unknown(ReasonNoStampedObject, "no object has been stamped yet")
	}
	if !gjson.ValidBytes(doc) {
		return unknown(ReasonInvalidObject, "the stamped object is not valid JSON")
	}
	switch r {
	case ruleAlwaysSuccessful:
		return succeeded(ReasonAlwaysHealthy, "the template sets alwaysSuccessful")
	case ruleObservedCompletion:
		return observedCompletion(spec.ObservedCompletion, doc, templateKind == api.KindClusterDeploymentTemplate)
	case ruleObservedMatches:
		return observedMatches(spec.ObservedMatches, doc)
	case ruleHealthRule:
		if spec.Shadow != nil && *spec.Shadow {
			// shadow: true makes the healthRule a success rule (the step is
			// gated): like observedCompletion, it holds only once the
			// object reports on its current spec.
			if ok, msg := generationObserved(doc, false); !ok {
				return unknown(ReasonConditionNotMet, msg)
			}
		}
		return healthRule(spec.HealthRule, doc)
	case ruleLifecycle:
		return healthRule(def, doc)
	}
	return defaultRule(templateKind, outputsErr)
}

func succeeded(reason, msg string) Result {
	return Result{Outcome: Succeeded, Status: StatusTrue, Reason: reason, Message: msg}
}

func failed(reason, msg string) Result {
	return Result{Outcome: Failed, Status: StatusFalse, Reason: reason, Message: msg}
}

func unknown(reason, msg string) Result {
	return Result{Outcome: Processing, Status: StatusUnknown, Reason: reason, Message: msg}
}

// defaultRule applies when the template has no rule: a ClusterTemplate has
// no outputs and is healthy once stamped; other kinds once their outputs
// can be read.
func defaultRule(templateKind string, outputsErr error) Result {
	if templateKind == api.KindClusterTemplate {
		return succeeded(ReasonAlwaysHealthy, "a ClusterTemplate without a health rule is healthy once stamped")
	}
	switch {
	case outputsErr == nil:
		return succeeded(ReasonOutputsAvailable, "all outputs are available")
	case paths.IsNotFound(outputsErr):
		return unknown(ReasonOutputNotAvailable, "waiting for outputs: "+outputsErr.Error())
	}
	return unknown(ReasonOutputNotAvailable, "cannot read outputs: "+outputsErr.Error())
}

var (
	observedGenerationPath = paths.MustCompile("status.observedGeneration")
	generationPath         = paths.MustCompile("metadata.generation")
)

// generationObserved reports whether the object's controller has seen its
// latest spec. An object that does not report status.observedGeneration (or
// has no metadata.generation) cannot tell, so the check is skipped — unless
// strict: a ClusterDeploymentTemplate requires it, as in Cartographer.
func generationObserved(doc []byte, strict bool) (bool, string) {
	observed, err := observedGenerationPath.Value(doc)
	if err != nil {
		if strict {
			return false, "waiting for the object to report status.observedGeneration"
		}
		return true, ""
	}
	gen, err := generationPath.Value(doc)
	if err != nil {
		return true, ""
	}
	if ValuesEqual(observed, gen) {
		return true, ""
	}
	return false, fmt.Sprintf("waiting for status.observedGeneration [%s] to equal metadata.generation [%s]",
		show(observed), show(gen))
}

// observedCompletion: once the object has observed its generation, failed is
// checked first, then succeeded.
func observedCompletion(oc *api.ObservedCompletion, doc []byte, strict bool) Result {
	if ok, msg := generationObserved(doc, strict); !ok {
		if held, err := evalRules(oc.Succeeded, doc, 0); err == nil && !held {
			msg += "; succeeded condition not met: " + explainUnmet(oc.Succeeded, doc)
		}
		return unknown(ReasonConditionNotMet, msg)
	}
	if len(oc.Failed) > 0 {
		held, err := evalRules(oc.Failed, doc, 0)
		switch {
		case isRuleError(err):
			return unknown(ReasonInvalidRule, "observedCompletion.failed: "+err.Error())
		case err != nil:
			return unknown(ReasonConditionNotMet, "cannot evaluate the failed condition: "+err.Error())
		case held:
			return failed(ReasonFailedConditionMet, "failed condition met: "+explain(oc.Failed, doc))
		}
	}
	held, err := evalRules(oc.Succeeded, doc, 0)
	switch {
	case isRuleError(err):
		return unknown(ReasonInvalidRule, "observedCompletion.succeeded: "+err.Error())
	case err != nil:
		return unknown(ReasonConditionNotMet, "cannot evaluate the succeeded condition: "+err.Error())
	case held:
		return succeeded(ReasonSucceededConditionMet, "succeeded condition met: "+explain(oc.Succeeded, doc))
	}
	return unknown(ReasonConditionNotMet, "succeeded condition not met: "+explainUnmet(oc.Succeeded, doc))
}

// explain says why rules hold: for a single {key, value} the value found,
// otherwise what the rules require and what the object holds.
func explain(rules api.Rules, doc []byte) string {
	if isLeaf(rules) {
		return observe(rules[0].Key, doc)
	}
	return describeRules(rules, 0) + "; found " + observeRules(rules, doc)
}

// explainUnmet says why rules do not hold, naming the expected and the
// actual values.
func explainUnmet(rules api.Rules, doc []byte) string {
	if isLeaf(rules) {
		key, want := rules[0].Key, show(rules[0].Value)
		v, found, err := lookup(key, doc)
		switch {
		case err != nil:
			return fmt.Sprintf("expected value at path [%s] to be [%s]: %v", key, want, err)
		case !found:
			return fmt.Sprintf("expected value at path [%s] to be [%s], but the path is missing", key, want)
		}
		return fmt.Sprintf("expected value at path [%s] to be [%s], found [%s]", key, want, show(v))
	}
	return "expected " + describeRules(rules, 0) + "; found " + observeRules(rules, doc)
}

// observedMatches holds when every input equals its output. It cannot fail.
func observedMatches(matches []api.ObservedMatch, doc []byte) Result {
	var unmet, met []string
	for _, m := range matches {
		in, inFound, inErr := lookup(m.Input, doc)
		out, outFound, outErr := lookup(m.Output, doc)
		if isRuleError(inErr) || isRuleError(outErr) {
			return unknown(ReasonInvalidRule, fmt.Sprintf("observedMatches: %v", firstErr(inErr, outErr)))
		}
		if inFound && outFound && ValuesEqual(in, out) {
			met = append(met, fmt.Sprintf("input [%s] equals output [%s]: [%s]", m.Input, m.Output, show(in)))
			continue
		}
		unmet = append(unmet, fmt.Sprintf("input [%s] %s, output [%s] %s",
			m.Input, state(in, inFound, inErr), m.Output, state(out, outFound, outErr)))
	}
	if len(unmet) > 0 {
		return unknown(ReasonConditionNotMet, "observed matches not met: "+join(unmet))
	}
	return succeeded(ReasonObservedMatchesMet, "observed matches met: "+join(met))
}

// state describes a looked-up value: "is [v]", "is missing" or the error.
func state(v any, found bool, err error) string {
	switch {
	case err != nil:
		return "cannot be read (" + err.Error() + ")"
	case !found:
		return "is missing"
	}
	return "is [" + show(v) + "]"
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
