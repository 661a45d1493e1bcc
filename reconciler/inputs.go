package reconciler

// What a step reads: the template it uses (options, passThrough) and the
// outputs of earlier steps.

import (
	"errors"
	"fmt"
	"strings"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/selector"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// chooseTemplate returns the template name, or the input a passThrough
// option forwards.
func (op *ownerPass) chooseTemplate(def api.Step) (name, passThrough string, err error) {
	ref := def.TemplateRef
	if len(ref.Options) == 0 {
		return ref.Name, "", nil
	}
	// Keyed by kind too: a supply chain and a delivery may share a name.
	cands, err := op.r.m.optionCandidates(op.r.flavor.ChainKind+"/"+op.chainName, op.chain.rv, def)
	if err != nil {
		re := &selector.ResolveOptionsError{Err: err}
		errors.As(err, &re) // names the option that does not compile
		re.Step, re.ChainKind, re.Chain = def.Name, op.r.flavor.ChainKind, op.chainName
		return "", "", re
	}
	owner := selector.Owner{Kind: op.r.flavor.OwnerKind, Labels: op.owner.GetLabels(), Doc: op.doc}
	chosen, err := selector.ChooseOption(owner, op.r.flavor.ChainKind, op.chainName, def.Name, cands)
	if err != nil {
		return "", "", err
	}
	if strings.HasPrefix(chosen, passThroughPrefix) {
		return "", strings.TrimPrefix(chosen, passThroughPrefix), nil
	}
	return chosen, "", nil
}

const passThroughPrefix = "passThrough:"

// passThrough forwards an input as the step's output, stamping nothing.
func (op *ownerPass) passThrough(sc *stepCtx, input string, outs map[string]outputs) stepResult {
	sc.res.StampedRef, sc.res.StampedObjects, sc.res.TemplateRef = nil, nil, nil
	from := ""
	for _, list := range [][]api.StepInput{sc.step.Sources, sc.step.Images, sc.step.Configs} {
		for _, i := range list {
			if i.Name == input {
				from = i.Resource
			}
		}
	}
	if from == "" && sc.step.Deployment != nil && input == "deployment" {
		from = sc.step.Deployment.Resource
	}
	if from == "" {
		return op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, st.False, step.ReasonStampFailure,
			fmt.Sprintf("step [%s] passes through input [%s], which the step does not declare", sc.step.Name, input)), nil)
	}
	o, ok := outs[from]
	if !ok {
		return op.stepDone(sc, nil, st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonMissingValueAtPath,
			fmt.Sprintf("step [%s] waits for the outputs of step [%s]", sc.step.Name, from)), nil)
	}
	healthy := st.Cond(st.Healthy, st.True, step.ReasonPassThrough, "")
	return op.stepDone(sc, o, st.Cond(st.ResourceSubmitted, st.True, step.ReasonPassThrough, fmt.Sprintf("input [%s] passed through", input)), &healthy)
}

func stepInputs(def api.Step) []st.Input {
	var out []st.Input
	seen := map[string]bool{}
	add := func(r string) {
		if r != "" && !seen[r] {
			seen[r] = true
			out = append(out, st.Input{Name: r})
		}
	}
	for _, list := range [][]api.StepInput{def.Sources, def.Images, def.Configs} {
		for _, i := range list {
			add(i.Resource)
		}
	}
	if def.Deployment != nil {
		add(def.Deployment.Resource)
	}
	return out
}

// inputs collects a step's inputs from earlier steps' outputs. waiting names
// the first missing one.
func (op *ownerPass) inputs(sc *stepCtx, outs map[string]outputs) (in render.Inputs, waiting string, err error) {
	def := sc.step
	earlier := map[string]bool{}
	for _, s := range op.chain.spec.Resources {
		if s.Name == def.Name {
			break
		}
		earlier[s.Name] = true
	}
	get := func(typ string, i api.StepInput) (outputs, bool, error) {
		if !earlier[i.Resource] {
			return nil, false, fmt.Errorf("step [%s] reads %s [%s] from step [%s], which is not an earlier step of %s [%s]", def.Name, typ, i.Name, i.Resource, op.r.flavor.ChainNoun, op.chainName)
		}
		o, ok := outs[i.Resource]
		if !ok && waiting == "" {
			waiting = fmt.Sprintf("step [%s] waits for the outputs of step [%s]", def.Name, i.Resource)
		}
		return o, ok, nil
	}
	in = render.Inputs{Sources: map[string]render.Source{}, Images: map[string]any{}, Configs: map[string]any{}}
	for _, i := range def.Sources {
		o, ok, err := get("source", i)
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Sources[i.Name] = render.Source{URL: o["url"], Revision: o["revision"]}
		}
	}
	for _, i := range def.Images {
		o, ok, err := get("image", i)
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Images[i.Name] = o["image"]
		}
	}
	for _, i := range def.Configs {
		o, ok, err := get("config", i)
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Configs[i.Name] = o["config"]
		}
	}
	if def.Deployment != nil {
		if sc.kind != api.KindClusterDeploymentTemplate {
			return in, "", fmt.Errorf("step [%s] receives deployment, but only a %s step can take it (the step uses a %s)", def.Name, api.KindClusterDeploymentTemplate, sc.kind)
		}
		o, ok, err := get("deployment", api.StepInput{Name: "deployment", Resource: def.Deployment.Resource})
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Deployment = &render.Source{URL: o["url"], Revision: o["revision"]}
		}
	} else if sc.kind == api.KindClusterDeploymentTemplate {
		return in, "", fmt.Errorf("step [%s] uses a %s but has no deployment input", def.Name, api.KindClusterDeploymentTemplate)
	}
	return in, waiting, nil
}
