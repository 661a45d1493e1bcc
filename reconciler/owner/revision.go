package owner

// Which definitions an owner walks (reconciler/rollout): the live chain
// and templates, or, when its chain declares a roll-out policy, the
// revision the roll-out gives it, read back from the chain's status
// through the same prepare path.

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/rollout"
	"kontinue.dev/kontinue/reconciler/specs"
)

// defs are the definitions one reconcile walks.
type defs struct {
	revision string // "": the live ones
	spec     *api.ChainSpec
	template func(kind, name string) (*api.TemplateSpec, error)
	exists   func(kind, name string) bool
	optsRV   string // what the compiled options are cached under
}

// liveDefs are the chain and templates as they are now.
func liveDefs(env *Env, chain *specs.Chain) defs {
	return defs{spec: &chain.Spec, template: env.Templates.Template, exists: env.Templates.Exists, optsRV: chain.RV}
}

// chooseDefs asks the roll-out of chain (chains: the flavor's chains in
// the cache) which revision owner renders with (recorded: the one its
// status records), and returns its definitions and the revision to record
// ("": the live ones).
func chooseDefs(env *Env, chains []*unstructured.Unstructured, chain *specs.Chain, owner *unstructured.Unstructured, recorded string) (defs, string) {
	live := liveDefs(env, chain)
	if env.revs == nil {
		return live, ""
	}
	var obj *unstructured.Unstructured
	for _, o := range chains {
		if o.GetName() == chain.Name {
			obj = o
		}
	}
	if obj == nil {
		return live, ""
	}
	view := env.revs.view(env.Flavor.ChainKind, obj)
	o := rollout.Owner{Namespace: owner.GetNamespace(), Name: owner.GetName(), Labels: owner.GetLabels(), Revision: recorded}
	rev := rollout.Choose(view.policy, view.status, o)
	if rev == "" {
		return live, ""
	}
	d := view.revision(rev)
	if d == nil {
		return live, "" // Choose only names revisions the status holds
	}
	return defs{revision: rev, spec: &d.spec, optsRV: "revision:" + rev,
		template: func(kind, name string) (*api.TemplateSpec, error) {
			t, ok := d.templates[kind+"/"+name]
			if !ok {
				return nil, fmt.Errorf("%w in revision %s", prepare.ErrNotFound, rev)
			}
			return t.spec, t.err
		},
		exists: func(kind, name string) bool { _, ok := d.templates[kind+"/"+name]; return ok },
	}, rev
}

// revisionBook decodes chains' roll-out state once per resourceVersion,
// and each revision's definitions once.
type revisionBook struct {
	mu     sync.Mutex
	chains map[string]*chainView
}

func newRevisionBook() *revisionBook { return &revisionBook{chains: map[string]*chainView{}} }

type chainView struct {
	rv     string
	policy *rollout.Compiled
	status *rollout.Status
	revs   *revisionCache // shared by the views of one chain
}

// revisionCache holds decoded revisions: a revision's definitions never
// change.
type revisionCache struct {
	mu sync.Mutex
	m  map[string]*revisionDefs
}

type revisionDefs struct {
	spec      api.ChainSpec
	templates map[string]decodedTemplate
}

type decodedTemplate struct {
	spec *api.TemplateSpec
	err  error
}

func (b *revisionBook) view(chainKind string, obj *unstructured.Unstructured) *chainView {
	key := chainKind + "/" + obj.GetName()
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.chains[key]; ok && v.rv == obj.GetResourceVersion() {
		return v
	}
	v := &chainView{rv: obj.GetResourceVersion(), revs: &revisionCache{m: map[string]*revisionDefs{}}}
	// An invalid policy: the owners render with the live definitions (the
	// chain reports why).
	v.policy, v.status, _ = rollout.Read(obj.Object)
	if old, ok := b.chains[key]; ok {
		v.revs = old.revs
		v.revs.mu.Lock()
		for name := range v.revs.m {
			if v.status.Find(name) == nil {
				delete(v.revs.m, name) // collected from the status
			}
		}
		v.revs.mu.Unlock()
	}
	b.chains[key] = v
	return v
}

// revision is the decoded revision name of the status, or nil.
func (v *chainView) revision(name string) *revisionDefs {
	r := v.status.Find(name)
	if r == nil {
		return nil
	}
	v.revs.mu.Lock()
	defer v.revs.mu.Unlock()
	if d, ok := v.revs.m[name]; ok {
		return d
	}
	d := &revisionDefs{templates: map[string]decodedTemplate{}}
	if err := api.Decode(r.Chain, &d.spec); err != nil {
		return nil
	}
	for _, t := range r.Templates {
		obj := &unstructured.Unstructured{Object: map[string]any{"kind": t.Kind, "metadata": map[string]any{"name": t.Name}, "spec": t.Spec}}
		spec, err := prepare.DecodeTemplate(obj)
		d.templates[t.Kind+"/"+t.Name] = decodedTemplate{spec: spec, err: err}
	}
	v.revs.m[name] = d
	return d
}
