package health

import (
	"errors"
	"fmt"
	"strings"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
)

// maxDepth bounds how deeply and/or/not may nest. Decoded YAML cannot form a
// cycle, but a Rule built in code could, and recursion must not run away.
const maxDepth = 64

// ruleError marks a problem with the rule itself (a path that does not
// compile, a rule with neither key nor and/or/not), as opposed to a problem
// with the object (a path that yields several values).
type ruleError struct{ err error }

func (e *ruleError) Error() string { return e.err.Error() }
func (e *ruleError) Unwrap() error { return e.err }

func isRuleError(err error) bool {
	var re *ruleError
	return errors.As(err, &re)
}

// compile is paths.Compile with its error marked as a rule error.
func compile(expr string) (*paths.Path, error) {
	p, err := paths.Compile(expr)
	if err != nil {
		return nil, &ruleError{err}
	}
	return p, nil
}

// lookup reads the value at expr. found is false when the path is missing;
// err is a rule error (bad path) or an object error (several values).
func lookup(expr string, doc []byte) (v any, found bool, err error) {
	p, err := compile(expr)
	if err != nil {
		return nil, false, err
	}
	v, err = p.Value(doc)
	if paths.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// evalRules evaluates a list of rules, which holds when all of them hold.
//
// Evaluation is three-valued (Kleene logic): a missing path is simply "not
// met", but a path that yields several values leaves its rule undecided,
// reported as a non-nil error. and is false if any part is false, or
// undecided if any is undecided; or is true if any part is true; not of an
// undecided rule stays undecided. So a failed rule is never declared to hold
// because of a value that could not be read.
func evalRules(rules api.Rules, doc []byte, depth int) (bool, error) {
	if depth > maxDepth {
		return false, &ruleError{fmt.Errorf("rules nest deeper than %d levels", maxDepth)}
	}
	var undecided error
	for i := range rules {
		ok, err := evalRule(&rules[i], doc, depth)
		if isRuleError(err) {
			return false, err
		}
		if err != nil {
			undecided = err
			continue
		}
		if !ok {
			return false, nil
		}
	}
	return undecided == nil, undecided
}

func evalAny(rules api.Rules, doc []byte, depth int) (bool, error) {
	if depth > maxDepth {
		return false, &ruleError{fmt.Errorf("rules nest deeper than %d levels", maxDepth)}
	}
	var undecided error
	for i := range rules {
		ok, err := evalRule(&rules[i], doc, depth)
		if isRuleError(err) {
			return false, err
		}
		if err != nil {
			undecided = err
			continue
		}
		if ok {
			return true, nil
		}
	}
	return false, undecided
}

func evalRule(r *api.Rule, doc []byte, depth int) (bool, error) {
	if err := ruleShape(r); err != nil {
		return false, &ruleError{err}
	}
	switch {
	case r.Key != "":
		v, found, err := lookup(r.Key, doc)
		if err != nil || !found {
			return false, err
		}
		return ValuesEqual(v, r.Value), nil
	case len(r.And) > 0:
		return evalRules(r.And, doc, depth+1)
	case len(r.Or) > 0:
		return evalAny(r.Or, doc, depth+1)
	default:
		if depth+1 > maxDepth {
			return false, &ruleError{fmt.Errorf("rules nest deeper than %d levels", maxDepth)}
		}
		ok, err := evalRule(r.Not, doc, depth+1)
		if err != nil {
			return false, err
		}
		return !ok, nil
	}
}

// ruleShape checks that r is a leaf {key, value} or exactly one of and/or/not.
func ruleShape(r *api.Rule) error {
	n := 0
	if len(r.And) > 0 {
		n++
	}
	if len(r.Or) > 0 {
		n++
	}
	if r.Not != nil {
		n++
	}
	switch {
	case r.Key != "" && n > 0:
		return errors.New("a rule has either key (with value) or one of and/or/not, not both")
	case r.Key == "" && n == 0:
		return errors.New("a rule needs key (with value) or one of and/or/not")
	case n > 1:
		return errors.New("a rule has exactly one of and/or/not")
	}
	return nil
}

// isLeaf reports whether rules is a single {key, value}, which gets the
// short messages.
func isLeaf(rules api.Rules) bool {
	return len(rules) == 1 && rules[0].Key != ""
}

// describeRules states what a list of rules requires, e.g.
// "value at path [a] == [1] and (value at path [b] == [2] or not (...))".
func describeRules(rules api.Rules, depth int) string {
	parts := make([]string, len(rules))
	for i := range rules {
		parts[i] = describeRule(&rules[i], depth)
	}
	return strings.Join(parts, " and ")
}

func describeRule(r *api.Rule, depth int) string {
	if depth > maxDepth {
		return "..."
	}
	switch {
	case r.Key != "":
		return fmt.Sprintf("value at path [%s] == [%s]", r.Key, show(r.Value))
	case len(r.And) > 0:
		return "(" + describeRules(r.And, depth+1) + ")"
	case len(r.Or) > 0:
		parts := make([]string, len(r.Or))
		for i := range r.Or {
			parts[i] = describeRule(&r.Or[i], depth+1)
		}
		return "(" + strings.Join(parts, " or ") + ")"
	case r.Not != nil:
		return "not (" + describeRule(r.Not, depth+1) + ")"
	}
	return "(empty rule)"
}

// observeRules says what the object holds at every key the rules read, once
// per key, in the order the rules name them.
func observeRules(rules api.Rules, doc []byte) string {
	var keys []string
	seen := map[string]bool{}
	var walk func(r *api.Rule, depth int)
	walk = func(r *api.Rule, depth int) {
		if depth > maxDepth {
			return
		}
		if r.Key != "" && !seen[r.Key] {
			seen[r.Key] = true
			keys = append(keys, r.Key)
		}
		for i := range r.And {
			walk(&r.And[i], depth+1)
		}
		for i := range r.Or {
			walk(&r.Or[i], depth+1)
		}
		if r.Not != nil {
			walk(r.Not, depth+1)
		}
	}
	for i := range rules {
		walk(&rules[i], 0)
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = observe(k, doc)
	}
	return strings.Join(parts, ", ")
}

// observe says what the object holds at one path.
func observe(expr string, doc []byte) string {
	v, found, err := lookup(expr, doc)
	switch {
	case err != nil:
		return err.Error()
	case !found:
		return fmt.Sprintf("path [%s] is missing", expr)
	}
	return fmt.Sprintf("value at path [%s] is [%s]", expr, show(v))
}
