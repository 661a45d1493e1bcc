// Package specs holds the decoded specs of chains and templates, cached
// per resourceVersion: a reconcile reads them from the tracker's cache and
// decodes each version once. The Manager's routing (which owners a chain
// or template wakes) and the owner reconciler share them.
package specs

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/selector"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/tracking"
)

// The resources of the five template kinds.
var (
	templateGVRByKind = map[string]schema.GroupVersionResource{}
	templateKindByGVR = map[schema.GroupVersionResource]string{}
)

func init() {
	for kind, res := range map[string]string{
		api.KindClusterSourceTemplate:     "clustersourcetemplates",
		api.KindClusterImageTemplate:      "clusterimagetemplates",
		api.KindClusterConfigTemplate:     "clusterconfigtemplates",
		api.KindClusterTemplate:           "clustertemplates",
		api.KindClusterDeploymentTemplate: "clusterdeploymenttemplates",
	} {
		templateGVRByKind[kind] = api.GVR(res)
		templateKindByGVR[api.GVR(res)] = kind
	}
}

// TemplateKind is the template kind served at gvr ("": not a template).
func TemplateKind(gvr schema.GroupVersionResource) string { return templateKindByGVR[gvr] }

// TemplateGVRs are the resources of every template kind.
func TemplateGVRs() []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, 0, len(templateGVRByKind))
	for _, gvr := range templateGVRByKind {
		out = append(out, gvr)
	}
	return out
}

// Templates reads templates from the tracker's cache and decodes each
// version once; it compiles a step's options once per chain version.
type Templates struct {
	tracker *tracking.Tracker

	tmplMu    sync.Mutex
	tmplCache map[string]*cachedTemplate
	optMu     sync.Mutex
	optCache  map[string]cachedOptions
}

// NewTemplates reads templates from t.
func NewTemplates(t *tracking.Tracker) *Templates {
	return &Templates{tracker: t, tmplCache: map[string]*cachedTemplate{}, optCache: map[string]cachedOptions{}}
}

// spec decodes a template once per resourceVersion and validates its
// rules.
func (t *Templates) spec(obj *unstructured.Unstructured) (*api.TemplateSpec, error) {
	key := obj.GetKind() + "/" + obj.GetName()
	t.tmplMu.Lock()
	defer t.tmplMu.Unlock()
	if c, ok := t.tmplCache[key]; ok && c.rv == obj.GetResourceVersion() {
		return c.spec, c.err
	}
	c := &cachedTemplate{rv: obj.GetResourceVersion()}
	c.spec, c.err = prepare.DecodeTemplate(obj)
	t.tmplCache[key] = c
	return c.spec, c.err
}

// Template is the decoded template kind/name (prepare.ErrNotFound when the
// cache does not hold it).
func (t *Templates) Template(kind, name string) (*api.TemplateSpec, error) {
	obj := t.get(kind, name)
	if obj == nil {
		return nil, prepare.ErrNotFound
	}
	return t.spec(obj)
}

type cachedTemplate struct {
	rv   string
	spec *api.TemplateSpec
	err  error
}

// Options compiles a step's options once per chain version (chain: its
// kind and name, rv its resourceVersion).
func (t *Templates) Options(chain, rv string, def api.Step) ([]selector.Candidate, error) {
	key := chain + "/" + def.Name
	t.optMu.Lock()
	defer t.optMu.Unlock()
	if c, ok := t.optCache[key]; ok && c.rv == rv {
		return c.cands, nil
	}
	cands, err := prepare.Options(def)
	if err != nil {
		return nil, err
	}
	t.optCache[key] = cachedOptions{rv: rv, cands: cands}
	return cands, nil
}

type cachedOptions struct {
	rv    string
	cands []selector.Candidate
}

// TemplateNames are the templates a step's ref names (its options').
func TemplateNames(ref api.StepTemplateRef) []string {
	if ref.Name != "" {
		return []string{ref.Name}
	}
	var out []string
	for _, o := range ref.Options {
		if o.Name != "" {
			out = append(out, o.Name)
		}
	}
	return out
}

// Exists reports whether the cache holds the template.
func (t *Templates) Exists(kind, name string) bool { return t.get(kind, name) != nil }

// get returns a template from the cache, or nil.
func (t *Templates) get(kind, name string) *unstructured.Unstructured {
	gvr, ok := templateGVRByKind[kind]
	if !ok {
		return nil
	}
	obj, _ := t.tracker.Get(tracking.Key{GVR: gvr}, "", name)
	return obj
}

// Chains decodes chains once per resourceVersion.
type Chains struct {
	mu     sync.Mutex
	chains map[string]*Chain
}

// NewChains is an empty cache of chains.
func NewChains() *Chains { return &Chains{chains: map[string]*Chain{}} }

// Chain is a decoded chain with its compiled selector.
type Chain struct {
	Name, RV string
	Spec     api.ChainSpec
	Selector *selector.Selector
	Err      error // the chain is invalid (reported on its status)
}

// Chain is the decoded chain o.
func (c *Chains) Chain(o *unstructured.Unstructured) *Chain {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.chains[o.GetName()]; ok && cs.RV == o.GetResourceVersion() {
		return cs
	}
	cs := &Chain{Name: o.GetName(), RV: o.GetResourceVersion()}
	cs.Spec, cs.Selector, cs.Err = prepare.DecodeChain(o)
	c.chains[o.GetName()] = cs
	return cs
}

// Reaches reports whether the chain's selector picks the owner of kind
// whose JSON, as the cache holds it, is doc, and names the owner. Only its
// name, namespace and labels are decoded: a chain event scans every
// cached owner this way, and decoding them all held a second copy of the
// cache (a restart's peak memory). A selector error counts as a match, so
// the owner's own reconcile reports it.
func (c *Chain) Reaches(kind string, doc []byte) (namespace, name string, ok bool) {
	var o struct {
		Metadata struct {
			Name, Namespace string
			Labels          map[string]string
		}
	}
	if c.Selector == nil || json.Unmarshal(doc, &o) != nil {
		return "", "", false
	}
	match, err := c.Selector.Matches(selector.Owner{Kind: kind, Labels: o.Metadata.Labels, Doc: doc})
	return o.Metadata.Namespace, o.Metadata.Name, match || err != nil
}

// Forget drops a deleted chain and returns what was known of it.
func (c *Chains) Forget(name string) *Chain {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.chains[name]
	delete(c.chains, name)
	return cs
}

// TemplatesReady is the chain's TemplatesReady condition: False, in
// Cartographer's words, when a step names a template that does not exist.
// detail names each missing template by kind and name, for an event.
func TemplatesReady(spec api.ChainSpec, exists func(kind, name string) bool) (cond metav1.Condition, detail string) {
	var steps, missing []string
	for _, s := range spec.Resources {
		stepMissing := false
		for _, n := range TemplateNames(s.TemplateRef) {
			if !exists(s.TemplateRef.Kind, n) {
				missing = append(missing, fmt.Sprintf("step [%s]: %s [%s]", s.Name, s.TemplateRef.Kind, n))
				stepMissing = true
			}
		}
		if stepMissing {
			steps = append(steps, s.Name)
		}
	}
	if len(steps) > 0 {
		return st.Cond(st.TemplatesReady, st.False, "TemplatesNotFound",
			fmt.Sprintf("did not find the template of the resource(s) [%s]", strings.Join(steps, ", "))), strings.Join(missing, ", ")
	}
	return st.Cond(st.TemplatesReady, st.True, "Ready", ""), ""
}
