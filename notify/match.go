package notify

import (
	"slices"

	"kontinue.dev/kontinue/notify/api"
)

// Match reports whether the alert in namespace ns, with spec, gets e. An
// alert sees the owners of its own namespace only, unless platform (its
// namespace is one of Kontinue's platform namespaces): then those of
// spec.Namespaces, or of every namespace when that is empty.
func Match(ns string, spec *api.AlertSpec, platform bool, e *Event) bool {
	if spec.Suspend {
		return false
	}
	switch {
	case !platform:
		if e.Namespace != ns {
			return false
		}
	case len(spec.Namespaces) > 0 && !slices.Contains(spec.Namespaces, e.Namespace):
		return false
	}
	if len(spec.Events) > 0 && !slices.Contains(spec.Events, e.Type) {
		return false
	}
	if spec.Severity == api.SeverityError && e.Severity != api.SeverityError {
		return false
	}
	if len(spec.Chains) > 0 && !slices.Contains(spec.Chains, e.Chain) {
		return false
	}
	if len(spec.Steps) > 0 && !slices.Contains(spec.Steps, e.Step) {
		return false
	}
	if len(spec.Owners) == 0 {
		return true
	}
	for _, o := range spec.Owners {
		if o.Kind != "" && o.Kind != e.Kind {
			continue
		}
		if o.Name != "" && o.Name != e.Name {
			continue
		}
		ok := true
		for k, v := range o.MatchLabels {
			if got, has := e.Labels[k]; !has || got != v {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
