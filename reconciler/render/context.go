// Package render turns a template spec and the template context into the
// Kubernetes objects to stamp. Engines are pluggable (seed 003): the
// Cartographer `$(…)$` engine lives in simple.go, and each further engine
// (goTemplate, helm, ytt) is one file that calls Register in init(), its
// field in engine.go's one list and in api.TemplateSpec.
package render

import "kontinue.dev/kontinue/reconciler/api"

// Context is the template context, a JSON-able tree. Engines must treat it as
// read-only: the owner object inside it is shared with the caller.
type Context map[string]any

// Source is the value of a source input (and of the deployment input).
type Source struct{ URL, Revision any }

// Inputs are the input values of a step, keyed by the input's name in the
// step (the `name` of sources[]/images[]/configs[]).
type Inputs struct {
	Sources    map[string]Source
	Images     map[string]any // the image value
	Configs    map[string]any // the config value
	Deployment *Source        // delivery steps only
}

// NewContext builds the template context of one step.
//
// Workload and Deliverable owners are visible as both `workload` and
// `deliverable`, as in Cartographer, so templates can be shared between
// supply chains and deliveries. A Runnable owner is visible as `runnable`.
// The singular `source`, `image` and `config` exist only when the step has
// exactly one input of that kind, because with several the choice would be
// arbitrary.
func NewContext(ownerKind string, owner map[string]any, params map[string]any, in Inputs, labels map[string]string) Context {
	tc := Context{}
	if ownerKind == api.KindRunnable {
		tc["runnable"] = owner
	} else {
		tc["workload"] = owner
		tc["deliverable"] = owner
	}

	if params == nil {
		params = map[string]any{}
	}
	tc["params"] = params

	sources := make(map[string]any, len(in.Sources))
	for name, s := range in.Sources {
		sources[name] = sourceValue(s)
		if len(in.Sources) == 1 {
			tc["source"] = sourceValue(s)
		}
	}
	tc["sources"] = sources

	images := make(map[string]any, len(in.Images))
	for name, v := range in.Images {
		images[name] = map[string]any{"image": v}
		if len(in.Images) == 1 {
			tc["image"] = v
		}
	}
	tc["images"] = images

	configs := make(map[string]any, len(in.Configs))
	for name, v := range in.Configs {
		configs[name] = map[string]any{"config": v}
		if len(in.Configs) == 1 {
			tc["config"] = v
		}
	}
	tc["configs"] = configs

	if in.Deployment != nil {
		tc["deployment"] = sourceValue(*in.Deployment)
	}

	// Plain map[string]any so every engine sees one uniform JSON-like tree.
	l := make(map[string]any, len(labels))
	for k, v := range labels {
		l[k] = v
	}
	tc["labels"] = l
	return tc
}

func sourceValue(s Source) map[string]any {
	return map[string]any{"url": s.URL, "revision": s.Revision}
}
