package stamp

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/failure"
)

// The bound: the first write of a content and FightRepairs repairs within
// FightWindow pass; the next repair is due for a look. What is not a
// repair (an apply that changed nothing, new content, another object, the
// window passing) never counts.
func TestFightsBound(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func(d time.Duration) { at = at.Add(d) }
	type step struct {
		what   string
		uid    types.UID
		digest string
		before string        // the version the write was made over ("": another)
		rv     string        // the version the write made ("": only check)
		after  time.Duration // the clock moves first
		due    bool          // check before it: one repair too many
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a fight: due after FightRepairs repairs", []step{
			{what: "first write", uid: "u", digest: "a", rv: "1"},
			{what: "repair 1", uid: "u", digest: "a", rv: "3", after: time.Second},
			{what: "repair 2", uid: "u", digest: "a", rv: "5", after: time.Second},
			{what: "repair 3", uid: "u", digest: "a", rv: "7", after: time.Second},
			{what: "repair 4", uid: "u", digest: "a", rv: "9", after: time.Second},
			{what: "repair 5", uid: "u", digest: "a", rv: "11", after: time.Second},
			{what: "repair 6: due", uid: "u", digest: "a", after: time.Second, due: true},
			{what: "other content: not due", uid: "u", digest: "b"},
			{what: "other object: not due", uid: "v", digest: "a"},
		}},
		{"applies that change nothing (a cache behind) are no repairs", []step{
			{what: "first write", uid: "u", digest: "a", rv: "1"},
			{uid: "u", digest: "a", rv: "1"}, {uid: "u", digest: "a", rv: "1"}, {uid: "u", digest: "a", rv: "1"},
			{uid: "u", digest: "a", rv: "1"}, {uid: "u", digest: "a", rv: "1"}, {uid: "u", digest: "a", rv: "1"},
			{what: "not due", uid: "u", digest: "a"},
		}},
		{"applies that change nothing over a newer version (its status moved) are no repairs", []step{
			{what: "first write", uid: "u", digest: "a", rv: "1"},
			{uid: "u", digest: "a", before: "2", rv: "2"}, {uid: "u", digest: "a", before: "3", rv: "3"}, {uid: "u", digest: "a", before: "4", rv: "4"},
			{uid: "u", digest: "a", before: "5", rv: "5"}, {uid: "u", digest: "a", before: "6", rv: "6"}, {uid: "u", digest: "a", before: "7", rv: "7"},
			{what: "not due", uid: "u", digest: "a"},
		}},
		{"new content starts again (a template change, new inputs)", []step{
			{what: "first write", uid: "u", digest: "a", rv: "1"},
			{uid: "u", digest: "a", rv: "2"}, {uid: "u", digest: "a", rv: "3"}, {uid: "u", digest: "a", rv: "4"},
			{uid: "u", digest: "a", rv: "5"}, {uid: "u", digest: "a", rv: "6"},
			{what: "new content", uid: "u", digest: "b", rv: "7"},
			{uid: "u", digest: "b", rv: "8"},
			{what: "not due", uid: "u", digest: "b"},
			{what: "the old content is forgotten", uid: "u", digest: "a"},
		}},
		{"repairs spread over more than the window are no fight (a person's edits now and then)", []step{
			{what: "first write", uid: "u", digest: "a", rv: "1"},
			{uid: "u", digest: "a", rv: "2", after: 3 * time.Minute}, {uid: "u", digest: "a", rv: "3", after: 3 * time.Minute},
			{uid: "u", digest: "a", rv: "4", after: 3 * time.Minute}, {uid: "u", digest: "a", rv: "5", after: 3 * time.Minute},
			{what: "the window starts again", uid: "u", digest: "a", rv: "6", after: 3 * time.Minute},
			{what: "not due", uid: "u", digest: "a"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFights()
			f.now = func() time.Time { return at }
			for i, s := range tt.steps {
				clock(s.after)
				fight, due := f.check(s.uid, s.digest)
				assert.Nil(t, fight, "step %d %s", i, s.what)
				assert.Equal(t, s.due, due, "step %d %s", i, s.what)
				if s.rv != "" {
					before := s.before
					if before == "" {
						before = "other"
					}
					f.wrote(s.uid, s.digest, before, s.rv)
				}
			}
		})
	}
}

// Once found, a fight refuses every write of that content to that object
// for FightWindow, is counted once, and then the count starts again.
func TestFightsHold(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f := NewFights()
	f.now = func() time.Time { return at }
	declared := 0
	f.Declared = func() { declared++ }
	f.wrote("u", "a", "0", "1")
	for i := 2; i <= 1+FightRepairs; i++ {
		at = at.Add(time.Second)
		f.wrote("u", "a", "x", string(rune('0'+i)))
	}
	_, due := f.check("u", "a")
	require.True(t, due)
	f.forgive("u", "b")
	_, due = f.check("u", "a")
	require.True(t, due, "forgiving other content forgives nothing")
	fight := f.declare("u", "a", foughtCM("rival"), "data.key", "rival")
	assert.Equal(t, 1, declared)
	assert.True(t, fight.declared)
	assert.Equal(t, FightRepairs, fight.Repairs)
	assert.Equal(t, at.Add(FightWindow), fight.Until)

	at = at.Add(FightWindow - time.Second)
	again, due := f.check("u", "a")
	require.NotNil(t, again, "held")
	assert.False(t, due)
	assert.False(t, again.declared, "found before: no second event")
	assert.Equal(t, 1, declared)
	other, _ := f.check("u", "b")
	assert.Nil(t, other, "new content is written")

	at = at.Add(2 * time.Second)
	after, due := f.check("u", "a")
	assert.Nil(t, after, "the hold is over")
	assert.False(t, due, "and the count starts again")
	assert.Equal(t, 0, f.Len())

	// Repairs that were no fight (every field that differs is Kontinue's
	// own) are forgiven: the count starts again.
	f.wrote("u", "a", "10", "11")
	for i := 0; i < FightRepairs; i++ {
		f.wrote("u", "a", "x", fmt.Sprint(12+i))
	}
	_, due = f.check("u", "a")
	require.True(t, due)
	f.forgive("u", "a")
	_, due = f.check("u", "a")
	assert.False(t, due)

	f.wrote("u", "a", "19", "20")
	f.Forget("u")
	assert.Equal(t, 0, f.Len())
}

func foughtCM(value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "app", "namespace": "ns"}, "data": map[string]any{"key": value}}}
}

func TestFightError(t *testing.T) {
	fight := &Fight{Object: "ConfigMap ns/app", Field: "data.key", Manager: "rival", Repairs: 5, Within: 3 * time.Second,
		Until: time.Date(2026, 1, 1, 12, 10, 0, 0, time.UTC), declared: true}
	err := error(&failure.Error{Class: failure.Contested, Err: fight})
	assert.Equal(t, failure.Contested, failure.Classify(err))
	got, ok := Declared(err)
	require.True(t, ok)
	assert.Same(t, fight, got)
	assert.Equal(t, "Kontinue stopped writing ConfigMap ns/app: manager [rival] sets field [data.key] back after each write (6 writes of the same content in 3s); "+
		"Kontinue does not fight another controller over a field: leave the field to one of them (drop it from the template, or stop the other writer). "+
		"Kontinue writes it again when what it renders changes, or after 2026-01-01T12:10:00Z", err.Error())
	_, ok = Declared(errors.New("other"))
	assert.False(t, ok)
}

// The field and the manager that set it back, from managedFields: a map
// field, a keyed list item (containers by name), an atomic list, an
// annotation with dots in its key, and a removed field (no owner: the
// other manager that wrote last).
func TestContested(t *testing.T) {
	entry := func(manager, op string, at int, fields string) metav1.ManagedFieldsEntry {
		ts := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, at, 0, time.UTC))
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), Time: &ts,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	deployment := func(image, revision string, args []any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "app", "namespace": "ns", "annotations": map[string]any{"deployment.kubernetes.io/revision": revision}},
			"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "side", "image": "side:1"},
				map[string]any{"name": "app", "image": image, "args": args},
			}}}}}}
		return u
	}
	kontinue := entry(FieldManager, "Apply", 0, `{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:name":{}}}}}}}`)
	tests := []struct {
		name           string
		desired, live  *unstructured.Unstructured
		entries        []metav1.ManagedFieldsEntry
		field, manager string
		fight          bool
	}{
		{"an annotation another controller sets",
			deployment("app:1", "3", []any{"a"}), deployment("app:1", "1", []any{"a"}),
			[]metav1.ManagedFieldsEntry{kontinue, entry("kube-controller-manager", "Update", 5, `{"f:metadata":{"f:annotations":{".":{},"f:deployment.kubernetes.io/revision":{}}}}`)},
			`metadata.annotations["deployment.kubernetes.io/revision"]`, "kube-controller-manager", true},
		{"a field of a keyed list item",
			deployment("app:1", "1", []any{"a"}), deployment("app:2", "1", []any{"a"}),
			[]metav1.ManagedFieldsEntry{kontinue, entry("sidecar-injector", "Update", 3, `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:image":{}}}}}}}`),
				entry("other", "Update", 9, `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"side\"}":{"f:image":{}}}}}}}`)},
			"spec.template.spec.containers[1].image", "sidecar-injector", true},
		{"an atomic list owned whole",
			deployment("app:1", "1", []any{"a"}), deployment("app:1", "1", []any{"b"}),
			[]metav1.ManagedFieldsEntry{kontinue, entry("argsetter", "Update", 3, `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:args":{}}}}}}}`)},
			"spec.template.spec.containers[1].args[0]", "argsetter", true},
		{"a removed field: the other writer that wrote last",
			foughtCM("kontinue"), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app"}}},
			[]metav1.ManagedFieldsEntry{entry("early", "Update", 1, `{"f:metadata":{}}`), entry("remover", "Update", 4, `{"f:metadata":{"f:labels":{}}}`)},
			"data", "remover", true},
		{"only Kontinue's own fields differ (the API server keeps a value otherwise): no fight",
			deployment("app:1", "1", []any{"a"}), deployment("app:1", "1", []any{"b"}),
			[]metav1.ManagedFieldsEntry{entry(FieldManager, "Apply", 0, `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:args":{}}}}}}}`),
				entry("kube-controller-manager", "Update", 5, `{"f:metadata":{"f:annotations":{"f:deployment.kubernetes.io/revision":{}}}}`)},
			"", "", false},
		{"a field others own is named, not the first that differs",
			deployment("app:1", "3", []any{"a"}), deployment("app:1", "1", []any{"b"}),
			[]metav1.ManagedFieldsEntry{entry(FieldManager, "Apply", 0, `{"f:metadata":{"f:annotations":{"f:deployment.kubernetes.io/revision":{}}}}`),
				entry("argsetter", "Update", 5, `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:args":{}}}}}}}`)},
			"spec.template.spec.containers[1].args[0]", "argsetter", true},
		{"nothing differs", foughtCM("same"), foughtCM("same"), nil, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.live.SetManagedFields(tt.entries)
			field, manager, fight := contested(tt.desired, tt.live)
			assert.Equal(t, tt.fight, fight)
			assert.Equal(t, tt.field, field)
			assert.Equal(t, tt.manager, manager)
		})
	}
}
