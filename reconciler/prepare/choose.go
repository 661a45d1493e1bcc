package prepare

// Which chain an owner walks, which template a step uses (options,
// passThrough), and reading chains and templates.

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/health"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/step"
)

// DecodeChain reads a chain's spec and compiles its selector (nil when the
// chain selects no owner). err says why the chain is invalid.
func DecodeChain(o *unstructured.Unstructured) (spec api.ChainSpec, sel *selector.Selector, err error) {
	if err := api.Decode(o.Object["spec"], &spec); err != nil {
		return spec, nil, fmt.Errorf("cannot read spec of %s [%s]: %w", o.GetKind(), o.GetName(), err)
	}
	sel, err = selector.Compile(spec.Selector, spec.SelectorMatchExpressions, spec.SelectorMatchFields)
	if err != nil {
		return spec, nil, fmt.Errorf("invalid selector on %s [%s]: %w", o.GetKind(), o.GetName(), err)
	}
	if sel.Empty() {
		sel = nil
	}
	return spec, sel, nil
}

// ChooseChain picks the owner's chain among chains (a Candidate per chain
// with a selector, in any order).
func ChooseChain(owner selector.Owner, ownerName string, chains []selector.Candidate) selector.ChainChoice {
	sort.Slice(chains, func(i, j int) bool { return chains[i].Name < chains[j].Name })
	return selector.ChooseChain(owner, ownerName, chains)
}

// DecodeTemplate reads a template's spec and validates its rules.
func DecodeTemplate(obj *unstructured.Unstructured) (*api.TemplateSpec, error) {
	spec := &api.TemplateSpec{}
	if err := api.Decode(obj.Object["spec"], spec); err != nil {
		return spec, err
	}
	return spec, health.Validate(spec, obj.GetKind())
}

// passThroughPrefix marks, among a step's option candidates, an option
// that forwards an input instead of naming a template.
const passThroughPrefix = "passThrough:"

// Options compiles a step's template options into candidates.
func Options(def api.Step) ([]selector.Candidate, error) {
	var cands []selector.Candidate
	for i, o := range def.TemplateRef.Options {
		name := o.Name
		if o.PassThrough != "" {
			name = passThroughPrefix + o.PassThrough
		}
		s, err := selector.Compile(o.Selector.MatchLabels, o.Selector.MatchExpressions, o.Selector.MatchFields)
		if err != nil {
			return nil, &selector.ResolveOptionsError{Option: name, Err: fmt.Errorf("option [%d]: %w", i, err)}
		}
		cands = append(cands, selector.Candidate{Name: name, Selector: s})
	}
	return cands, nil
}

// chooseTemplate returns the template's name, or the input a passThrough
// option forwards.
func chooseTemplate(env Env, def api.Step) (name, passThrough string, r *Refusal) {
	ref := def.TemplateRef
	if len(ref.Options) == 0 {
		return ref.Name, "", nil
	}
	compile := env.Options
	if compile == nil {
		compile = Options
	}
	cands, err := compile(def)
	if err != nil {
		re := &selector.ResolveOptionsError{Err: err}
		errors.As(err, &re) // names the option that does not compile
		re.Step, re.ChainKind, re.Chain = def.Name, env.Flavor.ChainKind, env.ChainName
		return "", "", &Refusal{Reason: step.ReasonResolveOptionsError, Message: re.Error()}
	}
	owner := selector.Owner{Kind: env.Flavor.OwnerKind, Labels: env.Owner.GetLabels(), Doc: env.OwnerDoc}
	chosen, err := selector.ChooseOption(owner, env.Flavor.ChainKind, env.ChainName, def.Name, cands)
	if err != nil {
		reason := step.ReasonResolveOptionsError
		var oe *selector.OptionsMatchError
		if errors.As(err, &oe) {
			reason = step.ReasonOptionsMatchError
		}
		return "", "", &Refusal{Reason: reason, Message: err.Error()}
	}
	if in, ok := strings.CutPrefix(chosen, passThroughPrefix); ok {
		return "", in, nil
	}
	return chosen, "", nil
}

// forward is a pass-through: the outputs of the step the input comes from.
func forward(env Env, def api.Step, input string, outs map[string]step.Outputs) (step.Outputs, *Refusal) {
	from, typ := "", ""
	for _, l := range inputLists(def) {
		for _, i := range l.inputs {
			// A declared source, image or config wins over deployment.
			if i.Name == input && (l.typ != "deployment" || from == "") {
				from, typ = i.Resource, l.typ
			}
		}
	}
	if from == "" {
		return nil, refuse(step.ReasonStampFailure, "step [%s] passes through input [%s], which the step does not declare", def.Name, input)
	}
	o, ok := outs[from]
	if !ok {
		r := refuse(step.ReasonMissingValueAtPath, "step [%s] waits for the outputs of step [%s]", def.Name, from)
		r.Waiting = []Missing{{Step: from, Type: typ}}
		return nil, r
	}
	return o, nil
}
