package health

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
)

func healthRule(hr *api.HealthRule, doc []byte) Result {
	switch {
	case hr.AlwaysHealthy != nil:
		return succeeded(ReasonAlwaysHealthy, "the template's health rule is alwaysHealthy")
	case hr.SingleConditionType != "":
		return singleConditionType(hr.SingleConditionType, doc)
	case hr.MultiMatch != nil:
		return multiMatch(hr.MultiMatch, doc)
	}
	// Validate rejects this before we get here.
	return unknown(ReasonInvalidRule, "healthRule: set one of alwaysHealthy, singleConditionType or multiMatch")
}

// condition is the part of a status condition health reads.
type condition struct {
	Status, Reason, Message string
}

var conditionsPath = paths.MustCompile("status.conditions")

// findCondition returns the first status condition of type t. It walks the
// list itself rather than building a filter path, so that any type name
// works without quoting.
func findCondition(doc []byte, t string) (condition, bool) {
	list, err := conditionsPath.Get(doc)
	if err != nil || !list.IsArray() {
		return condition{}, false
	}
	var c condition
	found := false
	list.ForEach(func(_, elem gjson.Result) bool {
		if !elem.IsObject() || elem.Get("type").String() != t {
			return true
		}
		c = condition{
			Status:  elem.Get("status").String(),
			Reason:  elem.Get("reason").String(),
			Message: elem.Get("message").String(),
		}
		found = true
		return false
	})
	return c, found
}

// describe says what the condition is, e.g.
// "condition [Ready] is [False] (reason [BuildFailed]): no space left".
func (c condition) describe(t string) string {
	s := fmt.Sprintf("condition [%s] is [%s]", t, c.Status)
	if c.Reason != "" {
		s += fmt.Sprintf(" (reason [%s])", c.Reason)
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}

// singleConditionType: the condition's status decides; Cartographer uses the
// same reason for all three outcomes.
func singleConditionType(t string, doc []byte) Result {
	reason := ConditionReason(t)
	c, ok := findCondition(doc, t)
	switch {
	case !ok:
		return unknown(reason, fmt.Sprintf("condition [%s] not found in status.conditions", t))
	case strings.EqualFold(c.Status, StatusTrue):
		return succeeded(reason, c.describe(t))
	case strings.EqualFold(c.Status, StatusFalse):
		return failed(reason, c.describe(t))
	}
	return unknown(reason, c.describe(t))
}

// matchSetEmpty reports whether a multiMatch side has no matchers.
func matchSetEmpty(m api.MatchSet) bool {
	return len(m.MatchConditions) == 0 && len(m.MatchFields) == 0
}

// check is the result of one matchCondition or matchField.
type check struct {
	held   bool
	err    error  // undecided (several values at a path) or a rule error
	reason string // ReasonMatchedCondition or ReasonMatchedField
	what   string // what holds, or what was expected and found
	// message is what the step's Healthy condition says when this matcher
	// decides, in Cartographer's words: the condition's status and message,
	// or the field's value and the value at messagePath.
	message string
}

// checkSet runs a side's matchConditions, then its matchFields.
func checkSet(m api.MatchSet, doc []byte) []check {
	out := make([]check, 0, len(m.MatchConditions)+len(m.MatchFields))
	for _, c := range m.MatchConditions {
		out = append(out, checkCondition(c, doc))
	}
	for _, f := range m.MatchFields {
		out = append(out, checkField(f, doc))
	}
	return out
}

func checkCondition(m api.ConditionMatch, doc []byte) check {
	res := check{reason: ReasonMatchedCondition}
	c, ok := findCondition(doc, m.Type)
	switch {
	case !ok:
		res.what = fmt.Sprintf("expected condition [%s] to be [%s], but it is not in status.conditions", m.Type, m.Status)
	case strings.EqualFold(c.Status, m.Status):
		res.held = true
		res.what = c.describe(m.Type)
		res.message = fmt.Sprintf("condition status: %s, message: %s", c.Status, c.Message)
	default:
		res.what = fmt.Sprintf("expected condition [%s] to be [%s], found %s", m.Type, m.Status, c.describe(m.Type))
	}
	return res
}

// checkField applies a field operator. As for label selectors, NotIn and
// DoesNotExist hold when the path is missing; In and Exists do not.
func checkField(f api.FieldRequirement, doc []byte) check {
	res := check{reason: ReasonMatchedField}
	req := fieldRequirement(f)
	p, err := compile(f.Key)
	if err != nil {
		res.err = fmt.Errorf("matchFields key [%s]: %w", f.Key, err)
		return res
	}
	switch f.Operator {
	case api.OpExists, api.OpDoesNotExist:
		exists, err := p.Exists(doc)
		if err != nil {
			res.err = fmt.Errorf("field %s: %w", req, err)
			return res
		}
		res.held = exists == (f.Operator == api.OpExists)
	case api.OpIn, api.OpNotIn:
		v, found, err := lookup(f.Key, doc)
		if err != nil {
			res.err = fmt.Errorf("field %s: %w", req, err)
			return res
		}
		in := false
		if found {
			for _, want := range f.Values {
				if ValuesEqual(v, want) {
					in = true
					break
				}
			}
		}
		res.held = in == (f.Operator == api.OpIn)
	default:
		res.err = &ruleError{fmt.Errorf("matchFields key [%s]: unknown operator [%s], expected In, NotIn, Exists or DoesNotExist", f.Key, f.Operator)}
		return res
	}
	if res.held {
		res.what = fmt.Sprintf("field %s holds: %s", req, observe(f.Key, doc))
		res.message = fieldMessage(f, doc)
	} else {
		res.what = fmt.Sprintf("expected field %s, found %s", req, observe(f.Key, doc))
	}
	return res
}

// fieldRequirement renders a matchField, e.g. "[status.phase] In [Failed, Error]".
func fieldRequirement(f api.FieldRequirement) string {
	switch f.Operator {
	case api.OpIn, api.OpNotIn:
		return fmt.Sprintf("[%s] %s [%s]", f.Key, f.Operator, showList(f.Values))
	}
	return fmt.Sprintf("[%s] %s", f.Key, f.Operator)
}

// fieldMessage is Cartographer's "field value: v, message: m", m being the
// value at messagePath. Without a messagePath only the value is given
// (Cartographer would print the whole object there).
func fieldMessage(f api.FieldRequirement, doc []byte) string {
	v, found, err := lookup(f.Key, doc)
	value := "<error retrieving field value>"
	if err == nil && found {
		value = show(v)
	}
	if f.MessagePath == "" {
		return "field value: " + value
	}
	msg := fmt.Sprintf("unknown, error retrieving message path [%s]", f.MessagePath)
	if m, found, err := lookup(f.MessagePath, doc); err == nil && found {
		msg = show(m)
	}
	return fmt.Sprintf("field value: %s, message: %s", value, msg)
}

// multiMatch: any unhealthy matcher that holds means Failed, said by that
// matcher; otherwise all healthy matchers holding means Succeeded, said by
// the first of them (conditions come before fields), as Cartographer does;
// otherwise Processing.
func multiMatch(mm *api.MultiMatch, doc []byte) Result {
	var undecided []string
	for _, c := range checkSet(mm.Unhealthy, doc) {
		switch {
		case isRuleError(c.err):
			return unknown(ReasonInvalidRule, "healthRule.multiMatch.unhealthy: "+c.err.Error())
		case c.err != nil:
			undecided = append(undecided, c.err.Error())
		case c.held:
			return failed(c.reason, c.message)
		}
	}
	healthy := checkSet(mm.Healthy, doc)
	var met, unmet []string
	for _, c := range healthy {
		switch {
		case isRuleError(c.err):
			return unknown(ReasonInvalidRule, "healthRule.multiMatch.healthy: "+c.err.Error())
		case c.err != nil:
			undecided = append(undecided, c.err.Error())
		case c.held:
			met = append(met, c.what)
		default:
			unmet = append(unmet, c.what)
		}
	}
	if len(healthy) > 0 && len(met) == len(healthy) && len(undecided) == 0 {
		return succeeded(healthy[0].reason, healthy[0].message)
	}
	msg := "no unhealthy matcher holds and not all healthy matchers hold"
	if len(unmet) > 0 {
		msg += ": " + join(unmet)
	}
	if len(undecided) > 0 {
		msg += "; cannot evaluate: " + join(undecided)
	}
	return unknown(ReasonNoMatchesFulfilled, msg)
}

func join(parts []string) string { return strings.Join(parts, "; ") }
