package selector

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
)

// Owner is what selection looks at: its labels and its JSON document (the
// whole object as JSON bytes, marshalled once by the caller).
type Owner struct {
	Kind   string // api.KindWorkload or api.KindDeliverable
	Labels map[string]string
	Doc    []byte
}

// Selector is a compiled selector: compile once per chain version, evaluate
// many times. A nil *Selector is empty. It is safe for concurrent use.
type Selector struct {
	labels      labels.Selector // matchLabels + matchExpressions; nil when there are none
	fields      []fieldReq
	specificity int
}

type fieldReq struct {
	index  int
	key    string // as written
	path   *paths.Path
	op     string
	values []wantValue
}

// Term names the part of a selector a SelectorError or EvalError is about.
const (
	TermLabel      = "label"      // chain `selector`, option `matchLabels`
	TermExpression = "expression" // `selectorMatchExpressions`, `matchExpressions`
	TermField      = "field"      // `selectorMatchFields`, `matchFields`
)

// SelectorError reports a selector that cannot be compiled.
type SelectorError struct {
	Term  string // TermLabel, TermExpression or TermField
	Index int    // position in the expressions or fields list; -1 for labels
	Key   string // the label key or field key, as written
	Err   error
}

func (e *SelectorError) Error() string {
	if e.Term == TermLabel {
		return fmt.Sprintf("invalid selector label [%s]: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("invalid selector match %s [%d] with key [%s]: %v", e.Term, e.Index, e.Key, e.Err)
}

func (e *SelectorError) Unwrap() error { return e.Err }

// EvalError reports a field requirement that could not be evaluated on an
// owner (for instance a path that yields several values).
type EvalError struct {
	Index int    // position in the fields list
	Key   string // the field key, as written
	Err   error
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("selector match field [%d] with key [%s]: %v", e.Index, e.Key, e.Err)
}

func (e *EvalError) Unwrap() error { return e.Err }

// Compile compiles labels + expressions + fields. Field keys are paths on the
// owner, relative to it or prefixed with `workload.` / `deliverable.`.
// Errors are *SelectorError naming the term and its index.
func Compile(lbls map[string]string, exprs []metav1.LabelSelectorRequirement, fields []api.FieldRequirement) (*Selector, error) {
	s := &Selector{specificity: len(lbls) + len(exprs) + len(fields)}

	reqs := make([]labels.Requirement, 0, len(lbls)+len(exprs))
	// Sorted so that the first reported error does not depend on map order.
	keys := make([]string, 0, len(lbls))
	for k := range lbls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r, err := labels.NewRequirement(k, selection.Equals, []string{lbls[k]})
		if err != nil {
			return nil, &SelectorError{Term: TermLabel, Index: -1, Key: k, Err: err}
		}
		reqs = append(reqs, *r)
	}
	for i, e := range exprs {
		r, err := labelRequirement(e)
		if err != nil {
			return nil, &SelectorError{Term: TermExpression, Index: i, Key: e.Key, Err: err}
		}
		reqs = append(reqs, *r)
	}
	if len(reqs) > 0 {
		s.labels = labels.NewSelector().Add(reqs...)
	}

	for i, f := range fields {
		fr, err := compileField(i, f)
		if err != nil {
			return nil, &SelectorError{Term: TermField, Index: i, Key: f.Key, Err: err}
		}
		s.fields = append(s.fields, fr)
	}
	return s, nil
}

func labelRequirement(e metav1.LabelSelectorRequirement) (*labels.Requirement, error) {
	var op selection.Operator
	switch e.Operator {
	case metav1.LabelSelectorOpIn:
		op = selection.In
	case metav1.LabelSelectorOpNotIn:
		op = selection.NotIn
	case metav1.LabelSelectorOpExists:
		op = selection.Exists
	case metav1.LabelSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return nil, fmt.Errorf("operator %q is not one of In, NotIn, Exists, DoesNotExist", e.Operator)
	}
	// NewRequirement validates the key, the values and their count per operator.
	return labels.NewRequirement(e.Key, op, append([]string(nil), e.Values...))
}

func compileField(i int, f api.FieldRequirement) (fieldReq, error) {
	fr := fieldReq{index: i, key: f.Key, op: f.Operator}
	switch f.Operator {
	case api.OpIn, api.OpNotIn:
		if len(f.Values) == 0 {
			return fr, fmt.Errorf("operator %s needs at least one value", f.Operator)
		}
	case api.OpExists, api.OpDoesNotExist:
		if len(f.Values) != 0 {
			return fr, fmt.Errorf("operator %s takes no values, got %d", f.Operator, len(f.Values))
		}
	default:
		return fr, fmt.Errorf("operator %q is not one of In, NotIn, Exists, DoesNotExist", f.Operator)
	}
	expr, err := ownerPath(f.Key)
	if err != nil {
		return fr, err
	}
	p, err := paths.Compile(expr)
	if err != nil {
		return fr, err
	}
	fr.path = p
	for j, v := range f.Values {
		w, err := newWantValue(v)
		if err != nil {
			return fr, fmt.Errorf("value [%d]: %w", j, err)
		}
		fr.values = append(fr.values, w)
	}
	return fr, nil
}

// ownerPrefixes are the names the seed gives the owner in template context.
var ownerPrefixes = []string{"workload", "deliverable"}

// ownerPath turns a field key into a path relative to the owner document:
// it drops the wrappers paths also accepts ({…}, $, a leading dot) so that
// it can see and strip a `workload` / `deliverable` prefix.
func ownerPath(key string) (string, error) {
	k := strings.TrimSpace(key)
	if k == "" {
		return "", errors.New("key is empty; write a path on the owner such as spec.source.git.url")
	}
	if strings.HasPrefix(k, "{") && strings.HasSuffix(k, "}") {
		k = strings.TrimSpace(k[1 : len(k)-1])
	}
	k = strings.TrimPrefix(k, "$")
	k = strings.TrimPrefix(k, ".")
	for _, p := range ownerPrefixes {
		if k == p {
			return "", fmt.Errorf("key names the whole %s; write a path below it such as %s.spec.source", p, p)
		}
		if strings.HasPrefix(k, p) && (k[len(p)] == '.' || k[len(p)] == '[') {
			return k[len(p):], nil
		}
	}
	return k, nil
}

// Specificity is the number of terms: labels + expressions + fields.
func (s *Selector) Specificity() int {
	if s == nil {
		return 0
	}
	return s.specificity
}

// Empty reports whether the selector has no terms at all.
func (s *Selector) Empty() bool { return s.Specificity() == 0 }

// Matches evaluates the selector on the owner. An empty selector matches.
// A missing field path is a non-match except for DoesNotExist; NotIn on a
// missing path is a non-match too. An evaluation error is returned as an
// *EvalError, unless another term already makes the selector a non-match.
func (s *Selector) Matches(o Owner) (bool, error) {
	if s == nil {
		return true, nil
	}
	if s.labels != nil && !s.labels.Matches(labels.Set(o.Labels)) {
		return false, nil
	}
	var firstErr error
	for i := range s.fields {
		ok, err := s.fields[i].matches(o.Doc)
		if err != nil {
			if firstErr == nil {
				firstErr = &EvalError{Index: s.fields[i].index, Key: s.fields[i].key, Err: err}
			}
			continue
		}
		if !ok {
			return false, nil
		}
	}
	if firstErr != nil {
		return false, firstErr
	}
	return true, nil
}

func (f *fieldReq) matches(doc []byte) (bool, error) {
	switch f.op {
	case api.OpExists, api.OpDoesNotExist:
		found, err := f.path.Exists(doc)
		if err != nil {
			return false, err
		}
		return found == (f.op == api.OpExists), nil
	}
	v, err := f.path.Value(doc)
	if err != nil {
		if paths.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	in := false
	for _, w := range f.values {
		if w.matches(v) {
			in = true
			break
		}
	}
	return in == (f.op == api.OpIn), nil
}
