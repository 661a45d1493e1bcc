// Package prepare readies one step of a chain for an owner without writing
// anything: which template (options, passThrough), the inputs from earlier
// steps' outputs, params, labels, the render and its fix-ups (namespace,
// labels, controller reference, applied digest). It returns a Prepared step
// or the reason the step cannot be stamped, with the ResourceSubmitted
// reason the controller reports. The controller (reconciler/realize.go) and
// `kontinue render` (cli/offline.go) both prepare through Step, so what
// render prints is what the controller would apply.
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
	Refusal     *Refusal
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
