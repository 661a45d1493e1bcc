package status

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPreview(t *testing.T) {
	p, d := Preview("https://example.com/repo.git")
	assert.Equal(t, "https://example.com/repo.git\n", p)
	assert.True(t, strings.HasPrefix(d, "sha256:"))
	assert.Len(t, d, len("sha256:")+64)

	p, _ = Preview(map[string]any{"b": 1, "a": []any{"x"}})
	assert.Equal(t, "a:\n    - x\nb: 1\n", p, "yaml.v3 layout, as Cartographer writes it")

	long := strings.Repeat("x", 3000)
	p, d1 := Preview(long)
	assert.Len(t, p, PreviewLimit, "cut at 1024 characters")
	_, d2 := Preview(long + "y")
	assert.NotEqual(t, d1, d2, "the digest covers the whole value, not the preview")
}

func TestOutputsKeepTransitionTimeUntilTheValueChanges(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(2000, 0))
	first, changed := Outputs(map[string]any{"url": "u", "revision": "r1"}, nil, t0)
	assert.Equal(t, []string{"url", "revision"}, changed)
	assert.Equal(t, "url", first[0].Name, "Cartographer's order: url before revision")

	second, changed := Outputs(map[string]any{"url": "u", "revision": "r2"}, first, t1)
	assert.Equal(t, []string{"revision"}, changed)
	assert.Equal(t, t0, second[0].LastTransitionTime, "same value: time kept")
	assert.Equal(t, t1, second[1].LastTransitionTime, "changed value: new time")
}

func TestOutputsOrder(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	out, _ := Outputs(map[string]any{"zeta": 1, "revision": "r", "alpha": 2, "url": "u", "image": "i"}, nil, now)
	var names []string
	for _, o := range out {
		names = append(names, o.Name)
	}
	assert.Equal(t, []string{"url", "revision", "image", "alpha", "zeta"}, names)
}

// The digests Cartographer v0.8.11 itself publishes for these values (its
// kuttl suite, supplychain/workload-status): a migration keeps them.
func TestPreviewDigestsMatchCartographer(t *testing.T) {
	_, d := Preview("three")
	assert.Equal(t, "sha256:f6936912184481f5edd4c304ce27c5a1a827804fc7f329f43d273b8621870776", d)

	dots := strings.Repeat(".", 100)
	value := map[string]any{
		"apiVersion": "example.com/v1alpha1",
		"kind":       "SomeService",
		"metadata":   map[string]any{"name": "service"},
		"data":       map[string]any{"player_initial_lives": "three", "player_loves": "hockey"},
		"spec": map[string]any{"template": map[string]any{
			"apiVersion": "v1",
			"kind":       "ConfigMap",
			"metadata":   map[string]any{"name": "example-second-configmap"},
			"data": map[string]any{
				"aa": "bar" + dots, "bb": "bar" + dots, "cc": "bar" + dots, "dd": "bar" + dots,
				"ee": "bar" + dots, "ff": "bar" + dots,
				"gg": "bar........................................................................you can see me now you cant",
			},
		}},
	}
	p, d := Preview(value)
	assert.Equal(t, "sha256:868a6f6b23762ce221f64bee95aacb0d431b6f0900bb2d23cce6f1f02224a56a", d)
	assert.True(t, strings.HasSuffix(p, "you can see me"), "cut at 1024 characters, where Cartographer cuts")
}

func TestMergeKeepsTransitionTimeOfUnchangedStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(2000, 0))
	prev := Merge([]metav1.Condition{Cond("A", True, "R", ""), Cond("B", False, "R", "")}, nil, 1, t0)
	got := Merge([]metav1.Condition{Cond("A", True, "R2", "m"), Cond("B", True, "R", "")}, prev, 2, t1)
	assert.Equal(t, t0, got[0].LastTransitionTime, "status unchanged (reason changed): time kept")
	assert.Equal(t, "R2", got[0].Reason)
	assert.Equal(t, t1, got[1].LastTransitionTime, "status changed: new time")
	assert.Equal(t, int64(2), got[1].ObservedGeneration)
}

func TestSummarize(t *testing.T) {
	cases := []struct {
		name string
		in   []metav1.Condition
		want metav1.ConditionStatus
		why  string
	}{
		{"all true", []metav1.Condition{Cond("A", True, "a", ""), Cond("B", True, "b", "")}, True, "Ready"},
		{"first false wins over earlier unknown", []metav1.Condition{Cond("A", Unknown, "u", ""), Cond("B", False, "f", "")}, False, "f"},
		{"first unknown", []metav1.Condition{Cond("A", True, "a", ""), Cond("B", Unknown, "u1", ""), Cond("C", Unknown, "u2", "")}, Unknown, "u1"},
		{"none", nil, True, "Ready"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Summarize("Ready", "Ready", c.in...)
			assert.Equal(t, c.want, got.Status)
			assert.Equal(t, c.why, got.Reason)
		})
	}
}

func TestKstatus(t *testing.T) {
	assert.Empty(t, Kstatus(Cond(Ready, True, "Ready", "")))
	assert.Equal(t, []metav1.Condition{Cond(Stalled, True, "TemplateStampFailure", "bad tag")},
		Kstatus(Cond(Ready, False, "TemplateStampFailure", "bad tag")))
	assert.Equal(t, []metav1.Condition{Cond(Reconciling, True, "MissingValueAtPath", "waiting")},
		Kstatus(Cond(Ready, Unknown, "MissingValueAtPath", "waiting")))
}

// Every field of a step's status is carried to the next reconcile except
// the ones it decides afresh: a field added later is kept by default.
func TestCarried(t *testing.T) {
	afresh := map[string]bool{"Inputs": true, "Conditions": true, "HeldInputDigest": true, "Verification": true}
	var prev Resource
	v := reflect.ValueOf(&prev).Elem()
	for i := 0; i < v.NumField(); i++ {
		fillNonZero(t, v.Field(i))
	}
	inputs := []Input{{Name: "chain's"}}
	got := prev.Carried(inputs)
	gv := reflect.ValueOf(got)
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		switch {
		case name == "Inputs":
			assert.Equal(t, inputs, got.Inputs)
		case afresh[name]:
			assert.True(t, gv.Field(i).IsZero(), "%s is decided afresh", name)
		default:
			assert.Equal(t, v.Field(i).Interface(), gv.Field(i).Interface(), "%s is carried", name)
		}
	}
}

// fillNonZero gives f a value that is not its zero value.
func fillNonZero(t *testing.T, f reflect.Value) {
	switch f.Kind() {
	case reflect.String:
		f.SetString("x")
	case reflect.Ptr:
		f.Set(reflect.New(f.Type().Elem()))
	case reflect.Slice:
		f.Set(reflect.MakeSlice(f.Type(), 1, 1))
	case reflect.Map:
		f.Set(reflect.MakeMap(f.Type()))
		f.SetMapIndex(reflect.New(f.Type().Key()).Elem(), reflect.New(f.Type().Elem()).Elem())
	default:
		t.Fatalf("no non-zero value for a %s", f.Kind())
	}
}

// An output's whole string value: from its preview, else from the kept
// outputValues; none from a cut preview or a value that is not a string.
func TestOutputString(t *testing.T) {
	now := metav1.Now()
	r := Resource{OutputValues: map[string]any{"kept": "k", "long": strings.Repeat("x", PreviewLimit+10)}}
	r.Outputs, _ = Outputs(map[string]any{"revision": "abc123", "config": map[string]any{"a": 1},
		"long": strings.Repeat("x", PreviewLimit+10)}, nil, now)
	for name, want := range map[string]string{"revision": "abc123", "kept": "k", "long": strings.Repeat("x", PreviewLimit+10), "config": "", "none": ""} {
		got, ok := r.OutputString(name)
		assert.Equal(t, want, got, name)
		assert.Equal(t, want != "", ok, name)
	}
}
