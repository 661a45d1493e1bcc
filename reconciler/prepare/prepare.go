// Package prepare readies one step of a chain for an owner without writing
// anything: which template (options, passThrough), the inputs from earlier
// steps' outputs, params, labels, the render and its fix-ups (namespace,
// labels, controller reference, applied digest). It returns a Prepared step
// or the reason the step cannot be stamped, with the ResourceSubmitted
// reason the controller reports. The controller (reconciler/owner/walk.go),
// `kontinue render` (cli/offline.go) and `kontinue diff` (cli/preview.go)
// all prepare through Step, which ends with what the step's lifecycle
// refuses of what was rendered (check): what render prints is what the
// controller would apply, and what the controller refuses they refuse.
//
// No API client: templates come through Env.Template, earlier outputs as
// values; a Helm step's kept release is the caller's (Env.Release).
package prepare

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/step"
)

// Env is what preparing a step reads besides the step and earlier outputs:
// the owner, its chain, the templates and the engines.
type Env struct {
	Flavor    *api.Flavor
	Owner     *unstructured.Unstructured
	OwnerDoc  []byte // the owner as JSON, for options' field selectors
	OwnerSpec api.OwnerSpec
	ChainName string
	Chain     *api.ChainSpec
	// Options returns a step's compiled options (the controller caches
	// them per chain version); nil compiles them each time (Options).
	Options func(def api.Step) ([]selector.Candidate, error)
	// Template returns a template's decoded and validated spec
	// (DecodeTemplate); an error wrapping ErrNotFound when there is none.
	Template func(kind, name string) (*api.TemplateSpec, error)
	// Engines replace the registered render engines (render.EngineForWith).
	Engines map[string]render.Engine
	// Getter serves engines' reads (a Helm chart in a ConfigMap); nil: none.
	Getter render.ObjectGetter
	// Timeout bounds a render below the engines' own bounds; 0: none.
	Timeout time.Duration
	// Release, when set, is called before a Helm template renders: it
	// returns the context to render with (carrying the kept release) and
	// what to do once the engine rendered, before the objects are used (keep
	// the new release, or a second render would draw new random values).
	Release func(ctx context.Context, def api.Step) (context.Context, func() error, error)
	// Schema is the owner kind's schema (nil: none): what a tag naming a
	// field the owner leaves unset renders, as in Cartographer
	// (render.Schema).
	Schema *render.Schema
	// Verify, when set, checks the inputs of a step whose chain names a
	// verify policy before it renders (reconciler/verify): it returns the
	// inputs to render with (an image pinned to the digest checked, an
	// input that did not pass replaced by the step's previous one), or why
	// the step cannot render now.
	Verify func(def api.Step, in render.Inputs) (render.Inputs, *Refusal)
}

// ErrNotFound is the error of Env.Template for a template that does not exist.
var ErrNotFound = errors.New("not found")

// Prepared is a step ready to be written, or why it is not (Refusal).
// Kind, Template and Spec are set as far as preparing got.
type Prepared struct {
	Kind     string            // the template kind
	Template string            // the template chosen; "" for a pass-through or when no option could be chosen
	Spec     *api.TemplateSpec // the template's spec, once read
	// PassThrough names the input a passThrough option forwards: the step
	// stamps nothing and publishes Outputs.
	PassThrough string
	Outputs     step.Outputs
	Inputs      render.Inputs
	Params      map[string]any
	Labels      map[string]string // on every object of the step
	Objects     []*unstructured.Unstructured
	// Generated are what a runnable: true step stamps instead of Objects:
	// the ClusterRunTemplate and the Runnable generated from them
	// (Runnable), the Runnable last.
	Generated []*unstructured.Unstructured
	Refusal   *Refusal
}

// Refusal is why a step cannot be stamped now: the step's ResourceSubmitted
// reason and message; Unknown when it waits for earlier steps (Waiting),
// else False.
type Refusal struct {
	Reason  string
	Message string
	// Waiting lists, in the step's order, the earlier steps whose outputs
	// are missing (the message names the first).
	Waiting []Missing
	// Err is the render's error: a transient or retryable one
	// (render.IsTransient, render.Retryable) is retried with backoff.
	Err error
	// Pending: the step waits for something other than earlier outputs
	// (an input being verified): Unknown, like Waiting.
	Pending bool
}

// Missing is an input waiting for an earlier step's outputs.
type Missing struct {
	Step string // the earlier step
	Type string // source, image, config or deployment
}

func refuse(reason, format string, a ...any) *Refusal {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, a...)}
}

// Step prepares def, given the outputs of the steps before it (by step
// name; a step without outputs is absent).
func Step(ctx context.Context, env Env, def api.Step, outs map[string]step.Outputs) Prepared {
	p := Prepared{Kind: def.TemplateRef.Kind}
	name, passThrough, r := chooseTemplate(env, def)
	if r != nil {
		p.Refusal = r
		return p
	}
	if passThrough != "" {
		p.PassThrough = passThrough
		p.Outputs, p.Refusal = forward(env, def, passThrough, outs)
		return p
	}
	p.Template = name
	spec, err := env.Template(p.Kind, name)
	if errors.Is(err, ErrNotFound) {
		p.Refusal = refuse(step.ReasonRetrievalFailure, "unable to get template [%s/%s] for step [%s]: %v", p.Kind, name, def.Name, err)
		return p
	}
	if err != nil {
		p.Refusal = refuse(step.ReasonStampFailure, "template [%s/%s] for step [%s] is invalid: %v", p.Kind, name, def.Name, err)
		return p
	}
	p.Spec = spec
	in, missing, err := Inputs(env, def, p.Kind, outs)
	if err != nil {
		p.Refusal = &Refusal{Reason: step.ReasonStampFailure, Message: err.Error()}
		return p
	}
	if len(missing) > 0 {
		p.Refusal = &Refusal{Reason: step.ReasonMissingValueAtPath, Waiting: missing,
			Message: fmt.Sprintf("step [%s] waits for the outputs of step [%s]", def.Name, missing[0].Step)}
		return p
	}
	if env.Verify != nil && def.Verify != nil {
		if in, p.Refusal = env.Verify(def, in); p.Refusal != nil {
			return p
		}
	}
	p.Inputs = in
	p.Params = render.MergeParams(spec.Params, env.Chain.Params, def.Params, env.OwnerSpec.Params)
	p.Labels = Labels(env.Flavor, env.Owner, env.ChainName, def.Name, p.Kind, name, spec)
	objs, err := renderStep(ctx, env, def, &p)
	if err != nil {
		p.Refusal = &Refusal{Reason: step.ReasonStampFailure, Err: err,
			Message: fmt.Sprintf("unable to stamp object for resource [%s] for template [%s/%s] in %s [%s]: %v", def.Name, p.Kind, name, env.Flavor.ChainNoun, env.ChainName, err)}
		return p
	}
	p.Objects = objs
	return check(ctx, env, def, p)
}

// check ends what the controller, `kontinue render` and `kontinue diff`
// share of a step: what its lifecycle refuses of what was rendered (the
// Strategy's Check, before the controller reads anything) and, for a
// lifecycle that stamps generated objects (runnable: true), those. A refused step
// keeps no objects.
func check(ctx context.Context, env Env, def api.Step, p Prepared) Prepared {
	o := step.Observed{Kind: p.Kind, Step: def.Name, Template: p.Template, Spec: p.Spec, Def: &def, Objects: p.Objects}
	if c := step.StrategyOf(p.Spec).Check(o); c != nil {
		p.Objects, p.Refusal = nil, &Refusal{Reason: c.Reason, Message: c.Message}
		return p
	}
	if step.LifecycleOf(p.Spec).Generates {
		sa := ServiceAccount(env.Owner.GetNamespace(), env.OwnerSpec, env.Chain)
		crt, rn, r := Runnable(render.WithSchema(ctx, env.Schema), env.Flavor, env.Owner, sa, def, p)
		if r != nil {
			p.Objects, p.Refusal = nil, r
			return p
		}
		p.Generated = []*unstructured.Unstructured{crt, rn}
	}
	return p
}

// renderStep renders the template and fixes up what it rendered.
func renderStep(ctx context.Context, env Env, def api.Step, p *Prepared) ([]*unstructured.Unstructured, error) {
	tc := render.NewContext(env.Flavor.OwnerKind, env.Owner.Object, p.Params, p.Inputs, p.Labels)
	eng, err := render.EngineForWith(p.Spec, env.Engines)
	if err != nil {
		return nil, err
	}
	if env.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, env.Timeout)
		defer cancel()
	}
	if env.Getter != nil {
		ctx = render.WithObjectGetter(ctx, env.Getter)
	}
	ctx = render.WithSchema(ctx, env.Schema)
	keep := func() error { return nil }
	if p.Spec.Helm != nil && env.Release != nil {
		if ctx, keep, err = env.Release(ctx, def); err != nil {
			return nil, err
		}
	}
	objs, err := eng.Render(ctx, p.Spec, tc)
	if err != nil {
		return nil, err
	}
	if err := keep(); err != nil {
		return nil, err
	}
	return Finish(env.Flavor, env.Owner, p.Spec, p.Labels, objs)
}
