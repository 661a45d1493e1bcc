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

// templateSpec decodes a template once per resourceVersion and validates
// its rules.
func (m *Manager) templateSpec(obj *unstructured.Unstructured) (*api.TemplateSpec, error) {
	key := obj.GetKind() + "/" + obj.GetName()
	m.tmplMu.Lock()
	defer m.tmplMu.Unlock()
	if m.tmplCache == nil {
		m.tmplCache = map[string]*cachedTemplate{}
	}
	if c, ok := m.tmplCache[key]; ok && c.rv == obj.GetResourceVersion() {
		return c.spec, c.err
	}
	c := &cachedTemplate{rv: obj.GetResourceVersion()}
	c.spec, c.err = prepare.DecodeTemplate(obj)
	m.tmplCache[key] = c
	return c.spec, c.err
}

type cachedTemplate struct {
	rv   string
	spec *api.TemplateSpec
	err  error
}

// optionCandidates compiles a step's options once per chain version.
func (m *Manager) optionCandidates(chain, rv string, def api.Step) ([]selector.Candidate, error) {
	key := chain + "/" + def.Name
	m.optMu.Lock()
	defer m.optMu.Unlock()
	if m.optCache == nil {
		m.optCache = map[string]cachedOptions{}
	}
	if c, ok := m.optCache[key]; ok && c.rv == rv {
		return c.cands, nil
	}
	cands, err := prepare.Options(def)
	if err != nil {
		return nil, err
	}
	m.optCache[key] = cachedOptions{rv: rv, cands: cands}
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

// templateExists reports whether the cache holds the template.
func (m *Manager) templateExists(kind, name string) bool { return m.template(kind, name) != nil }

// template returns a template from the cache, or nil.
func (m *Manager) template(kind, name string) *unstructured.Unstructured {
	gvr, ok := templateGVRByKind[kind]
	if !ok {
		return nil
	}
	obj, _ := m.tracker.Get(tracking.Key{GVR: gvr}, "", name)
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
