package runs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

func yamlObj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func foreignAt(name string, at time.Time) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetName(name)
	u.SetCreationTimestamp(metav1.NewTime(at))
	return u
}

func TestNewestForeign(t *testing.T) {
	a, b := foreignAt("a", t0), foreignAt("b", t0.Add(time.Second))
	same := foreignAt("c", t0.Add(time.Second))
	tests := []struct {
		name    string
		foreign []*unstructured.Unstructured
		ours    []Run
		want    string
	}{
		{"none", nil, nil, ""},
		{"the newest foreign run, when Kontinue has none", []*unstructured.Unstructured{b, a}, nil, "b"},
		{"within a second: by name, as runs are sorted", []*unstructured.Unstructured{b, same, a}, nil, "c"},
		{"a run of Kontinue's is newer: none may be the current one", []*unstructured.Unstructured{a, b}, []Run{{Name: "k", Created: t0.Add(2 * time.Second)}}, ""},
		{"Kontinue's run is older (Cartographer ran after it)", []*unstructured.Unstructured{a, b}, []Run{{Name: "k", Created: t0.Add(-time.Second)}}, "b"},
		{"the same second as Kontinue's: the foreign one may be", []*unstructured.Unstructured{b}, []Run{{Name: "k", Created: t0.Add(time.Second)}}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewestForeign(tt.foreign, tt.ours)
			if tt.want == "" {
				assert.Nil(t, got)
				return
			}
			if assert.NotNil(t, got) {
				assert.Equal(t, tt.want, got.GetName())
			}
		})
	}
}

// A Job as rendered, as the API server stores it (the dry run's answer:
// defaults, a selector from its own UID, a name generated) and as another
// controller created it for the same inputs (another name and UID).
const (
	renderedJob = `
apiVersion: batch/v1
kind: Job
metadata:
  generateName: w1-check-
  labels: {carto.run/workload-name: w1, carto.run/resource-name: check, kontinue.dev/stamped: "true"}
  annotations: {app-revision: a2, kontinue.dev/input-set: s1}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: check, image: checker, command: [make, check]}]
`
	storedJob = `
apiVersion: batch/v1
kind: Job
metadata:
  name: w1-check-dry42
  generateName: w1-check-
  uid: 11111111-dry
  labels: {carto.run/workload-name: w1, carto.run/resource-name: check, kontinue.dev/stamped: "true"}
  annotations: {app-revision: a2, kontinue.dev/input-set: s1}
spec:
  backoffLimit: 0
  completions: 1
  parallelism: 1
  selector: {matchLabels: {batch.kubernetes.io/controller-uid: 11111111-dry}}
  template:
    metadata:
      labels: {batch.kubernetes.io/controller-uid: 11111111-dry, batch.kubernetes.io/job-name: w1-check-dry42, job-name: w1-check-dry42}
    spec:
      restartPolicy: Never
      containers: [{name: check, image: checker, command: [make, check], imagePullPolicy: Always}]
`
	foreignJob = `
apiVersion: batch/v1
kind: Job
metadata:
  name: w1-check-abcde
  generateName: w1-check-
  uid: 22222222-carto
  labels: {carto.run/workload-name: w1, carto.run/resource-name: check}
  annotations: {app-revision: a2}
spec:
  backoffLimit: 0
  completions: 1
  parallelism: 1
  selector: {matchLabels: {batch.kubernetes.io/controller-uid: 22222222-carto}}
  template:
    metadata:
      labels: {batch.kubernetes.io/controller-uid: 22222222-carto, batch.kubernetes.io/job-name: w1-check-abcde, job-name: w1-check-abcde}
    spec:
      restartPolicy: Never
      containers: [{name: check, image: checker, command: [make, check], imagePullPolicy: Always}]
status: {succeeded: 1}
`
)

func TestSameInputs(t *testing.T) {
	edit := func(y string, f func(u *unstructured.Unstructured)) func(*testing.T) *unstructured.Unstructured {
		return func(t *testing.T) *unstructured.Unstructured {
			u := yamlObj(t, y)
			f(u)
			return u
		}
	}
	keep := func(*unstructured.Unstructured) {}
	tests := []struct {
		name                  string
		desired, stored, live func(*testing.T) *unstructured.Unstructured
		want                  bool
	}{
		{"the same inputs: its own name and UID aside, what the API server would store",
			edit(renderedJob, keep), edit(storedJob, keep), edit(foreignJob, keep), true},
		{"another input in an annotation",
			edit(renderedJob, keep), edit(storedJob, keep), edit(foreignJob, func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{"app-revision": "a1"})
			}), false},
		{"a rendered label missing",
			edit(renderedJob, keep), edit(storedJob, keep), edit(foreignJob, func(u *unstructured.Unstructured) {
				u.SetLabels(map[string]string{"carto.run/workload-name": "w1"})
			}), false},
		{"labels and annotations others added are no difference",
			edit(renderedJob, keep), edit(storedJob, keep), edit(foreignJob, func(u *unstructured.Unstructured) {
				u.SetLabels(map[string]string{"carto.run/workload-name": "w1", "carto.run/resource-name": "check", "other": "x"})
			}), true},
		{"a field the template no longer renders (a default would not hold its value)",
			edit(renderedJob, func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "backoffLimit") }),
			edit(storedJob, func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(6), "spec", "backoffLimit")
			}),
			edit(foreignJob, keep), false},
		{"a field the template renders now",
			edit(renderedJob, keep),
			edit(storedJob, func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(60), "spec", "ttlSecondsAfterFinished")
			}),
			edit(foreignJob, keep), false},
		{"numbers compare by value",
			edit(renderedJob, keep), edit(storedJob, keep), edit(foreignJob, func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, float64(1), "spec", "completions")
			}), true},
		{"another generateName",
			edit(renderedJob, keep), edit(storedJob, keep), edit(foreignJob, func(u *unstructured.Unstructured) { u.SetGenerateName("w2-check-") }), false},
		{"a fixed name: the same",
			edit(renderedJob, func(u *unstructured.Unstructured) { u.SetName("w1-check-abcde") }), edit(storedJob, keep), edit(foreignJob, keep), true},
		{"a fixed name: another",
			edit(renderedJob, func(u *unstructured.Unstructured) { u.SetName("w1-check") }), edit(storedJob, keep), edit(foreignJob, keep), false},
		{"another object's UID is no placeholder",
			edit(renderedJob, keep), edit(storedJob, keep), edit(foreignJob, func(u *unstructured.Unstructured) { u.SetUID(types.UID("33333333")) }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, SameInputs(tt.desired(t), tt.stored(t), tt.live(t)))
		})
	}
}
