package step

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/reconciler/api"
)

// Every lifecycle a template can name, and what each one is: the one
// place the rest of Kontinue asks.
func TestLifecycleOf(t *testing.T) {
	for _, tt := range []struct {
		name       string
		spec       *api.TemplateSpec
		want       string // Lifecycle.Name
		label      string // LifecycleName: the template-lifecycle label
		shown      string // ShowLifecycle
		runs, srv  bool   // Runs, ServerNamed
		shadow     bool
		generates  bool
		health     bool // has a default rule
		strategyIs Strategy
		io         string
	}{
		{name: "none named: mutable", spec: gatedSpec(), want: "mutable", label: "mutable", shown: "mutable", shadow: true, strategyIs: mutable{}, io: IOApply},
		{name: "mutable", spec: &api.TemplateSpec{Lifecycle: api.LifecycleMutable}, want: "mutable", label: "mutable", shown: "mutable", shadow: true, strategyIs: mutable{}, io: IOApply},
		{name: "immutable", spec: &api.TemplateSpec{Lifecycle: api.LifecycleImmutable}, want: "immutable", label: "immutable", shown: "immutable",
			runs: true, srv: true, strategyIs: immutable{}, io: IORuns},
		{name: "tekton: immutable, read by its Succeeded condition", spec: &api.TemplateSpec{Lifecycle: api.LifecycleTekton}, want: "tekton", label: "tekton", shown: "tekton",
			runs: true, srv: true, health: true, strategyIs: immutable{}, io: IORuns},
		{name: "runnable: true wins", spec: &api.TemplateSpec{Runnable: true, Lifecycle: api.LifecycleTekton}, want: "runnable", label: "tekton", shown: "tekton (runnable)",
			srv: true, generates: true, strategyIs: runnable{}, io: IORunnable},
		{name: "runnable: true, none named", spec: &api.TemplateSpec{Runnable: true}, want: "runnable", label: "mutable", shown: "mutable (runnable)",
			srv: true, generates: true, strategyIs: runnable{}, io: IORunnable},
		{name: "a name the CRD refuses: the default's", spec: &api.TemplateSpec{Lifecycle: "job"}, want: "mutable", label: "job", shown: "job (mutable)",
			shadow: true, strategyIs: mutable{}, io: IOApply},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := LifecycleOf(tt.spec)
			assert.Equal(t, tt.want, l.Name)
			assert.Equal(t, tt.label, LifecycleName(tt.spec))
			assert.Equal(t, tt.shown, ShowLifecycle(tt.spec))
			assert.Equal(t, tt.runs, l.Runs, "Runs")
			assert.Equal(t, tt.srv, l.ServerNamed, "ServerNamed")
			assert.Equal(t, tt.shadow, l.Shadow, "Shadow")
			assert.Equal(t, tt.generates, l.Generates, "Generates")
			assert.Equal(t, tt.health, l.Health != nil, "Health")
			assert.Equal(t, tt.strategyIs, l.Strategy)
			assert.Equal(t, tt.strategyIs, StrategyOf(tt.spec))
			assert.Equal(t, tt.io, l.IO)
		})
	}
	assert.Equal(t, "mutable", LifecycleOf(nil).Name)
	assert.Equal(t, &api.HealthRule{SingleConditionType: "Succeeded"}, LifecycleOf(&api.TemplateSpec{Lifecycle: api.LifecycleTekton}).Health,
		"Tekton's runs say how they ended in Succeeded, as Cartographer assumes")
}

// The lifecycles a template names are the contract's enum, each once.
func TestLifecyclesAreTheContracts(t *testing.T) {
	var names []string
	for _, l := range lifecycles {
		names = append(names, l.Name)
	}
	assert.Equal(t, api.Lifecycles, names)
	all := Lifecycles()
	require.Len(t, all, len(lifecycles)+1)
	assert.Same(t, runnableLifecycle, all[len(all)-1])
	for _, l := range all {
		assert.NotNil(t, l.Strategy, l.Name)
		assert.Contains(t, []string{IOApply, IORuns, IORunnable}, l.IO, l.Name)
	}
}
