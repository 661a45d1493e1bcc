package selector

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/paths"
	"kontinue.dev/kontinue/reconciler/api"
)

const workloadDoc = `{
  "apiVersion": "carto.run/v1alpha1", "kind": "Workload",
  "metadata": {"name": "web", "labels": {"app": "web", "app.kubernetes.io/part-of": "shop"}},
  "spec": {
    "source": {"git": {"url": "https://example.com/x.git", "ref": {"branch": "main"}}},
    "replicas": 3, "ratio": 2.5, "big": 1e21, "enabled": true, "flag": "true", "count": "3",
    "nothing": null, "empty": "",
    "obj": {"a": 1, "b": [1, "x"]}, "list": [1, 2],
    "params": [{"name": "a", "value": "x"}, {"name": "a", "value": "y"}, {"name": "b", "value": 1}]
  }
}`

var workload = Owner{
	Kind:   api.KindWorkload,
	Labels: map[string]string{"app": "web", "app.kubernetes.io/part-of": "shop"},
	Doc:    []byte(workloadDoc),
}

func field(key, op string, values ...any) api.FieldRequirement {
	return api.FieldRequirement{Key: key, Operator: op, Values: values}
}

func TestFieldOperators(t *testing.T) {
	tests := []struct {
		name    string
		req     api.FieldRequirement
		want    bool
		wantErr bool
	}{
		// Exists / DoesNotExist
		{"exists present object", field("spec.source.git", api.OpExists), true, false},
		{"exists present string", field("spec.source.git.url", api.OpExists), true, false},
		{"exists missing", field("spec.source.image", api.OpExists), false, false},
		{"exists null counts as present", field("spec.nothing", api.OpExists), true, false},
		{"exists empty string", field("spec.empty", api.OpExists), true, false},
		{"exists bool", field("spec.enabled", api.OpExists), true, false},
		{"exists number", field("spec.replicas", api.OpExists), true, false},
		{"exists several values is fine", field(`spec.params[?(@.name=="a")]`, api.OpExists), true, false},
		{"exists filter none", field(`spec.params[?(@.name=="zz")]`, api.OpExists), false, false},
		{"does not exist missing", field("spec.source.image", api.OpDoesNotExist), true, false},
		{"does not exist missing parent", field("spec.nope.deeper", api.OpDoesNotExist), true, false},
		{"does not exist present", field("spec.source.git", api.OpDoesNotExist), false, false},
		{"does not exist null", field("spec.nothing", api.OpDoesNotExist), false, false},
		{"does not exist several values", field(`spec.params[?(@.name=="a")]`, api.OpDoesNotExist), false, false},

		// In: strings
		{"in string", field("spec.source.git.ref.branch", api.OpIn, "dev", "main"), true, false},
		{"in string no", field("spec.source.git.ref.branch", api.OpIn, "dev"), false, false},
		{"in string case sensitive", field("spec.source.git.ref.branch", api.OpIn, "Main"), false, false},
		{"in missing", field("spec.source.git.ref.tag", api.OpIn, "v1"), false, false},
		{"in empty string", field("spec.empty", api.OpIn, ""), true, false},
		// In: numbers
		{"in int as float64", field("spec.replicas", api.OpIn, float64(3)), true, false},
		{"in int as int", field("spec.replicas", api.OpIn, 3), true, false},
		{"in int as int64", field("spec.replicas", api.OpIn, int64(3)), true, false},
		{"in int other", field("spec.replicas", api.OpIn, 4, 5), false, false},
		{"in int as string", field("spec.replicas", api.OpIn, "3"), true, false},
		{"in int as non canonical string", field("spec.replicas", api.OpIn, "3.0"), false, false},
		{"in float", field("spec.ratio", api.OpIn, 2.5), true, false},
		{"in float as string", field("spec.ratio", api.OpIn, "2.5"), true, false},
		{"in big float as string", field("spec.big", api.OpIn, "1e+21"), true, false},
		{"in float not int", field("spec.ratio", api.OpIn, 2), false, false},
		{"in string field with number value", field("spec.count", api.OpIn, 3), true, false},
		{"in string field with float value", field("spec.count", api.OpIn, 3.0), true, false},
		{"in string field with other number", field("spec.count", api.OpIn, 4), false, false},
		// In: bools
		{"in bool", field("spec.enabled", api.OpIn, true), true, false},
		{"in bool false", field("spec.enabled", api.OpIn, false), false, false},
		{"in bool as string", field("spec.enabled", api.OpIn, "true"), true, false},
		{"in bool as capitalised string", field("spec.enabled", api.OpIn, "True"), false, false},
		{"in string field with bool value", field("spec.flag", api.OpIn, true), true, false},
		{"in bool vs number", field("spec.enabled", api.OpIn, 1), false, false},
		// In: null
		{"in null", field("spec.nothing", api.OpIn, nil), true, false},
		{"in null vs string", field("spec.nothing", api.OpIn, "null"), false, false},
		{"in null vs empty", field("spec.nothing", api.OpIn, ""), false, false},
		{"in string vs null", field("spec.empty", api.OpIn, nil), false, false},
		// In: objects and lists
		{"in object", field("spec.obj", api.OpIn, map[string]any{"b": []any{1.0, "x"}, "a": 1}), true, false},
		{"in object differs", field("spec.obj", api.OpIn, map[string]any{"a": 1}), false, false},
		{"in object nested loose does not apply", field("spec.obj", api.OpIn, map[string]any{"a": "1", "b": []any{1, "x"}}), false, false},
		{"in list", field("spec.list", api.OpIn, []any{1, 2}), true, false},
		{"in list order matters", field("spec.list", api.OpIn, []any{2, 1}), false, false},
		{"in object vs string", field("spec.obj", api.OpIn, `{"a":1}`), false, false},
		// In: paths
		{"in filter single", field(`spec.params[?(@.name=="b")].value`, api.OpIn, 1), true, false},
		{"in filter several is an error", field(`spec.params[?(@.name=="a")].value`, api.OpIn, "x"), false, true},
		{"in bracket key", field(`metadata.labels['app.kubernetes.io/part-of']`, api.OpIn, "shop"), true, false},

		// NotIn
		{"notin string", field("spec.source.git.ref.branch", api.OpNotIn, "dev"), true, false},
		{"notin string listed", field("spec.source.git.ref.branch", api.OpNotIn, "dev", "main"), false, false},
		{"notin missing is a non-match", field("spec.source.git.ref.tag", api.OpNotIn, "v1"), false, false},
		{"notin number", field("spec.replicas", api.OpNotIn, 1), true, false},
		{"notin number as string", field("spec.replicas", api.OpNotIn, "3"), false, false},
		{"notin bool", field("spec.enabled", api.OpNotIn, false), true, false},
		{"notin bool listed", field("spec.enabled", api.OpNotIn, true), false, false},
		{"notin null", field("spec.nothing", api.OpNotIn, "x"), true, false},
		{"notin null listed", field("spec.nothing", api.OpNotIn, nil), false, false},
		{"notin object", field("spec.obj", api.OpNotIn, map[string]any{"a": 2}), true, false},
		{"notin several is an error", field(`spec.params[?(@.name=="a")].value`, api.OpNotIn, "z"), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile(nil, nil, []api.FieldRequirement{tt.req})
			require.NoError(t, err)
			got, err := s.Matches(workload)
			if tt.wantErr {
				var ee *EvalError
				require.ErrorAs(t, err, &ee)
				assert.Equal(t, 0, ee.Index)
				assert.Equal(t, tt.req.Key, ee.Key)
				var amb *paths.AmbiguousError
				assert.ErrorAs(t, err, &amb)
				assert.Contains(t, err.Error(), tt.req.Key)
				assert.False(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestKeySpellings(t *testing.T) {
	deliverable := Owner{Kind: api.KindDeliverable, Labels: workload.Labels, Doc: workload.Doc}
	keys := []string{
		"spec.source.git.url",
		".spec.source.git.url",
		"workload.spec.source.git.url",
		".workload.spec.source.git.url",
		"deliverable.spec.source.git.url",
		"$.spec.source.git.url",
		"{.workload.spec.source.git.url}",
		"workload['spec'].source.git.url",
		" workload.spec.source.git.url ",
	}
	for _, key := range keys {
		for _, o := range []Owner{workload, deliverable} {
			t.Run(o.Kind+" "+key, func(t *testing.T) {
				s, err := Compile(nil, nil, []api.FieldRequirement{field(key, api.OpIn, "https://example.com/x.git")})
				require.NoError(t, err)
				ok, err := s.Matches(o)
				require.NoError(t, err)
				assert.True(t, ok)
			})
		}
	}

	// A prefix is only stripped when it is a whole path segment.
	doc := Owner{Doc: []byte(`{"workloadName": "a", "workload": {"x": 1}, "spec": {"x": 2}}`)}
	for key, want := range map[string]any{"workloadName": "a", "workload.spec.x": 2, "spec.x": 2} {
		s, err := Compile(nil, nil, []api.FieldRequirement{field(key, api.OpIn, want)})
		require.NoError(t, err, key)
		ok, err := s.Matches(doc)
		require.NoError(t, err, key)
		assert.True(t, ok, key)
	}
}

func TestLabelsAndExpressions(t *testing.T) {
	exp := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	tests := []struct {
		name   string
		labels map[string]string
		exprs  []metav1.LabelSelectorRequirement
		fields []api.FieldRequirement
		want   bool
	}{
		{"label matches", map[string]string{"app": "web"}, nil, nil, true},
		{"all labels match", map[string]string{"app": "web", "app.kubernetes.io/part-of": "shop"}, nil, nil, true},
		{"one label differs", map[string]string{"app": "web", "tier": "db"}, nil, nil, false},
		{"label value differs", map[string]string{"app": "api"}, nil, nil, false},
		{"expr in", nil, []metav1.LabelSelectorRequirement{exp("app", metav1.LabelSelectorOpIn, "api", "web")}, nil, true},
		{"expr in no", nil, []metav1.LabelSelectorRequirement{exp("app", metav1.LabelSelectorOpIn, "api")}, nil, false},
		{"expr notin", nil, []metav1.LabelSelectorRequirement{exp("app", metav1.LabelSelectorOpNotIn, "api")}, nil, true},
		// Kubernetes label semantics: NotIn holds on an absent label (unlike fields).
		{"expr notin absent label", nil, []metav1.LabelSelectorRequirement{exp("tier", metav1.LabelSelectorOpNotIn, "db")}, nil, true},
		{"expr exists", nil, []metav1.LabelSelectorRequirement{exp("app", metav1.LabelSelectorOpExists)}, nil, true},
		{"expr exists absent", nil, []metav1.LabelSelectorRequirement{exp("tier", metav1.LabelSelectorOpExists)}, nil, false},
		{"expr does not exist", nil, []metav1.LabelSelectorRequirement{exp("tier", metav1.LabelSelectorOpDoesNotExist)}, nil, true},
		{"expr does not exist present", nil, []metav1.LabelSelectorRequirement{exp("app", metav1.LabelSelectorOpDoesNotExist)}, nil, false},
		{"labels and fields", map[string]string{"app": "web"}, nil, []api.FieldRequirement{field("spec.source.git", api.OpExists)}, true},
		{"labels match fields do not", map[string]string{"app": "web"}, nil, []api.FieldRequirement{field("spec.source.image", api.OpExists)}, false},
		{"fields match labels do not", map[string]string{"app": "api"}, nil, []api.FieldRequirement{field("spec.source.git", api.OpExists)}, false},
		{"everything", map[string]string{"app": "web"},
			[]metav1.LabelSelectorRequirement{exp("app.kubernetes.io/part-of", metav1.LabelSelectorOpIn, "shop")},
			[]api.FieldRequirement{field("spec.replicas", api.OpIn, "3"), field("spec.source.image", api.OpDoesNotExist)}, true},
		{"empty selector matches", nil, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile(tt.labels, tt.exprs, tt.fields)
			require.NoError(t, err)
			assert.Equal(t, len(tt.labels)+len(tt.exprs)+len(tt.fields), s.Specificity())
			assert.Equal(t, s.Specificity() == 0, s.Empty())
			got, err := s.Matches(workload)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestLabelsOnOwnerWithoutLabels(t *testing.T) {
	s, err := Compile(map[string]string{"app": "web"}, nil, nil)
	require.NoError(t, err)
	ok, err := s.Matches(Owner{Doc: workload.Doc})
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestMatchesErrorPrecedence(t *testing.T) {
	ambiguous := field(`spec.params[?(@.name=="a")].value`, api.OpIn, "x")

	// A failing term is not reported when labels already rule the owner out...
	s, err := Compile(map[string]string{"app": "api"}, nil, []api.FieldRequirement{ambiguous})
	require.NoError(t, err)
	ok, err := s.Matches(workload)
	require.NoError(t, err)
	assert.False(t, ok)

	// ...or when another field does not match, whatever the order.
	for _, fields := range [][]api.FieldRequirement{
		{ambiguous, field("spec.source.image", api.OpExists)},
		{field("spec.source.image", api.OpExists), ambiguous},
	} {
		s, err := Compile(nil, nil, fields)
		require.NoError(t, err)
		ok, err := s.Matches(workload)
		require.NoError(t, err)
		assert.False(t, ok)
	}

	// Otherwise it is, with its index.
	s, err = Compile(nil, nil, []api.FieldRequirement{field("spec.source.git", api.OpExists), ambiguous})
	require.NoError(t, err)
	_, err = s.Matches(workload)
	var ee *EvalError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.Index)
	assert.Equal(t, ambiguous.Key, ee.Key)
}

func TestNilSelector(t *testing.T) {
	var s *Selector
	assert.True(t, s.Empty())
	assert.Equal(t, 0, s.Specificity())
	ok, err := s.Matches(workload)
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		exprs  []metav1.LabelSelectorRequirement
		fields []api.FieldRequirement
		term   string
		index  int
		key    string
		msg    string
	}{
		{"bad field operator", nil, nil, []api.FieldRequirement{field("spec.x", api.OpExists), field("spec.y", "Equals", "a")},
			TermField, 1, "spec.y", `operator "Equals" is not one of In, NotIn, Exists, DoesNotExist`},
		{"lowercase operator", nil, nil, []api.FieldRequirement{field("spec.x", "exists")}, TermField, 0, "spec.x", "not one of"},
		{"in without values", nil, nil, []api.FieldRequirement{field("spec.x", api.OpIn)}, TermField, 0, "spec.x", "needs at least one value"},
		{"notin without values", nil, nil, []api.FieldRequirement{field("spec.x", api.OpNotIn)}, TermField, 0, "spec.x", "needs at least one value"},
		{"exists with values", nil, nil, []api.FieldRequirement{field("spec.x", api.OpExists, "a")}, TermField, 0, "spec.x", "takes no values"},
		{"does not exist with values", nil, nil, []api.FieldRequirement{field("spec.x", api.OpDoesNotExist, 1)}, TermField, 0, "spec.x", "takes no values"},
		{"empty key", nil, nil, []api.FieldRequirement{field("", api.OpExists)}, TermField, 0, "", "key is empty"},
		{"whole owner", nil, nil, []api.FieldRequirement{field("workload", api.OpExists)}, TermField, 0, "workload", "whole workload"},
		{"bad path", nil, nil, []api.FieldRequirement{field("spec.[x", api.OpExists)}, TermField, 0, "spec.[x", "invalid path"},
		{"unbalanced bracket", nil, nil, []api.FieldRequirement{field("workload.spec[0", api.OpExists)}, TermField, 0, "workload.spec[0", "invalid path"},
		{"value not JSON", nil, nil, []api.FieldRequirement{field("spec.x", api.OpIn, "a", make(chan int))}, TermField, 0, "spec.x", "value [1]: not a JSON value"},
		{"bad expression operator", nil, []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"a"}}}, nil,
			TermExpression, 0, "app", `operator "Equals"`},
		{"expression in without values", nil, []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpExists},
			{Key: "tier", Operator: metav1.LabelSelectorOpIn}}, nil,
			TermExpression, 1, "tier", "values"},
		{"expression exists with values", nil, []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists, Values: []string{"a"}}}, nil,
			TermExpression, 0, "app", "values"},
		{"expression bad key", nil, []metav1.LabelSelectorRequirement{{Key: "bad key!", Operator: metav1.LabelSelectorOpExists}}, nil,
			TermExpression, 0, "bad key!", "name part"},
		{"bad label key", map[string]string{"ok": "a", "bad key": "b"}, nil, nil, TermLabel, -1, "bad key", "name part"},
		{"bad label value", map[string]string{"app": "no spaces allowed"}, nil, nil, TermLabel, -1, "app", "valid label"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile(tt.labels, tt.exprs, tt.fields)
			assert.Nil(t, s)
			var se *SelectorError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.term, se.Term)
			assert.Equal(t, tt.index, se.Index)
			assert.Equal(t, tt.key, se.Key)
			assert.Contains(t, err.Error(), tt.msg)
			assert.Contains(t, err.Error(), tt.key)
		})
	}

	// The syntax error of paths is kept.
	_, err := Compile(nil, nil, []api.FieldRequirement{field("spec.[x", api.OpExists)})
	var syn *paths.SyntaxError
	assert.True(t, errors.As(err, &syn))
}
