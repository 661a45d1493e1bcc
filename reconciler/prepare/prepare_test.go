package prepare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/step"
)

func owner(labels map[string]string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "carto.run/v1alpha1", "kind": "Workload",
		"metadata": map[string]any{"name": "app", "namespace": "dev"},
		"spec":     map[string]any{"params": []any{map[string]any{"name": "who", "value": "owner"}}},
	}}
	o.SetUID(types.UID("uid-1"))
	o.SetLabels(labels)
	return o
}

// configMap is a template that stamps a ConfigMap named name (no name when
// empty) reading the who param and the source's url.
func configMap(name string) map[string]any {
	meta := map[string]any{"labels": map[string]any{"mine": "kept"}}
	if name != "" {
		meta["name"] = name
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
		"data": map[string]any{"who": "$(params.who)$"}, "status": map[string]any{"x": "y"}}
}

// env is a chain of a source step then `app`, the step under test, with the
// given templates (by name, all of kind ClusterTemplate but "src").
func env(own *unstructured.Unstructured, app api.Step, templates map[string]*api.TemplateSpec) Env {
	doc, _ := json.Marshal(own.Object)
	var spec api.OwnerSpec
	_ = api.Decode(own.Object["spec"], &spec)
	return Env{Flavor: api.WorkloadFlavor, Owner: own, OwnerDoc: doc, OwnerSpec: spec, ChainName: "web",
		Chain: &api.ChainSpec{Resources: []api.Step{{Name: "source", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterSourceTemplate, Name: "src"}}, app}},
		Template: func(kind, name string) (*api.TemplateSpec, error) {
			if t, ok := templates[name]; ok {
				if t == nil {
					return nil, errors.New("healthRule: bad")
				}
				return t, nil
			}
			return nil, ErrNotFound
		}}
}

func opt(name, flavor string) api.TemplateOption {
	return api.TemplateOption{Name: name, Selector: api.OptionSelector{MatchLabels: map[string]string{"flavor": flavor}}}
}

func TestStep(t *testing.T) {
	plain := &api.TemplateSpec{Template: configMap("app-cm")}
	src := []api.StepInput{{Name: "src", Resource: "source"}}
	done := map[string]step.Outputs{"source": {"url": "https://x", "revision": "r1"}}
	tmpl := func(name string) api.StepTemplateRef {
		return api.StepTemplateRef{Kind: api.KindClusterTemplate, Name: name}
	}
	cases := []struct {
		name      string
		labels    map[string]string
		def       api.Step
		templates map[string]*api.TemplateSpec
		outs      map[string]step.Outputs
		// want
		template, passThrough string
		reason, message       string
		waiting               []Missing
		objects               int
		outputs               step.Outputs
	}{
		{name: "plain template", def: api.Step{Name: "app", TemplateRef: tmpl("cm")}, templates: map[string]*api.TemplateSpec{"cm": plain},
			template: "cm", objects: 1},
		{name: "option chosen by the owner's labels", labels: map[string]string{"flavor": "b"},
			def:       api.Step{Name: "app", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Options: []api.TemplateOption{opt("a", "a"), opt("b", "b")}}},
			templates: map[string]*api.TemplateSpec{"a": nil, "b": plain}, template: "b", objects: 1},
		{name: "no option matches", labels: map[string]string{"flavor": "c"},
			def:    api.Step{Name: "app", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Options: []api.TemplateOption{opt("a", "a"), opt("b", "b")}}},
			reason: step.ReasonOptionsMatchError, message: "expected exactly 1 option to match, found [0]"},
		{name: "an option that does not compile", labels: map[string]string{"flavor": "a"},
			def: api.Step{Name: "app", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Options: []api.TemplateOption{opt("a", "a"),
				{Name: "b", Selector: api.OptionSelector{MatchFields: []api.FieldRequirement{{Key: "spec.x", Operator: "Bogus"}}}}}}},
			reason: step.ReasonResolveOptionsError, message: "error matching against template option [b] for resource [app] in supply chain [web]"},
		{name: "pass-through forwards the input's outputs", labels: map[string]string{"flavor": "p"}, outs: done,
			def: api.Step{Name: "app", Sources: src, TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Options: []api.TemplateOption{opt("a", "a"),
				{PassThrough: "src", Selector: api.OptionSelector{MatchLabels: map[string]string{"flavor": "p"}}}}}},
			passThrough: "src", outputs: done["source"]},
		{name: "pass-through waits for its input", labels: map[string]string{"flavor": "p"},
			def: api.Step{Name: "app", Sources: src, TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Options: []api.TemplateOption{
				{PassThrough: "src", Selector: api.OptionSelector{MatchLabels: map[string]string{"flavor": "p"}}}}}},
			passThrough: "src", reason: step.ReasonMissingValueAtPath, message: "step [app] waits for the outputs of step [source]",
			waiting: []Missing{{Step: "source", Type: "source"}}},
		{name: "pass-through of an undeclared input", labels: map[string]string{"flavor": "p"},
			def: api.Step{Name: "app", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Options: []api.TemplateOption{
				{PassThrough: "nope", Selector: api.OptionSelector{MatchLabels: map[string]string{"flavor": "p"}}}}}},
			passThrough: "nope", reason: step.ReasonStampFailure, message: "passes through input [nope], which the step does not declare"},
		{name: "missing template", def: api.Step{Name: "app", TemplateRef: tmpl("gone")},
			template: "gone", reason: step.ReasonRetrievalFailure, message: "unable to get template [ClusterTemplate/gone] for step [app]: not found"},
		{name: "invalid template", def: api.Step{Name: "app", TemplateRef: tmpl("bad")}, templates: map[string]*api.TemplateSpec{"bad": nil},
			template: "bad", reason: step.ReasonStampFailure, message: "template [ClusterTemplate/bad] for step [app] is invalid: healthRule: bad"},
		{name: "waits for every missing input, names the first", def: api.Step{Name: "app", TemplateRef: tmpl("cm"),
			Sources: src, Images: []api.StepInput{{Name: "img", Resource: "source"}}}, templates: map[string]*api.TemplateSpec{"cm": plain},
			template: "cm", reason: step.ReasonMissingValueAtPath, message: "step [app] waits for the outputs of step [source]",
			waiting: []Missing{{Step: "source", Type: "source"}, {Step: "source", Type: "image"}}},
		{name: "input from a later or unknown step", def: api.Step{Name: "app", TemplateRef: tmpl("cm"), Configs: []api.StepInput{{Name: "c", Resource: "later"}}},
			templates: map[string]*api.TemplateSpec{"cm": plain}, outs: done,
			template: "cm", reason: step.ReasonStampFailure, message: "step [app] reads config [c] from step [later], which is not an earlier step of supply chain [web]"},
		{name: "deployment input to a plain template", def: api.Step{Name: "app", TemplateRef: tmpl("cm"), Deployment: &api.DeploymentRef{Resource: "source"}},
			templates: map[string]*api.TemplateSpec{"cm": plain}, outs: done,
			template: "cm", reason: step.ReasonStampFailure, message: "step [app] receives deployment, but only a ClusterDeploymentTemplate step can take it"},
		{name: "deployment template without deployment", def: api.Step{Name: "app", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterDeploymentTemplate, Name: "cm"}},
			templates: map[string]*api.TemplateSpec{"cm": plain},
			template:  "cm", reason: step.ReasonStampFailure, message: "step [app] uses a ClusterDeploymentTemplate but has no deployment input"},
		{name: "deployment template with its deployment", def: api.Step{Name: "app", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterDeploymentTemplate, Name: "cm"}, Deployment: &api.DeploymentRef{Resource: "source"}},
			templates: map[string]*api.TemplateSpec{"cm": plain}, outs: done, template: "cm", objects: 1},
		// The controller refused this and `kontinue render` printed it.
		{name: "a mutable object without metadata.name", def: api.Step{Name: "app", TemplateRef: tmpl("noname")},
			templates: map[string]*api.TemplateSpec{"noname": {Template: configMap("")}},
			template:  "noname", reason: step.ReasonStampFailure, message: "unable to stamp object for resource [app] for template [ClusterTemplate/noname] in supply chain [web]: stamped ConfigMap has no metadata.name"},
		{name: "a run may be named by the API server", def: api.Step{Name: "app", TemplateRef: tmpl("run")},
			templates: map[string]*api.TemplateSpec{"run": {Lifecycle: api.LifecycleImmutable, Template: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"generateName": "run-"}}}},
			template: "run", objects: 1},
		{name: "an object in another namespace", def: api.Step{Name: "app", TemplateRef: tmpl("elsewhere")},
			templates: map[string]*api.TemplateSpec{"elsewhere": {Template: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "prod"}}}},
			template: "elsewhere", reason: step.ReasonStampFailure, message: "stamped ConfigMap [x] names namespace [prod], but objects are stamped only in the Workload's namespace [dev]"},
		{name: "no engine", def: api.Step{Name: "app", TemplateRef: tmpl("empty")}, templates: map[string]*api.TemplateSpec{"empty": {}},
			template: "empty", reason: step.ReasonStampFailure, message: "template sets no render engine"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := env(owner(c.labels), c.def, c.templates)
			p := Step(context.Background(), e, c.def, c.outs)
			assert.Equal(t, c.template, p.Template)
			assert.Equal(t, c.passThrough, p.PassThrough)
			assert.Equal(t, c.outputs, p.Outputs)
			assert.Len(t, p.Objects, c.objects)
			if c.reason == "" {
				require.Nil(t, p.Refusal)
				return
			}
			require.NotNil(t, p.Refusal)
			assert.Equal(t, c.reason, p.Refusal.Reason)
			assert.Contains(t, p.Refusal.Message, c.message)
			assert.Equal(t, c.waiting, p.Refusal.Waiting)
		})
	}
}

// TestStepFixesUpObjects: what the controller applies carries the owner's
// namespace, the step's labels over the template's, the owner as
// controller, no status, and the digest of the rest.
func TestStepFixesUpObjects(t *testing.T) {
	def := api.Step{Name: "app", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Name: "cm"},
		Params: []api.Param{{Name: "who", Default: "step"}}}
	spec := &api.TemplateSpec{Template: configMap("app-cm"), Params: []api.TemplateParam{{Name: "who", Default: "template"}}}
	e := env(owner(nil), def, map[string]*api.TemplateSpec{"cm": spec})
	p := Step(context.Background(), e, def, nil)
	require.Nil(t, p.Refusal)
	require.Len(t, p.Objects, 1)
	o := p.Objects[0]
	assert.Equal(t, "dev", o.GetNamespace())
	assert.Equal(t, map[string]string{"mine": "kept", "kontinue.dev/stamped": "true", "carto.run/workload-name": "app",
		"carto.run/workload-namespace": "dev", "carto.run/supply-chain-name": "web", "carto.run/resource-name": "app",
		"carto.run/template-kind": "ClusterTemplate", "carto.run/cluster-template-name": "cm", "carto.run/template-lifecycle": "mutable"}, o.GetLabels())
	refs := o.GetOwnerReferences()
	require.Len(t, refs, 1)
	assert.Equal(t, "Workload", refs[0].Kind)
	assert.Equal(t, types.UID("uid-1"), refs[0].UID)
	assert.True(t, *refs[0].Controller)
	assert.NotContains(t, o.Object, "status")
	assert.Equal(t, "owner", o.Object["data"].(map[string]any)["who"], "the owner's param wins over the step's default")
	digest := o.GetAnnotations()[api.AnnotationDigest]
	assert.NotEmpty(t, digest)

	// The digest is of the object, not of the run: the same step prepared
	// again has it, a changed param does not.
	again := Step(context.Background(), e, def, nil)
	assert.Equal(t, digest, again.Objects[0].GetAnnotations()[api.AnnotationDigest])
	e.OwnerSpec.Params = nil
	changed := Step(context.Background(), e, def, nil)
	assert.Equal(t, "step", changed.Objects[0].Object["data"].(map[string]any)["who"])
	assert.NotEqual(t, digest, changed.Objects[0].GetAnnotations()[api.AnnotationDigest])
}

// fakeEngine renders a fixed object, or fails.
type fakeEngine struct {
	err   error
	calls *int
}

func (fakeEngine) Name() string { return "fake" }

func (f fakeEngine) Render(context.Context, *api.TemplateSpec, render.Context) ([]*unstructured.Unstructured, error) {
	*f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return []*unstructured.Unstructured{{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "from-fake"}}}}, nil
}

// TestStepEnginesAndRelease: the Env's engines replace the registered ones
// (`kontinue render` once used the global engines where the controller used
// its own), and a Helm step's release is kept after the render, before the
// objects are used.
func TestStepEnginesAndRelease(t *testing.T) {
	def := api.Step{Name: "app", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Name: "chart"}}
	helm := &api.TemplateSpec{Helm: &api.HelmSource{}}
	for _, c := range []struct {
		name            string
		renderErr       error
		keepErr         error
		wantKept        bool
		wantRefusal     string
		wantTransient   bool
		releaseRefusals bool
	}{
		{name: "rendered and kept", wantKept: true},
		{name: "a release that cannot be kept refuses the step", keepErr: errors.New("forbidden"), wantKept: true, wantRefusal: "forbidden"},
		{name: "a failed render keeps nothing", renderErr: render.Transient(errors.New("repository did not answer")), wantRefusal: "repository did not answer", wantTransient: true},
		{name: "a release that cannot be read", releaseRefusals: true, wantRefusal: "cannot read release"},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls, kept := 0, false
			e := env(owner(nil), def, map[string]*api.TemplateSpec{"chart": helm})
			e.Engines = map[string]render.Engine{render.FieldHelm: fakeEngine{err: c.renderErr, calls: &calls}}
			e.Release = func(ctx context.Context, d api.Step) (context.Context, func() error, error) {
				assert.Equal(t, "app", d.Name)
				if c.releaseRefusals {
					return nil, nil, errors.New("cannot read release")
				}
				return ctx, func() error { kept = true; return c.keepErr }, nil
			}
			p := Step(context.Background(), e, def, nil)
			assert.Equal(t, c.wantKept, kept)
			if c.wantRefusal == "" {
				require.Nil(t, p.Refusal)
				assert.Equal(t, 1, calls)
				assert.Equal(t, "from-fake", p.Objects[0].GetName())
				return
			}
			require.NotNil(t, p.Refusal)
			assert.Equal(t, step.ReasonStampFailure, p.Refusal.Reason)
			assert.Contains(t, p.Refusal.Message, c.wantRefusal)
			assert.Equal(t, c.wantTransient, render.IsTransient(p.Refusal.Err))
		})
	}
}

// TestStepOptionsCache: options come from Env.Options when set (the
// controller compiles them once per chain version), and an option that
// does not compile is named with the step and chain.
func TestStepOptionsCache(t *testing.T) {
	def := api.Step{Name: "app", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Options: []api.TemplateOption{opt("a", "a")}}}
	e := env(owner(map[string]string{"flavor": "a"}), def, map[string]*api.TemplateSpec{"a": {Template: configMap("x")}})
	asked := 0
	e.Options = func(d api.Step) ([]selector.Candidate, error) {
		asked++
		return nil, &selector.ResolveOptionsError{Option: "a", Err: fmt.Errorf("option [0]: bad")}
	}
	p := Step(context.Background(), e, def, nil)
	assert.Equal(t, 1, asked)
	require.NotNil(t, p.Refusal)
	assert.Equal(t, "error matching against template option [a] for resource [app] in supply chain [web]: option [0]: bad", p.Refusal.Message)
}

func TestInputSteps(t *testing.T) {
	def := api.Step{Sources: []api.StepInput{{Name: "s", Resource: "a"}}, Images: []api.StepInput{{Name: "i", Resource: "b"}},
		Configs: []api.StepInput{{Name: "c", Resource: "a"}}, Deployment: &api.DeploymentRef{Resource: "d"}}
	assert.Equal(t, []string{"a", "b", "d"}, InputSteps(def))
	assert.Empty(t, InputSteps(api.Step{}))
}

func TestDecodeChainAndChoose(t *testing.T) {
	chain := func(name string, sel map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"kind": "ClusterSupplyChain", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"selector": sel}}}
	}
	_, sel, err := DecodeChain(chain("none", nil))
	require.NoError(t, err)
	assert.Nil(t, sel, "a chain without a selector selects no owner")
	_, _, err = DecodeChain(&unstructured.Unstructured{Object: map[string]any{"kind": "ClusterSupplyChain", "metadata": map[string]any{"name": "bad"},
		"spec": map[string]any{"selectorMatchExpressions": []any{map[string]any{"key": "a", "operator": "Bogus"}}}}})
	assert.ErrorContains(t, err, "invalid selector on ClusterSupplyChain [bad]")

	var cands []selector.Candidate
	for _, n := range []string{"z", "a"} {
		_, sel, err := DecodeChain(chain(n, map[string]any{"app": "web"}))
		require.NoError(t, err)
		cands = append(cands, selector.Candidate{Name: n, Selector: sel})
	}
	o := selector.Owner{Kind: api.KindWorkload, Labels: map[string]string{"app": "web"}}
	choice := ChooseChain(o, "app", cands)
	assert.Equal(t, "MultipleSupplyChainMatches", choice.Reason)
	assert.Equal(t, []string{"a", "z"}, choice.Candidates, "sorted by name")
}

// A Secret's stringData is prepared as the data the API server keeps, so
// that the controller's up-to-date check and `kontinue render` see what is
// stored; the digest stays the rendered object's.
func TestStepSecretStringDataIsStoredAsData(t *testing.T) {
	def := api.Step{Name: "app", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate, Name: "secret"}}
	spec := &api.TemplateSpec{Template: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"},
		"stringData": map[string]any{"who": "$(params.who)$"}}, Params: []api.TemplateParam{{Name: "who", Default: "template"}}}
	p := Step(context.Background(), env(owner(nil), def, map[string]*api.TemplateSpec{"secret": spec}), def, nil)
	require.Nil(t, p.Refusal)
	require.Len(t, p.Objects, 1)
	o := p.Objects[0]
	assert.NotContains(t, o.Object, "stringData")
	assert.Equal(t, map[string]any{"who": "b3duZXI="}, o.Object["data"], "base64 of the owner's param")
}
