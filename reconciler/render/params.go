package render

import "kontinue.dev/kontinue/reconciler/api"

// MergeParams computes the `params` of the template context.
//
// Precedence, lowest first: template default < chain param < step param <
// owner param. A chain or step param given as `value` (HasValue) is protected:
// the owner cannot override it, so a platform team can pin it. A step param
// replaces the chain param of the same name entirely, protection included, so
// a step can loosen what the chain pinned. Params the template does not
// declare are still passed: the result is the union of all names.
//
// A chain or step param without `value` contributes its `default`, even when
// that default is nil (`default: null`), as Cartographer does.
// Within one list, the last entry of a name wins.
func MergeParams(template []api.TemplateParam, chain, step []api.Param, owner []api.OwnerParam) map[string]any {
	out := make(map[string]any, len(template)+len(chain)+len(step)+len(owner))
	for _, p := range template {
		out[p.Name] = p.Default
	}

	// Chain then step: a later level replaces the value and the protection.
	protected := map[string]bool{}
	for _, level := range [][]api.Param{chain, step} {
		for _, p := range level {
			if p.HasValue {
				out[p.Name] = p.Value
			} else {
				out[p.Name] = p.Default
			}
			protected[p.Name] = p.HasValue
		}
	}

	for _, p := range owner {
		if protected[p.Name] {
			continue
		}
		out[p.Name] = p.Value
	}
	return out
}
