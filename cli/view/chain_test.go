package view

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const chainYAML = `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: web}
spec:
  selector: {app.example.com/chain: web}
  selectorMatchExpressions: [{key: tier, operator: In, values: [a, b]}]
  resources:
  - name: source
    templateRef: {kind: ClusterSourceTemplate, name: git}
  - name: image
    templateRef:
      kind: ClusterImageTemplate
      options:
      - {name: kpack, selector: {matchLabels: {builder: kpack}}}
      - {passThrough: source, selector: {matchFields: [{key: spec.image, operator: Exists}]}}
    sources: [{name: src, resource: source}]
  - name: config
    templateRef: {kind: ClusterConfigTemplate, name: cfg}
    images: [{name: built, resource: image}]
    sources: [{name: src, resource: source}]
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: app}
    configs: [{name: c, resource: config}]
    deployment: {resource: nope}
status:
  conditions:
  - {type: Ready, status: "False", reason: TemplatesNotFound, message: "ClusterTemplate [app] not found"}
`

func TestBuildChain(t *testing.T) {
	c := BuildChain(obj(t, chainYAML))
	require.Equal(t, KindChain, c.Kind)
	require.Equal(t, "ClusterSupplyChain", c.ChainKind)
	require.Equal(t, "web", c.Name)
	require.Equal(t, "False", c.Ready.Status)
	require.Equal(t, "TemplatesNotFound", c.Ready.Reason)
	require.Equal(t, "app.example.com/chain=web, tier in (a, b)", c.Selector)
	require.Len(t, c.Steps, 4)

	require.Equal(t, ChainStep{Name: "source", TemplateKind: "ClusterSourceTemplate", TemplateName: "git"}, c.Steps[0])
	require.Equal(t, ChainStep{Name: "image", TemplateKind: "ClusterImageTemplate",
		Options: []Option{{Name: "kpack", Selector: "builder=kpack"}, {PassThrough: "source", Selector: "spec.image exists"}},
		Inputs:  []Input{{Type: "source", Name: "src", Step: "source"}}, Depth: 1}, c.Steps[1])
	require.Equal(t, []Input{{Type: "source", Name: "src", Step: "source"}, {Type: "image", Name: "built", Step: "image"}}, c.Steps[2].Inputs)
	require.Equal(t, 2, c.Steps[2].Depth, "the deepest input counts")
	require.Equal(t, 3, c.Steps[3].Depth, "an input naming no step is drawn but adds no depth")
	require.Equal(t, Input{Type: "deployment", Step: "nope"}, c.Steps[3].Inputs[1])
}

func TestBuildChainBadSpec(t *testing.T) {
	c := BuildChain(obj(t, `{apiVersion: carto.run/v1alpha1, kind: ClusterDelivery, metadata: {name: d}, spec: {resources: "not a list"}}`))
	require.Equal(t, "ClusterDelivery", c.ChainKind)
	require.Empty(t, c.Steps)
	require.NotNil(t, c.Steps, "an empty list in JSON, not null")
	require.Equal(t, "Unknown", c.Ready.Status)
}

func TestSetDepths(t *testing.T) {
	in := func(steps ...string) []Input {
		var out []Input
		for _, s := range steps {
			out = append(out, Input{Step: s})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		steps []ChainStep
		want  []int
	}{
		{"empty", nil, []int{}},
		{"independent", []ChainStep{{Name: "a"}, {Name: "b"}}, []int{0, 0}},
		{"line declared backwards", []ChainStep{{Name: "c", Inputs: in("b")}, {Name: "b", Inputs: in("a")}, {Name: "a"}}, []int{2, 1, 0}},
		{"diamond", []ChainStep{{Name: "a"}, {Name: "b", Inputs: in("a")}, {Name: "c", Inputs: in("a")}, {Name: "d", Inputs: in("b", "c")}}, []int{0, 1, 1, 2}},
		{"self input", []ChainStep{{Name: "a", Inputs: in("a")}}, []int{0}},
		{"cycle ends", []ChainStep{{Name: "a", Inputs: in("b")}, {Name: "b", Inputs: in("a")}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setDepths(tc.steps)
			got := []int{}
			for _, s := range tc.steps {
				got = append(got, s.Depth)
				require.LessOrEqual(t, s.Depth, len(tc.steps))
			}
			if tc.want != nil {
				require.Equal(t, tc.want, got)
			}
		})
	}
}

func TestChainOf(t *testing.T) {
	c := ChainOf(Build(obj(t, workload), nil))
	require.True(t, c.FromOwner)
	require.Equal(t, "ClusterSupplyChain", c.ChainKind)
	require.Equal(t, "web", c.Name)
	require.Len(t, c.Steps, 3)
	require.Equal(t, "src", c.Steps[0].TemplateName)
	require.Equal(t, []Input{{Type: "input", Step: "a"}}, c.Steps[1].Inputs)
	require.Equal(t, 1, c.Steps[1].Depth)
	require.Empty(t, c.Steps[1].Options)

	none := ChainOf(Owner{})
	require.Empty(t, none.Name)
	require.NotNil(t, none.Steps)
}

func TestCount(t *testing.T) {
	owner := func(kind, name, ready string) Owner {
		o := Owner{Ready: Condition{Type: "Ready", Status: ready}}
		if name != "" {
			o.Chain = &Ref{Kind: kind, Name: name}
		}
		return o
	}
	chains := []Chain{
		{ChainKind: "ClusterSupplyChain", Name: "web", Owners: 9, OwnersReady: 9},
		{ChainKind: "ClusterDelivery", Name: "web"},
		{ChainKind: "ClusterSupplyChain", Name: "unused", Owners: 1},
	}
	Count(chains, []Owner{
		owner("ClusterSupplyChain", "web", "True"),
		owner("ClusterSupplyChain", "web", "False"),
		owner("ClusterSupplyChain", "web", "Unknown"),
		owner("ClusterDelivery", "web", "True"),
		owner("", "", "False"),
		owner("ClusterSupplyChain", "gone", "True"),
	})
	require.Equal(t, [][2]int{{3, 1}, {1, 1}, {0, 0}}, [][2]int{
		{chains[0].Owners, chains[0].OwnersReady}, {chains[1].Owners, chains[1].OwnersReady}, {chains[2].Owners, chains[2].OwnersReady}})
}

func TestSortChains(t *testing.T) {
	c := []Chain{{ChainKind: "ClusterDelivery", Name: "a"}, {ChainKind: "ClusterSupplyChain", Name: "b"}, {ChainKind: "ClusterSupplyChain", Name: "a"}}
	SortChains(c)
	require.Equal(t, []Chain{{ChainKind: "ClusterSupplyChain", Name: "a"}, {ChainKind: "ClusterSupplyChain", Name: "b"}, {ChainKind: "ClusterDelivery", Name: "a"}}, c)
}
