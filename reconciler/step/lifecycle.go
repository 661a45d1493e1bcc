package step

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
)

// A Lifecycle is how a step's objects live: everything that differs
// between lifecycles, registered once (lifecycles, runnableLifecycle).
// Nothing else compares lifecycle names: the controller, `kontinue render`,
// `kontinue diff`, `get` and `check` ask the step's Lifecycle (LifecycleOf).
// The doing side, how its steps read and write through stamp, is the writer
// reconciler/owner registers under IO.
//
// A new lifecycle is a Strategy (its own file here, with table tests), an
// entry below, the name in api (its constant, api.Lifecycles and the
// enum marker, one file), and a writer in reconciler/owner
// only when none of the existing ones (IO) does its reads and writes.
type Lifecycle struct {
	// Name is what templates call it (spec.lifecycle; runnable: true) and
	// how the CLI shows it.
	Name string
	// Strategy decides what its steps write and publish, and in which order
	// (plan.go).
	Strategy Strategy
	// IO names its steps' writer in reconciler/owner (owner/lifecycles.go).
	IO string
	// Runs: Kontinue creates a new object (a run) for each input set and
	// never updates one; the newest run is the step's (a preview compares
	// with it; provenance reads it).
	Runs bool
	// ServerNamed: what the template renders may leave its name to the API
	// server (metadata.generateName); an object applied in place cannot.
	ServerNamed bool
	// Health decides the step's health when its template sets no rule, as
	// a healthRule would (nil: the template kind's default: health.Evaluate).
	Health *api.HealthRule
	// Shadow: a gated step may keep a shadow, the copy of its last good
	// object (shadow.go): only for an object updated in place.
	Shadow bool
	// Generates: the step stamps objects generated from what its template
	// rendered (prepare.Runnable: a ClusterRunTemplate and a Runnable, which
	// creates the runs), not the rendered object itself.
	Generates bool
	// Kinds are what the step stamps as its service account besides what
	// the template renders (`kontinue check` asks for their permissions).
	Kinds []schema.GroupVersionKind
	// Note says, after the step in `kontinue render`, how the controller
	// stamps what it renders ("": as rendered).
	Note string
}

// The writers of reconciler/owner (Lifecycle.IO).
const (
	IOApply    = "apply"    // objects applied in place (owner/mutable.go)
	IORuns     = "runs"     // a run created per input set (owner/immutable.go)
	IORunnable = "runnable" // the generated objects (owner/runnablestep.go)
)

// lifecycles are the lifecycles a template names with spec.lifecycle; the
// first is the one of a template that names none.
var lifecycles = []*Lifecycle{
	// One object (or several, with a primary) updated in place
	// (mutable.go); gated when the template says what success is, with a
	// shadow after a failure (shadow.go).
	{Name: api.LifecycleMutable, Strategy: mutable{}, IO: IOApply, Shadow: true},
	// A new run per input set (immutable.go): Jobs and the like.
	{Name: api.LifecycleImmutable, Strategy: immutable{}, IO: IORuns, Runs: true, ServerNamed: true},
	// Immutable, for Tekton's TaskRuns and PipelineRuns: their Succeeded
	// condition says how a run ended (as Cartographer assumes).
	{Name: api.LifecycleTekton, Strategy: immutable{}, IO: IORuns, Runs: true, ServerNamed: true,
		Health: &api.HealthRule{SingleConditionType: "Succeeded"}},
}

// runnableLifecycle is the lifecycle of a template that sets runnable:
// true, whatever spec.lifecycle says (the CRD allows only mutable there):
// a generated Runnable creates the runs (runnable.go).
var runnableLifecycle = &Lifecycle{Name: "runnable", Strategy: runnable{}, IO: IORunnable, ServerNamed: true, Generates: true,
	Kinds: []schema.GroupVersionKind{{Group: api.Group, Version: api.Version, Kind: api.KindRunnable}},
	Note:  "runnable: true: the controller stamps these through a generated Runnable"}

// Lifecycles are every lifecycle (the default first).
func Lifecycles() []*Lifecycle {
	return append(append([]*Lifecycle{}, lifecycles...), runnableLifecycle)
}

// LifecycleOf is the lifecycle a template gives its steps. A name no
// lifecycle has (the CRD refuses it) is the default's.
func LifecycleOf(spec *api.TemplateSpec) *Lifecycle {
	if spec == nil {
		return lifecycles[0]
	}
	if spec.Runnable {
		return runnableLifecycle
	}
	for _, l := range lifecycles {
		if l.Name == spec.Lifecycle {
			return l
		}
	}
	return lifecycles[0]
}

// LifecycleName is the lifecycle a template names (spec.lifecycle, or the
// default's): what the carto.run/template-lifecycle label says, as in
// Cartographer.
func LifecycleName(spec *api.TemplateSpec) string {
	if spec.Lifecycle != "" {
		return spec.Lifecycle
	}
	return lifecycles[0].Name
}

// ShowLifecycle is how the CLI shows a template's lifecycle: the one it
// names, and the one it gets when that differs ("mutable (runnable)").
func ShowLifecycle(spec *api.TemplateSpec) string {
	named, l := LifecycleName(spec), LifecycleOf(spec)
	if l.Name == named {
		return named
	}
	return named + " (" + l.Name + ")"
}

// StrategyOf is the Strategy of a template's steps.
func StrategyOf(spec *api.TemplateSpec) Strategy { return LifecycleOf(spec).Strategy }
