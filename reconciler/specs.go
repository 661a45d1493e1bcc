package reconciler

// Decoded specs of chains and templates, cached per resourceVersion: a
// reconcile reads them from the cache and decodes each version once.

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/tracking"
)

// templates reads templates from the tracker's cache and decodes each
// version once; it compiles a step's options once per chain version.
type templates struct {
	tracker *tracking.Tracker

	tmplMu    sync.Mutex
	tmplCache map[string]*cachedTemplate
	optMu     sync.Mutex
	optCache  map[string]cachedOptions
}

func newTemplates(t *tracking.Tracker) *templates {
	return &templates{tracker: t, tmplCache: map[string]*cachedTemplate{}, optCache: map[string]cachedOptions{}}
}

// spec decodes a template once per resourceVersion and validates its
// rules.
func (t *templates) spec(obj *unstructured.Unstructured) (*api.TemplateSpec, error) {
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

type cachedTemplate struct {
	rv   string
	spec *api.TemplateSpec
	err  error
}

// options compiles a step's options once per chain version.
func (t *templates) options(chain, rv string, def api.Step) ([]selector.Candidate, error) {
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

func templateNames(ref api.StepTemplateRef) []string {
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

// exists reports whether the cache holds the template.
func (t *templates) exists(kind, name string) bool { return t.get(kind, name) != nil }

// get returns a template from the cache, or nil.
func (t *templates) get(kind, name string) *unstructured.Unstructured {
	gvr, ok := templateGVRByKind[kind]
	if !ok {
		return nil
	}
	obj, _ := t.tracker.Get(tracking.Key{GVR: gvr}, "", name)
	return obj
}

// specCache decodes chains once per resourceVersion.
type specCache struct {
	mu     sync.Mutex
	chains map[string]*chainSpec
}

func newSpecCache() *specCache { return &specCache{chains: map[string]*chainSpec{}} }

// chainSpec is a decoded chain with its compiled selector.
type chainSpec struct {
	name, rv string
	spec     api.ChainSpec
	selector *selector.Selector
	err      error // the chain is invalid (reported on its status)
}

func (c *specCache) chain(o *unstructured.Unstructured) (*chainSpec, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.chains[o.GetName()]; ok && cs.rv == o.GetResourceVersion() {
		return cs, nil
	}
	cs := &chainSpec{name: o.GetName(), rv: o.GetResourceVersion()}
	cs.spec, cs.selector, cs.err = prepare.DecodeChain(o)
	c.chains[o.GetName()] = cs
	return cs, nil
}

// forget drops a deleted chain and returns what was known of it.
func (c *specCache) forget(name string) *chainSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.chains[name]
	delete(c.chains, name)
	return cs
}
