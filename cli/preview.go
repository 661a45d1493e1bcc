package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/cli/objdiff"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/selector"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// The preview of `kontinue diff`: every owner a new chain or template
// reaches, each step prepared twice by the controller's own code
// (reconciler/prepare), with the live definitions and with the new ones,
// and the new objects compared with the live stamped objects. Reads only,
// with the caller's identity.

// defs are the chains and templates of one side (live, or live with the
// files' definitions over them), by kind then name.
type defs map[string]map[string]*unstructured.Unstructured

func (d defs) put(o *unstructured.Unstructured) {
	if d[o.GetKind()] == nil {
		d[o.GetKind()] = map[string]*unstructured.Unstructured{}
	}
	d[o.GetKind()][o.GetName()] = o
}

func (d defs) overlay(files defs) defs {
	out := defs{}
	for _, side := range []defs{d, files} {
		for _, byName := range side {
			for _, o := range byName {
				out.put(o)
			}
		}
	}
	return out
}

// template reads a template of this side, as prepare.Env.Template does.
func (d defs) template(kind, name string) (*api.TemplateSpec, error) {
	if o := d[kind][name]; o != nil {
		return prepare.DecodeTemplate(o)
	}
	return nil, fmt.Errorf("%w", prepare.ErrNotFound)
}

// chooseChain picks an owner's chain among this side's chains as the
// controller does; "" and the reason when none can be chosen.
func (d defs) chooseChain(f *api.Flavor, owner *unstructured.Unstructured, doc []byte) (string, string) {
	var cands []selector.Candidate
	for name, o := range d[f.ChainKind] {
		if _, sel, err := prepare.DecodeChain(o); err == nil && sel != nil {
			cands = append(cands, selector.Candidate{Name: name, Selector: sel})
		}
	}
	c := prepare.ChooseChain(selector.Owner{Kind: f.OwnerKind, Labels: owner.GetLabels(), Doc: doc}, owner.GetName(), cands)
	if c.Reason != "" {
		return "", c.Reason + ": " + c.Message
	}
	return c.Name, ""
}

// stampedReader reads stamped objects with the caller's identity: one
// LIST per resource and namespace (Kontinue's label selects them), not a
// GET per object.
type stampedReader struct {
	dyn   dynamic.Interface
	lists map[string]map[string]*unstructured.Unstructured
	errs  map[string]error
}

func (s *stampedReader) get(ctx context.Context, ref st.StampedRef) (*unstructured.Unstructured, error) {
	gvr, err := gvrOf(ref)
	if err != nil {
		return nil, err
	}
	ns := ref.Namespace // "": cluster-scoped
	k := gvr.String() + "|" + ns
	if _, ok := s.lists[k]; !ok && s.errs[k] == nil {
		l, err := s.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: api.StampedSelector})
		if err != nil {
			s.errs[k] = err
		} else {
			byName := map[string]*unstructured.Unstructured{}
			for i := range l.Items {
				byName[l.Items[i].GetName()] = &l.Items[i]
			}
			s.lists[k] = byName
		}
	}
	if err := s.errs[k]; err != nil {
		return nil, fmt.Errorf("cannot list %s: %w", gvr.Resource, err)
	}
	return s.lists[k][ref.Name], nil
}

// gvrOf reads the resource a status reference names ("tests.test.run").
func gvrOf(ref st.StampedRef) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.Resource == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("the status names %s %s without its resource", ref.Kind, ref.Name)
	}
	return gv.WithResource(strings.SplitN(ref.Resource, ".", 2)[0]), nil
}

// clusterGetter serves the Helm engine's reads (a chart in a ConfigMap)
// with the caller's identity.
type clusterGetter struct{ dyn dynamic.Interface }

func (g clusterGetter) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	return g.dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// previewer prepares owners' steps with both sides.
type previewer struct {
	live, next defs
	files      defs // what the files change
	engines    map[string]render.Engine
	getter     render.ObjectGetter
	stamped    *stampedReader
}

// preview is what the files' definitions do to one owner; reached is
// false when they do not touch it.
func (pv *previewer) preview(ctx context.Context, f *api.Flavor, owner *unstructured.Unstructured) (objdiff.Owner, bool) {
	out := objdiff.Owner{Ref: objdiff.Ref{Kind: owner.GetKind(), Namespace: owner.GetNamespace(), Name: owner.GetName(), UID: string(owner.GetUID())}}
	fail := func(stepName, reason, msg string) (objdiff.Owner, bool) {
		out.Failures = append(out.Failures, objdiff.Failure{Step: stepName, Reason: reason, Message: msg})
		return out, true
	}
	doc, err := json.Marshal(owner.Object)
	if err != nil {
		return fail("", "InvalidSpec", err.Error())
	}
	oldChain, _ := pv.live.chooseChain(f, owner, doc)
	newChain, why := pv.next.chooseChain(f, owner, doc)
	chainEdited := pv.files[f.ChainKind][newChain] != nil || pv.files[f.ChainKind][oldChain] != nil
	if newChain == "" {
		if chainEdited || oldChain != "" && pv.files[f.ChainKind] != nil {
			return fail("", "ChainNotChosen", why)
		}
		return out, false
	}
	chain, _, err := prepare.DecodeChain(pv.next[f.ChainKind][newChain])
	if err != nil {
		return fail("", "InvalidChain", err.Error())
	}
	affected := map[string]bool{}
	for _, def := range chain.Resources {
		a := chainEdited || newChain != oldChain
		for _, n := range templateNames(def.TemplateRef) {
			a = a || pv.files[def.TemplateRef.Kind][n] != nil
		}
		for _, in := range prepare.InputSteps(def) {
			a = a || affected[in]
		}
		affected[def.Name] = a
	}
	reached := false
	for _, a := range affected {
		reached = reached || a
	}
	if !reached {
		return out, false
	}
	var spec api.OwnerSpec
	if err := api.Decode(owner.Object["spec"], &spec); err != nil {
		return fail("", "InvalidSpec", fmt.Sprintf("cannot read the %s spec: %v", f.OwnerKind, err))
	}
	var prev st.OwnerStatus
	if s, ok := owner.Object["status"].(map[string]any); ok {
		_ = api.Decode(s, &prev)
	}
	env := func(side defs, chainName string, c *api.ChainSpec) prepare.Env {
		return prepare.Env{Flavor: f, Owner: owner, OwnerDoc: doc, OwnerSpec: spec, ChainName: chainName, Chain: c,
			Template: side.template, Engines: pv.engines, Getter: pv.getter, Schema: ownerSchema(f.OwnerKind)}
	}
	newEnv := env(pv.next, newChain, &chain)
	var oldEnv *prepare.Env
	if oldChain != "" {
		if c, _, err := prepare.DecodeChain(pv.live[f.ChainKind][oldChain]); err == nil {
			e := env(pv.live, oldChain, &c)
			oldEnv = &e
		}
	}
	newOuts, oldOuts := map[string]step.Outputs{}, map[string]step.Outputs{}
	for _, def := range chain.Resources {
		res := findResource(prev.Resources, def.Name)
		live, liveErr := pv.liveObjects(ctx, res)
		p := prepare.Step(ctx, newEnv, def, newOuts)
		var old *prepare.Prepared
		if oldEnv != nil && affected[def.Name] {
			o := prepare.Step(ctx, *oldEnv, def, oldOuts)
			old = &o
		}
		if o := outputsOf(p, live, res); o != nil {
			newOuts[def.Name] = o
		}
		if old != nil {
			if o := outputsOf(*old, live, res); o != nil {
				oldOuts[def.Name] = o
			}
		} else if o := newOuts[def.Name]; o != nil {
			oldOuts[def.Name] = o
		}
		if !affected[def.Name] {
			continue
		}
		switch {
		case liveErr != nil:
			fail(def.Name, "LiveUnreadable", liveErr.Error())
		case p.Refusal != nil:
			fail(def.Name, p.Refusal.Reason, p.Refusal.Message)
		case p.PassThrough != "":
			for _, l := range live {
				out.Objects = append(out.Objects, removed(def.Name, l))
			}
		case step.LifecycleOf(p.Spec).Generates:
			crt, err := pv.liveRunTemplate(ctx, f, owner, prev.GeneratedRunTemplates, def.Name)
			if err != nil {
				fail(def.Name, "LiveUnreadable", err.Error())
				continue
			}
			if crt != nil {
				live = append(live, crt)
			}
			objs, r := previewRunnable(def, p, old, live)
			if r != nil {
				fail(def.Name, r.Reason, r.Message)
				continue
			}
			out.Objects = append(out.Objects, objs...)
		default:
			var oldObjs []*unstructured.Unstructured
			if old != nil && old.Refusal == nil {
				oldObjs = old.Objects
			}
			objs, err := compareStep(def.Name, step.LifecycleOf(p.Spec).Runs, p.Objects, oldObjs, live)
			if err != nil {
				fail(def.Name, "DiffFailed", err.Error())
				continue
			}
			out.Objects = append(out.Objects, objs...)
		}
	}
	for _, o := range out.Objects {
		if o.Kind == api.KindClusterRunTemplate && o.APIVersion == api.Group+"/"+api.Version {
			out.Generated = append(out.Generated, o.Name) // named after the owner and step, with a hash
		}
	}
	return out, true
}

func findResource(rs []st.Resource, name string) *st.Resource {
	for i := range rs {
		if rs[i].Name == name {
			return &rs[i]
		}
	}
	return nil
}

// liveObjects are the objects a step's status points at, the one its
// outputs come from (stampedRef) first.
func (pv *previewer) liveObjects(ctx context.Context, res *st.Resource) ([]*unstructured.Unstructured, error) {
	if res == nil {
		return nil, nil
	}
	refs := res.StampedObjects
	if res.StampedRef != nil {
		refs = append([]st.StampedRef{*res.StampedRef}, refs...)
	}
	var out []*unstructured.Unstructured
	seen := map[string]bool{}
	for _, r := range refs {
		k := r.APIVersion + "|" + r.Kind + "|" + r.Namespace + "|" + r.Name
		if seen[k] {
			continue
		}
		seen[k] = true
		o, err := pv.stamped.get(ctx, r)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out, nil
}

// outputsOf are the outputs a step passes on in the preview: read from
// the object it would stamp where that object holds them (a ConfigMap's
// data), else from the live object (a status another controller writes),
// else the last good outputs the owner's status keeps.
func outputsOf(p prepare.Prepared, live []*unstructured.Unstructured, res *st.Resource) step.Outputs {
	if p.PassThrough != "" {
		return p.Outputs
	}
	if p.Spec == nil {
		return nil
	}
	var dep step.Outputs
	if p.Inputs.Deployment != nil {
		dep = step.Outputs{"url": p.Inputs.Deployment.URL, "revision": p.Inputs.Deployment.Revision}
	}
	var docs []*unstructured.Unstructured
	generates := step.LifecycleOf(p.Spec).Generates
	if len(p.Objects) > 0 && !generates {
		docs = append(docs, primaryOf(p.Objects, live))
	}
	if generates {
		// A runnable step's outputs are its runs', which the preview does
		// not make: those its live Runnable reports, as the controller
		// reads them.
		for _, l := range live {
			if l.GetKind() == api.KindRunnable {
				if out := step.ObserveRunnable(step.Observed{Kind: p.Kind, Spec: p.Spec}, l).Outputs(); out != nil {
					return out
				}
			}
		}
	} else if len(live) > 0 {
		docs = append(docs, live[0])
	}
	for _, o := range docs {
		doc, err := json.Marshal(o.Object)
		if err != nil {
			continue
		}
		if out, err := step.ReadOutputs(p.Kind, p.Spec, doc, dep); err == nil {
			return out
		}
	}
	if res != nil && res.OutputValues != nil {
		return step.Outputs(res.OutputValues)
	}
	return nil
}

// primaryOf is the rendered object matching the live primary, else the
// first.
func primaryOf(objs, live []*unstructured.Unstructured) *unstructured.Unstructured {
	if len(live) > 0 {
		for _, o := range objs {
			if sameObject(o, live[0]) {
				return o
			}
		}
	}
	return objs[0]
}

func sameObject(a, b *unstructured.Unstructured) bool {
	return a.GroupVersionKind().GroupKind() == b.GroupVersionKind().GroupKind() && a.GetName() == b.GetName() &&
		(a.GetNamespace() == b.GetNamespace() || a.GetNamespace() == "" || b.GetNamespace() == "")
}

// compareStep compares a step's new objects with its live ones. A run
// (an immutable step's object, named by the API server) compares with the
// newest run; other objects by kind and name.
func compareStep(stepName string, immutable bool, objs, oldObjs, live []*unstructured.Unstructured) ([]objdiff.Object, error) {
	var out []objdiff.Object
	matched := map[int]bool{}
	for i, o := range objs {
		li := -1
		if immutable {
			if len(live) > 0 {
				li = 0
			}
		} else {
			for j, l := range live {
				if !matched[j] && sameObject(o, l) {
					li = j
					break
				}
			}
		}
		newObj := comparable(o.Object)
		d := objdiff.Object{Step: stepName, APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
		if d.Name == "" {
			d.Name = o.GetGenerateName()
		}
		var liveObj map[string]any
		if li < 0 {
			d.Op = objdiff.OpAdded
			d.Changes = objdiff.Changes(map[string]any{}, newObj)
		} else {
			matched[li] = true
			shapes := []map[string]any{newObj}
			if i < len(oldObjs) {
				shapes = append(shapes, comparable(oldObjs[i].Object))
			}
			liveObj = objdiff.Project(comparable(live[li].Object), shapes...)
			d.Op = objdiff.OpChanged
			d.Changes = objdiff.Changes(liveObj, newObj)
			if len(d.Changes) == 0 {
				continue
			}
			d.Name = live[li].GetName()
		}
		text, err := objdiff.Unified(diffName("live", d), diffName("new", d), liveObj, newObj)
		if err != nil {
			return nil, err
		}
		d.Diff = text
		out = append(out, d)
	}
	for j, l := range live {
		if !matched[j] && !immutable {
			out = append(out, removed(stepName, l))
		}
	}
	return out, nil
}

func removed(stepName string, l *unstructured.Unstructured) objdiff.Object {
	d := objdiff.Object{Step: stepName, APIVersion: l.GetAPIVersion(), Kind: l.GetKind(), Namespace: l.GetNamespace(), Name: l.GetName(), Op: objdiff.OpRemoved}
	d.Diff = fmt.Sprintf("--- %s\n+++ %s\n(the step no longer stamps this object: the controller deletes it)\n", diffName("live", d), diffName("new", d))
	return d
}

func diffName(side string, d objdiff.Object) string {
	n := d.Name
	if d.Namespace != "" {
		n = d.Namespace + "/" + n
	}
	return fmt.Sprintf("%s %s %s (step %s)", side, d.Kind, n, d.Step)
}

// comparable is an object without what says nothing about the change: the
// digest Kontinue records of what it applied (it changes with any change)
// and the annotations written with an object but never compared (its
// trace context, input set and deployment inputs).
func comparable(o map[string]any) map[string]any {
	u := (&unstructured.Unstructured{Object: o}).DeepCopy()
	if ann := u.GetAnnotations(); ann != nil {
		delete(ann, api.AnnotationDigest)
		delete(ann, api.AnnotationTraceParent)
		delete(ann, api.AnnotationInputSet)
		delete(ann, api.AnnotationDeploymentInputs)
		if len(ann) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
		} else {
			u.SetAnnotations(ann)
		}
	}
	return u.Object
}

// templateNames are the templates a step may use.
func templateNames(ref api.StepTemplateRef) []string {
	var out []string
	if ref.Name != "" {
		out = append(out, ref.Name)
	}
	for _, o := range ref.Options {
		if o.Name != "" {
			out = append(out, o.Name)
		}
	}
	sort.Strings(out)
	return out
}
