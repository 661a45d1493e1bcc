package health

import (
	"fmt"
	"strings"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
)

// Validate checks a template spec's success and failure rules once: every
// path compiles, healthRule sets exactly one of its fields, a
// ClusterDeploymentTemplate has exactly one of observedMatches and
// observedCompletion (or alwaysSuccessful instead, seed 002),
// observedCompletion.succeeded is not empty, and every rule is a
// {key, value} or exactly one of and/or/not. The error names each bad field,
// e.g. "observedCompletion.succeeded[0].or[1].key: invalid path ...".
func Validate(spec *api.TemplateSpec, templateKind string) error {
	if spec == nil {
		return nil
	}
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	path := func(field, expr string) {
		if expr == "" {
			bad(field, "must not be empty")
			return
		}
		if _, err := paths.Compile(expr); err != nil {
			bad(field, "%v", err)
		}
	}

	if templateKind == api.KindClusterDeploymentTemplate {
		hasMatches, hasCompletion := len(spec.ObservedMatches) > 0, spec.ObservedCompletion != nil
		switch {
		case hasMatches && hasCompletion:
			bad("spec", "a ClusterDeploymentTemplate sets exactly one of observedMatches or observedCompletion, not both")
		case !hasMatches && !hasCompletion && !spec.AlwaysSuccessful:
			bad("spec", "a ClusterDeploymentTemplate needs exactly one of observedMatches or observedCompletion (or alwaysSuccessful)")
		}
	}

	if oc := spec.ObservedCompletion; oc != nil {
		if len(oc.Succeeded) == 0 {
			bad("observedCompletion.succeeded", "must have at least one rule")
		}
		validateRules("observedCompletion.succeeded", oc.Succeeded, 0, bad, path)
		validateRules("observedCompletion.failed", oc.Failed, 0, bad, path)
	}

	for i, m := range spec.ObservedMatches {
		path(fmt.Sprintf("observedMatches[%d].input", i), m.Input)
		path(fmt.Sprintf("observedMatches[%d].output", i), m.Output)
	}

	if hr := spec.HealthRule; hr != nil {
		n := 0
		if hr.AlwaysHealthy != nil {
			n++
		}
		if hr.SingleConditionType != "" {
			n++
		}
		if hr.MultiMatch != nil {
			n++
		}
		if n != 1 {
			bad("healthRule", "set exactly one of alwaysHealthy, singleConditionType or multiMatch (found %d)", n)
		}
		if mm := hr.MultiMatch; mm != nil {
			if matchSetEmpty(mm.Healthy) {
				bad("healthRule.multiMatch.healthy", "needs at least one matchCondition or matchField")
			}
			validateMatchSet("healthRule.multiMatch.healthy", mm.Healthy, bad, path)
			validateMatchSet("healthRule.multiMatch.unhealthy", mm.Unhealthy, bad, path)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fieldErrors(errs)
}

// fieldErrors lists every problem on one line, as it ends up in a condition
// message.
type fieldErrors []error

func (e fieldErrors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (e fieldErrors) Unwrap() []error { return e }

type badFunc func(field string, format string, args ...any)
type pathFunc func(field, expr string)

func validateRules(field string, rules api.Rules, depth int, bad badFunc, path pathFunc) {
	if depth > maxDepth {
		bad(field, "rules nest deeper than %d levels", maxDepth)
		return
	}
	for i := range rules {
		validateRule(fmt.Sprintf("%s[%d]", field, i), &rules[i], depth, bad, path)
	}
}

func validateRule(field string, r *api.Rule, depth int, bad badFunc, path pathFunc) {
	if err := ruleShape(r); err != nil {
		bad(field, "%v", err)
		return
	}
	switch {
	case r.Key != "":
		path(field+".key", r.Key)
	case len(r.And) > 0:
		validateRules(field+".and", r.And, depth+1, bad, path)
	case len(r.Or) > 0:
		validateRules(field+".or", r.Or, depth+1, bad, path)
	default:
		if depth+1 > maxDepth {
			bad(field, "rules nest deeper than %d levels", maxDepth)
			return
		}
		validateRule(field+".not", r.Not, depth+1, bad, path)
	}
}

func validateMatchSet(field string, m api.MatchSet, bad badFunc, path pathFunc) {
	for i, c := range m.MatchConditions {
		f := fmt.Sprintf("%s.matchConditions[%d]", field, i)
		if c.Type == "" {
			bad(f+".type", "must not be empty")
		}
		if c.Status == "" {
			bad(f+".status", "must not be empty")
		}
	}
	for i, mf := range m.MatchFields {
		f := fmt.Sprintf("%s.matchFields[%d]", field, i)
		path(f+".key", mf.Key)
		switch mf.Operator {
		case api.OpIn, api.OpNotIn:
			if len(mf.Values) == 0 {
				bad(f+".values", "operator %s needs at least one value", mf.Operator)
			}
		case api.OpExists, api.OpDoesNotExist:
			if len(mf.Values) > 0 {
				bad(f+".values", "operator %s takes no values", mf.Operator)
			}
		default:
			bad(f+".operator", "unknown operator [%s], expected In, NotIn, Exists or DoesNotExist", mf.Operator)
		}
		if mf.MessagePath != "" {
			path(f+".messagePath", mf.MessagePath)
		}
	}
}
