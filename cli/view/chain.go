package view

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// KindChain is the kind of a chain's view, KindChainList of several.
const (
	KindChain     = "ChainView"
	KindChainList = "ChainViewList"
)

// ChainList is several chains.
type ChainList struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"` // ChainViewList
	Items      []Chain `json:"items"`
}

// NewChainList wraps chains, sorted by SortChains.
func NewChainList(items []Chain) ChainList {
	SortChains(items)
	if items == nil {
		items = []Chain{}
	}
	return ChainList{APIVersion: APIVersion, Kind: KindChainList, Items: items}
}

// Chain is a ClusterSupplyChain or ClusterDelivery as a graph: its steps,
// the earlier steps each reads from (the graph's arrows), the template
// options each may choose from (its branches), and how many owners walk it.
type Chain struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"` // ChainView
	// ChainKind is ClusterSupplyChain or ClusterDelivery.
	ChainKind  string      `json:"chainKind"`
	Name       string      `json:"name"`
	Ready      Condition   `json:"ready"`
	Conditions []Condition `json:"conditions,omitempty"`
	// Selector says which owners the chain selects, as people write it.
	Selector string      `json:"selector,omitempty"`
	Steps    []ChainStep `json:"steps"`
	// Owners counts the owners whose status names this chain, OwnersReady
	// those of them whose Ready is True (see Count).
	Owners      int `json:"owners"`
	OwnersReady int `json:"ownersReady"`
	// FromOwner is true when the chain was not readable and the graph was
	// made from an owner's status (ChainOf): no options, no selector.
	FromOwner bool `json:"fromOwner,omitempty"`
	// Rollout is the chain's roll-out in waves, when it has a policy
	// (spec.rollout); its waves' owners are set by Count.
	Rollout *Rollout `json:"rollout,omitempty"`
}

// ChainStep is one step of a chain.
type ChainStep struct {
	Name string `json:"name"`
	// TemplateKind and TemplateName are the templateRef; TemplateName is
	// empty when the step chooses among Options.
	TemplateKind string   `json:"templateKind,omitempty"`
	TemplateName string   `json:"templateName,omitempty"`
	Options      []Option `json:"options,omitempty"`
	Inputs       []Input  `json:"inputs,omitempty"`
	// Depth is the step's column in a drawing: 0 for a step that reads no
	// other step, else one more than the deepest step it reads.
	Depth int `json:"depth"`
}

// Option is one branch of a step: a template (Name) or a pass-through of
// an input, chosen when Selector matches the owner.
type Option struct {
	Name        string `json:"name,omitempty"`
	PassThrough string `json:"passThrough,omitempty"`
	Selector    string `json:"selector,omitempty"`
}

// Input is one arrow: the step reads Step's output as a source, image,
// config or deployment (Type), under Name.
type Input struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	Step string `json:"step"`
}

// BuildChain makes the view of a ClusterSupplyChain or ClusterDelivery.
// Owners and OwnersReady are zero until Count.
func BuildChain(u *unstructured.Unstructured) Chain {
	c := Chain{APIVersion: APIVersion, Kind: KindChain, ChainKind: u.GetKind(), Name: u.GetName(), Steps: []ChainStep{}}
	var spec api.ChainSpec
	// A spec that does not decode shows as a chain without steps; its
	// conditions say what is wrong.
	_ = api.Decode(u.Object["spec"], &spec)
	var status struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	_ = api.Decode(u.Object["status"], &status)
	c.Conditions = conditions(status.Conditions)
	c.Ready = find(c.Conditions, st.Ready)
	c.Selector = selectorText(spec.Selector, spec.SelectorMatchExpressions, spec.SelectorMatchFields)
	c.Rollout = buildRollout(u, spec, c.Conditions)
	for _, s := range spec.Resources {
		cs := ChainStep{Name: s.Name, TemplateKind: s.TemplateRef.Kind, TemplateName: s.TemplateRef.Name}
		for _, o := range s.TemplateRef.Options {
			cs.Options = append(cs.Options, Option{Name: o.Name, PassThrough: o.PassThrough,
				Selector: selectorText(o.Selector.MatchLabels, o.Selector.MatchExpressions, o.Selector.MatchFields)})
		}
		add := func(typ string, in []api.StepInput) {
			for _, i := range in {
				cs.Inputs = append(cs.Inputs, Input{Type: typ, Name: i.Name, Step: i.Resource})
			}
		}
		add("source", s.Sources)
		add("image", s.Images)
		add("config", s.Configs)
		if s.Deployment != nil {
			cs.Inputs = append(cs.Inputs, Input{Type: "deployment", Step: s.Deployment.Resource})
		}
		c.Steps = append(c.Steps, cs)
	}
	setDepths(c.Steps)
	return c
}

// ChainOf draws an owner's chain from the owner's status alone, for a
// reader who may not read the chain: its steps, their templates and
// inputs, no options.
func ChainOf(o Owner) Chain {
	c := Chain{APIVersion: APIVersion, Kind: KindChain, Steps: []ChainStep{}, FromOwner: true,
		Ready: Condition{Type: st.Ready, Status: string(st.Unknown)}}
	if o.Chain != nil {
		c.ChainKind, c.Name = o.Chain.Kind, o.Chain.Name
	}
	for _, s := range o.Steps {
		cs := ChainStep{Name: s.Name}
		if s.Template != nil {
			cs.TemplateKind, cs.TemplateName = s.Template.Kind, s.Template.Name
		}
		for _, in := range s.Inputs {
			cs.Inputs = append(cs.Inputs, Input{Type: "input", Step: in})
		}
		c.Steps = append(c.Steps, cs)
	}
	setDepths(c.Steps)
	return c
}

// setDepths sets each step's Depth: the longest path of inputs leading to
// it. Inputs naming no step of the chain do not count; a cycle (which the
// chain's validation rejects) stops at the number of steps.
func setDepths(steps []ChainStep) {
	index := map[string]int{}
	for i, s := range steps {
		index[s.Name] = i
	}
	depth := make([]int, len(steps))
	// Relax until nothing changes: at most len(steps) rounds even with a
	// cycle, and chains are small.
	for round := 0; round < len(steps); round++ {
		changed := false
		for i, s := range steps {
			for _, in := range s.Inputs {
				j, ok := index[in.Step]
				if !ok || j == i {
					continue
				}
				if d := depth[j] + 1; d > depth[i] && d <= len(steps) {
					depth[i], changed = d, true
				}
			}
		}
		if !changed {
			break
		}
	}
	for i := range steps {
		steps[i].Depth = depth[i]
	}
}

// ChainKey is "Kind/name", how Count matches owners to chains.
func ChainKey(kind, name string) string { return kind + "/" + name }

// Count sets each chain's Owners and OwnersReady from the owners whose
// status names it, and, during a roll-out, the owners of each wave. A
// chain's Rollout is copied first: the chains given may share it with a
// cache.
func Count(chains []Chain, owners []Owner) {
	type n struct {
		all, ready int
		owners     []Owner
	}
	counts := map[string]*n{}
	for _, o := range owners {
		if o.Chain == nil {
			continue
		}
		k := ChainKey(o.Chain.Kind, o.Chain.Name)
		if counts[k] == nil {
			counts[k] = &n{}
		}
		counts[k].all++
		if o.Ready.Status == string(st.True) {
			counts[k].ready++
		}
		counts[k].owners = append(counts[k].owners, o)
	}
	for i := range chains {
		c := counts[ChainKey(chains[i].ChainKind, chains[i].Name)]
		if c == nil {
			c = &n{}
		}
		chains[i].Owners, chains[i].OwnersReady = c.all, c.ready
		if r := chains[i].Rollout; r != nil {
			cp := *r
			cp.Plan = append([]RolloutWave(nil), r.Plan...)
			kind := api.KindWorkload
			if chains[i].ChainKind == api.KindClusterDelivery {
				kind = api.KindDeliverable
			}
			countWaves(&cp, kind, c.owners)
			chains[i].Rollout = &cp
		}
	}
}

// SortChains orders chains by kind (supply chains first) and name.
func SortChains(chains []Chain) {
	sort.Slice(chains, func(i, j int) bool {
		if chains[i].ChainKind != chains[j].ChainKind {
			return chains[i].ChainKind > chains[j].ChainKind // ClusterSupplyChain before ClusterDelivery
		}
		return chains[i].Name < chains[j].Name
	})
}

// selectorText writes a selector as people read it:
// "a=b, env in (dev, prod), spec.x exists".
func selectorText(labels map[string]string, exprs []metav1.LabelSelectorRequirement, fields []api.FieldRequirement) string {
	var parts []string
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	req := func(key, op string, values []string) string {
		switch op {
		case "Exists":
			return key + " exists"
		case "DoesNotExist":
			return "!" + key
		}
		return fmt.Sprintf("%s %s (%s)", key, strings.ToLower(op), strings.Join(values, ", "))
	}
	for _, e := range exprs {
		parts = append(parts, req(e.Key, string(e.Operator), e.Values))
	}
	for _, f := range fields {
		vals := make([]string, 0, len(f.Values))
		for _, v := range f.Values {
			vals = append(vals, fmt.Sprint(v))
		}
		parts = append(parts, req(f.Key, f.Operator, vals))
	}
	return strings.Join(parts, ", ")
}
