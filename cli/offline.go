package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/health"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/selector"
)

// Offline rendering: what each step of a chain would stamp for an owner,
// with the controller's own code (option choice by package selector, params
// by render.MergeParams, the context by render.NewContext, the engines of
// package render), and upstream outputs given by hand instead of read from
// stamped objects.

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

// LoadObjects reads YAML or JSON documents from files and folders (recursively,
// *.yaml, *.yml, *.json); "-" is stdin.
func LoadObjects(paths []string, stdin io.Reader) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	read := func(name string, r io.Reader) error {
		d := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
		for {
			var m map[string]any
			if err := d.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return fmt.Errorf("%s: %w", name, err)
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if u.IsList() {
				l, err := u.ToList()
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				for i := range l.Items {
					out = append(out, &l.Items[i])
				}
				continue
			}
			if u.GetKind() == "" {
				return fmt.Errorf("%s: a document without kind", name)
			}
			out = append(out, u)
		}
	}
	for _, p := range paths {
		if p == "-" {
			if err := read("stdin", stdin); err != nil {
				return nil, err
			}
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		var files []string
		if fi.IsDir() {
			err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
				if err != nil {
					return err
				}
				switch strings.ToLower(filepath.Ext(path)) {
				case ".yaml", ".yml", ".json":
					if !d.IsDir() {
						files = append(files, path)
					}
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			sort.Strings(files)
		} else {
			files = []string{p}
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if err := read(f, bytes.NewReader(b)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
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
	flavor := reconciler.WorkloadFlavor
	if owner.GetKind() == api.KindDeliverable {
		flavor = reconciler.DeliverableFlavor
	}
	doc, err := json.Marshal(owner.Object)
	if err != nil {
		return nil, err
	}
	so := selector.Owner{Kind: flavor.OwnerKind, Labels: owner.GetLabels(), Doc: doc}

	chainObj, err := chooseChain(in, flavor, so, owner.GetName())
	if err != nil {
		return nil, err
	}
	var chain api.ChainSpec
	if err := api.Decode(chainObj.Object["spec"], &chain); err != nil {
		return nil, fmt.Errorf("cannot read spec of %s [%s]: %w", chainObj.GetKind(), chainObj.GetName(), err)
	}
	var ownerSpec api.OwnerSpec
	if err := api.Decode(owner.Object["spec"], &ownerSpec); err != nil {
		return nil, fmt.Errorf("cannot read spec of %s [%s]: %w", owner.GetKind(), owner.GetName(), err)
	}
	res := &RenderResult{
		Owner: ObjectName{Kind: owner.GetKind(), Namespace: owner.GetNamespace(), Name: owner.GetName()},
		Chain: ObjectName{Kind: chainObj.GetKind(), Name: chainObj.GetName()},
	}
	r := &offline{in: in, owner: owner, so: so, flavor: flavor, chain: chain, chainName: chainObj.GetName(), ownerSpec: ownerSpec,
		outs: map[string]map[string]any{}}
	ctx = render.WithObjectGetter(ctx, objectsGetter(in.Objects))
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

func chooseChain(in RenderInput, flavor *reconciler.Flavor, so selector.Owner, ownerName string) (*unstructured.Unstructured, error) {
	byName := map[string]*unstructured.Unstructured{}
	var cands []selector.Candidate
	for _, o := range in.Objects {
		if !isCarto(o, flavor.ChainKind) {
			continue
		}
		byName[o.GetName()] = o
		var spec api.ChainSpec
		if err := api.Decode(o.Object["spec"], &spec); err != nil {
			continue
		}
		sel, err := selector.Compile(spec.Selector, spec.SelectorMatchExpressions, spec.SelectorMatchFields)
		if err != nil || sel.Empty() {
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
	sort.Slice(cands, func(i, j int) bool { return cands[i].Name < cands[j].Name })
	choice := selector.ChooseChain(so, ownerName, cands)
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
	in        RenderInput
	owner     *unstructured.Unstructured
	so        selector.Owner
	flavor    *reconciler.Flavor
	chain     api.ChainSpec
	chainName string
	ownerSpec api.OwnerSpec
	outs      map[string]map[string]any
}

// The controller's ResourceSubmitted reasons for what a render can find.
const (
	reasonOptions   = "TemplateOptionsMatchError"
	reasonResolve   = "ResolveTemplateOptionsError"
	reasonRetrieval = "TemplateObjectRetrievalFailure"
	reasonStamp     = "TemplateStampFailure"
	passThroughName = "passThrough:"
)

func (r *offline) step(ctx context.Context, step api.Step) RenderedStep {
	rs := RenderedStep{Name: step.Name}
	fail := func(reason string, err error) RenderedStep {
		rs.Reason, rs.Error = reason, err.Error()
		return rs
	}
	kind := step.TemplateRef.Kind
	name := step.TemplateRef.Name
	if len(step.TemplateRef.Options) > 0 {
		var cands []selector.Candidate
		for i, o := range step.TemplateRef.Options {
			n := o.Name
			if o.PassThrough != "" {
				n = passThroughName + o.PassThrough
			}
			s, err := selector.Compile(o.Selector.MatchLabels, o.Selector.MatchExpressions, o.Selector.MatchFields)
			if err != nil {
				return fail(reasonResolve, &selector.ResolveOptionsError{Step: step.Name, ChainKind: r.flavor.ChainKind, Chain: r.chainName, Option: n, Err: fmt.Errorf("option [%d]: %w", i, err)})
			}
			cands = append(cands, selector.Candidate{Name: n, Selector: s})
		}
		chosen, err := selector.ChooseOption(r.so, r.flavor.ChainKind, r.chainName, step.Name, cands)
		if err != nil {
			var oe *selector.OptionsMatchError
			if errors.As(err, &oe) {
				return fail(reasonOptions, err)
			}
			return fail(reasonResolve, err)
		}
		if strings.HasPrefix(chosen, passThroughName) {
			return r.passThrough(step, rs, strings.TrimPrefix(chosen, passThroughName))
		}
		name = chosen
	}
	rs.Template = &ObjectName{Kind: kind, Name: name}
	tobj := r.template(kind, name)
	if tobj == nil {
		return fail(reasonRetrieval, fmt.Errorf("unable to get template [%s/%s] for step [%s]: not in the files", kind, name, step.Name))
	}
	spec := &api.TemplateSpec{}
	if err := api.Decode(tobj.Object["spec"], spec); err != nil {
		return fail(reasonStamp, fmt.Errorf("template [%s/%s] for step [%s] is invalid: %w", kind, name, step.Name, err))
	}
	if err := health.Validate(spec, kind); err != nil {
		return fail(reasonStamp, fmt.Errorf("template [%s/%s] for step [%s] is invalid: %w", kind, name, step.Name, err))
	}
	rs.Runnable = spec.Runnable
	inputs, waiting, err := r.inputs(step, kind)
	if err != nil {
		return fail(reasonStamp, err)
	}
	if waiting != "" {
		rs.Waiting = waiting
		return rs
	}
	params := render.MergeParams(spec.Params, r.chain.Params, step.Params, r.ownerSpec.Params)
	labels := r.labels(step, kind, name, spec)
	tc := render.NewContext(r.flavor.OwnerKind, r.owner.Object, params, inputs, labels)
	eng, err := render.EngineForWith(spec, map[string]render.Engine{render.FieldHelm: render.HelmWith(r.in.Helm)})
	if err != nil {
		return fail(reasonStamp, err)
	}
	objs, err := eng.Render(ctx, spec, tc)
	if err == nil && len(objs) == 0 {
		err = fmt.Errorf("the template rendered no object")
	}
	if err != nil {
		return fail(reasonStamp, fmt.Errorf("unable to stamp object for step [%s] from template [%s/%s] in %s [%s]: %w", step.Name, kind, name, r.flavor.ChainNoun, r.chainName, err))
	}
	ns := r.owner.GetNamespace()
	for _, o := range objs {
		if got := o.GetNamespace(); got != "" && got != ns {
			return fail(reasonStamp, fmt.Errorf("stamped %s [%s] names namespace [%s], but objects are stamped only in the %s's namespace [%s]", o.GetKind(), o.GetName(), got, r.flavor.OwnerKind, ns))
		}
		o.SetNamespace(ns)
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		o.SetLabels(l)
		unstructured.RemoveNestedField(o.Object, "status")
		rs.Objects = append(rs.Objects, o.Object)
	}
	return rs
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
		if err := yaml.Unmarshal([]byte(s), &v); err == nil {
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
	tobj := r.template(rs.Template.Kind, rs.Template.Name)
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

func (r *offline) passThrough(step api.Step, rs RenderedStep, input string) RenderedStep {
	rs.PassThrough = input
	from := ""
	for _, list := range [][]api.StepInput{step.Sources, step.Images, step.Configs} {
		for _, i := range list {
			if i.Name == input {
				from = i.Resource
			}
		}
	}
	if from == "" && step.Deployment != nil && input == "deployment" {
		from = step.Deployment.Resource
	}
	if from == "" {
		rs.Reason, rs.Error = reasonStamp, fmt.Sprintf("step [%s] passes through input [%s], which the step does not declare", step.Name, input)
		return rs
	}
	o, ok := r.outs[from]
	if !ok {
		rs.Waiting = fmt.Sprintf("step [%s] waits for the outputs of step [%s]", step.Name, from)
		return rs
	}
	rs.Outputs = o
	return rs
}

func (r *offline) template(kind, name string) *unstructured.Unstructured {
	for _, o := range r.in.Objects {
		if isCarto(o, kind) && o.GetName() == name {
			return o
		}
	}
	return nil
}

// inputs collects a step's inputs from the outputs of earlier steps.
func (r *offline) inputs(step api.Step, kind string) (render.Inputs, string, error) {
	in := render.Inputs{Sources: map[string]render.Source{}, Images: map[string]any{}, Configs: map[string]any{}}
	earlier := map[string]bool{}
	for _, s := range r.chain.Resources {
		if s.Name == step.Name {
			break
		}
		earlier[s.Name] = true
	}
	var missing []string
	get := func(typ string, i api.StepInput) (map[string]any, bool, error) {
		if !earlier[i.Resource] {
			return nil, false, fmt.Errorf("step [%s] reads %s [%s] from step [%s], which is not an earlier step of %s [%s]", step.Name, typ, i.Name, i.Resource, r.flavor.ChainNoun, r.chainName)
		}
		o, ok := r.outs[i.Resource]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (e.g. --step-output %s.%s=...)", i.Resource, i.Resource, exampleOutput(typ)))
		}
		return o, ok, nil
	}
	for _, i := range step.Sources {
		o, ok, err := get("source", i)
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Sources[i.Name] = render.Source{URL: o["url"], Revision: o["revision"]}
		}
	}
	for _, i := range step.Images {
		o, ok, err := get("image", i)
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Images[i.Name] = o["image"]
		}
	}
	for _, i := range step.Configs {
		o, ok, err := get("config", i)
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Configs[i.Name] = o["config"]
		}
	}
	if step.Deployment != nil {
		if kind != api.KindClusterDeploymentTemplate {
			return in, "", fmt.Errorf("step [%s] receives deployment, but only a %s step can take it (the step uses a %s)", step.Name, api.KindClusterDeploymentTemplate, kind)
		}
		o, ok, err := get("deployment", api.StepInput{Name: "deployment", Resource: step.Deployment.Resource})
		if err != nil {
			return in, "", err
		}
		if ok {
			in.Deployment = &render.Source{URL: o["url"], Revision: o["revision"]}
		}
	} else if kind == api.KindClusterDeploymentTemplate {
		return in, "", fmt.Errorf("step [%s] uses a %s but has no deployment input", step.Name, api.KindClusterDeploymentTemplate)
	}
	if len(missing) > 0 {
		return in, fmt.Sprintf("step [%s] waits for the outputs of step %s", step.Name, strings.Join(dedup(missing), ", ")), nil
	}
	return in, "", nil
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

func dedup(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// labels are the labels the controller puts on a step's objects.
func (r *offline) labels(step api.Step, kind, name string, spec *api.TemplateSpec) map[string]string {
	lifecycle := spec.Lifecycle
	if lifecycle == "" {
		lifecycle = api.LifecycleMutable
	}
	return map[string]string{
		reconciler.StampedLabel:           "true",
		r.flavor.LabelOwnerName:           r.owner.GetName(),
		r.flavor.LabelOwnerNS:             r.owner.GetNamespace(),
		r.flavor.LabelChainName:           r.chainName,
		reconciler.LabelResourceName:      step.Name,
		reconciler.LabelTemplateKind:      kind,
		reconciler.LabelTemplateName:      name,
		reconciler.LabelTemplateLifecycle: lifecycle,
	}
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
