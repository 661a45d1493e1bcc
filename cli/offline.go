package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/step"
)

// Offline rendering: what each step of a chain would stamp for an owner,
// prepared by the controller's own code (reconciler/prepare: chain and
// option choice, pass-through, inputs, params, labels, the engines and the
// fix-ups of what they render), with upstream outputs given by hand instead
// of read from stamped objects.

// RenderInput is everything an offline render reads.
type RenderInput struct {
	Objects []*unstructured.Unstructured // owners, chains, templates, ConfigMaps (Helm charts)
	Owner   string                       // name of the Workload/Deliverable; "" when there is one
	Chain   string                       // name of the chain; "" to choose by selector
	// Outputs of steps, by step then output name (url, revision, image,
	// config), given by hand: they pass on to later steps whether or not
	// their step could be rendered. A config given as a string is text
	// when the step's object holds text at its configPath (a ConfigMap's
	// data), else YAML.
	Outputs map[string]map[string]any
	// Namespace of the owner when its file gives none.
	Namespace string
	// Helm bounds what helm templates may fetch (the controller's
	// --helm-allow-* flags).
	Helm render.HelmOptions
}

// RenderResult is what a render found, step by step.
type RenderResult struct {
	Owner ObjectName     `json:"owner"`
	Chain ObjectName     `json:"chain"`
	Steps []RenderedStep `json:"steps"`
}

// ObjectName names an object.
type ObjectName struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// RenderedStep is one step: its objects, or why there are none.
type RenderedStep struct {
	Name     string      `json:"name"`
	Template *ObjectName `json:"template,omitempty"`
	// PassThrough names the input a passThrough option forwards.
	PassThrough string `json:"passThrough,omitempty"`
	// Runnable: the template sets runnable: true; the controller stamps
	// the objects through a generated Runnable.
	Runnable bool `json:"runnable,omitempty"`
	// Waiting says which upstream outputs are missing (give them with --step-output).
	Waiting string `json:"waiting,omitempty"`
	// Error is why the step cannot be stamped (the controller would report it
	// as the step's ResourceSubmitted reason).
	Error   string           `json:"error,omitempty"`
	Reason  string           `json:"reason,omitempty"`
	Objects []map[string]any `json:"objects,omitempty"`
	// Outputs are the outputs the step passes on (given by hand, or
	// forwarded by a pass-through).
	Outputs map[string]any `json:"outputs,omitempty"`
}

func isCarto(u *unstructured.Unstructured, kind string) bool {
	return u.GetKind() == kind && u.GroupVersionKind().Group == api.Group
}

// Render renders every step of the owner's chain.
func Render(ctx context.Context, in RenderInput) (*RenderResult, error) {
	var owners []*unstructured.Unstructured
	for _, o := range in.Objects {
		if (isCarto(o, api.KindWorkload) || isCarto(o, api.KindDeliverable)) && (in.Owner == "" || o.GetName() == in.Owner) {
			owners = append(owners, o)
		}
	}
	switch {
	case len(owners) == 0 && in.Owner != "":
		return nil, fmt.Errorf("no Workload or Deliverable named %q in the files", in.Owner)
	case len(owners) == 0:
		return nil, fmt.Errorf("no Workload or Deliverable in the files")
	case len(owners) > 1:
		var names []string
		for _, o := range owners {
			names = append(names, o.GetKind()+"/"+o.GetName())
		}
		return nil, fmt.Errorf("several owners in the files (%s): pick one with --owner", strings.Join(names, ", "))
	}
	owner := owners[0].DeepCopy()
	if owner.GetNamespace() == "" {
		ns := in.Namespace
		if ns == "" {
			ns = "default"
		}
		owner.SetNamespace(ns)
	}
	flavor := api.FlavorOf(owner.GetKind())
	doc, err := json.Marshal(owner.Object)
	if err != nil {
		return nil, err
	}
	so := selector.Owner{Kind: flavor.OwnerKind, Labels: owner.GetLabels(), Doc: doc}

	chainObj, err := chooseChain(in, flavor, so, owner.GetName())
	if err != nil {
		return nil, err
	}
	chain, _, err := prepare.DecodeChain(chainObj)
	if err != nil {
		return nil, err
	}
	var ownerSpec api.OwnerSpec
	if err := api.Decode(owner.Object["spec"], &ownerSpec); err != nil {
		return nil, fmt.Errorf("cannot read spec of %s [%s]: %w", owner.GetKind(), owner.GetName(), err)
	}
	res := &RenderResult{
		Owner: ObjectName{Kind: owner.GetKind(), Namespace: owner.GetNamespace(), Name: owner.GetName()},
		Chain: ObjectName{Kind: chainObj.GetKind(), Name: chainObj.GetName()},
	}
	r := &offline{in: in, outs: map[string]step.Outputs{}}
	r.env = prepare.Env{Flavor: flavor, Owner: owner, OwnerDoc: doc, OwnerSpec: ownerSpec,
		ChainName: chainObj.GetName(), Chain: &chain, Template: r.template,
		Engines: map[string]render.Engine{render.FieldHelm: render.HelmWith(in.Helm)}, Getter: objectsGetter(in.Objects)}
	for _, step := range chain.Resources {
		rs := r.step(ctx, step)
		if given, ok := in.Outputs[step.Name]; ok {
			rs.Outputs = r.given(rs, given)
		}
		if rs.Outputs != nil {
			r.outs[step.Name] = rs.Outputs
		}
		res.Steps = append(res.Steps, rs)
	}
	return res, nil
}

func chooseChain(in RenderInput, flavor *api.Flavor, so selector.Owner, ownerName string) (*unstructured.Unstructured, error) {
	byName := map[string]*unstructured.Unstructured{}
	var cands []selector.Candidate
	for _, o := range in.Objects {
		if !isCarto(o, flavor.ChainKind) {
			continue
		}
		byName[o.GetName()] = o
		_, sel, err := prepare.DecodeChain(o)
		if err != nil || sel == nil {
			continue
		}
		cands = append(cands, selector.Candidate{Name: o.GetName(), Selector: sel})
	}
	if in.Chain != "" {
		c := byName[in.Chain]
		if c == nil {
			return nil, fmt.Errorf("no %s named %q in the files", flavor.ChainKind, in.Chain)
		}
		return c, nil
	}
	if len(byName) == 0 {
		return nil, fmt.Errorf("no %s in the files", flavor.ChainKind)
	}
	choice := prepare.ChooseChain(so, ownerName, cands)
	if choice.Reason != "" {
		msg := choice.Message
		if len(choice.Candidates) > 0 {
			msg += ": " + strings.Join(choice.Candidates, ", ")
		}
		return nil, fmt.Errorf("%s: %s (name one with --chain)", choice.Reason, msg)
	}
	return byName[choice.Name], nil
}

type offline struct {
	in   RenderInput
	env  prepare.Env
	outs map[string]step.Outputs
}

// step prepares a step as the controller does, and keeps what render shows.
func (r *offline) step(ctx context.Context, def api.Step) RenderedStep {
	rs := RenderedStep{Name: def.Name}
	p := prepare.Step(ctx, r.env, def, r.outs)
	rs.PassThrough, rs.Outputs = p.PassThrough, p.Outputs
	if p.Template != "" {
		rs.Template = &ObjectName{Kind: p.Kind, Name: p.Template}
	}
	if p.Spec != nil {
		rs.Runnable = p.Spec.Runnable
	}
	if f := p.Refusal; f != nil {
		if len(f.Waiting) > 0 {
			rs.Waiting = waitingFor(def.Name, f.Waiting)
		} else {
			rs.Reason, rs.Error = f.Reason, f.Message
		}
		return rs
	}
	for _, o := range p.Objects {
		// Offline there is no owner UID to refer to, and the digest only
		// tells whether the live object is up to date: both are left out.
		o.SetOwnerReferences(nil)
		if ann := o.GetAnnotations(); len(ann) > 1 {
			delete(ann, api.AnnotationDigest)
			o.SetAnnotations(ann)
		} else {
			unstructured.RemoveNestedField(o.Object, "metadata", "annotations")
		}
		rs.Objects = append(rs.Objects, o.Object)
	}
	return rs
}

// waitingFor says which steps' outputs a step waits for, with the flag that
// gives them.
func waitingFor(stepName string, missing []prepare.Missing) string {
	var steps []string
	seen := map[string]bool{}
	for _, m := range missing {
		if !seen[m.Step] {
			seen[m.Step] = true
			steps = append(steps, fmt.Sprintf("%s (e.g. --step-output %s.%s=...)", m.Step, m.Step, exampleOutput(m.Type)))
		}
	}
	return fmt.Sprintf("step [%s] waits for the outputs of step %s", stepName, strings.Join(steps, ", "))
}

// given are the outputs given by hand for a step, a config given as a
// string taken as the step's object would hold it.
func (r *offline) given(rs RenderedStep, in map[string]any) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
	}
	if s, ok := out["config"].(string); ok && !r.configIsText(rs) {
		var v any
		if err := utilyaml.Unmarshal([]byte(s), &v); err == nil { // integers exact
			out["config"] = v
		}
	}
	return out
}

// configIsText reports whether a step's object holds text at its
// template's configPath: in the rendered object, else in the template's
// plain template (a waiting step). Then a config given by hand is that text
// (the natural value of a ConfigMap's data entry), not YAML to parse.
func (r *offline) configIsText(rs RenderedStep) bool {
	if rs.Template == nil {
		return false
	}
	tobj := r.object(rs.Template.Kind, rs.Template.Name)
	if tobj == nil {
		return false
	}
	spec := &api.TemplateSpec{}
	if err := api.Decode(tobj.Object["spec"], spec); err != nil || spec.ConfigPath == "" {
		return false
	}
	p, err := paths.Compile(spec.ConfigPath)
	if err != nil {
		return false
	}
	objs := rs.Objects
	if len(objs) == 0 && spec.Template != nil {
		objs = []map[string]any{spec.Template}
	}
	for _, o := range objs {
		doc, err := json.Marshal(o)
		if err != nil {
			continue
		}
		if v, err := p.Value(doc); err == nil {
			_, text := v.(string)
			return text
		}
	}
	return false
}

// template reads a template from the files.
func (r *offline) template(kind, name string) (*api.TemplateSpec, error) {
	if o := r.object(kind, name); o != nil {
		return prepare.DecodeTemplate(o)
	}
	return nil, fmt.Errorf("%w in the files", prepare.ErrNotFound)
}

func (r *offline) object(kind, name string) *unstructured.Unstructured {
	for _, o := range r.in.Objects {
		if isCarto(o, kind) && o.GetName() == name {
			return o
		}
	}
	return nil
}

func exampleOutput(typ string) string {
	switch typ {
	case "image":
		return "image"
	case "config":
		return "config"
	}
	return "url"
}

// objectsGetter serves the Helm engine's reads (a chart in a ConfigMap)
// from the loaded files instead of a cluster.
type objectsGetter []*unstructured.Unstructured

func (g objectsGetter) Get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	for _, o := range g {
		if o.GroupVersionKind().Group == gvr.Group && strings.ToLower(o.GetKind())+"s" == gvr.Resource &&
			o.GetName() == name && (o.GetNamespace() == "" || o.GetNamespace() == namespace) {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}
