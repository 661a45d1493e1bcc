package stamp

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"kontinue.dev/kontinue/reconciler/failure"
)

func configMap(data map[string]any, createdByKontinue bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "app", "namespace": "ns"}, "data": data}}
	// What Kontinue applies carries its input set: a template that drops a
	// field changes it.
	u.SetAnnotations(map[string]string{"kontinue.dev/applied-digest": fmt.Sprint(len(data))})
	if createdByKontinue {
		u.Object["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": FieldManager, "operation": "Update"}}
	}
	return u
}

// The create's fields go to the apply only when the apply would leave one
// out of an object Kontinue created: otherwise the apply alone is right,
// and a hand-over would cost a read and a patch for nothing.
func TestHandOver(t *testing.T) {
	tests := []struct {
		name          string
		desired, live map[string]any
		created       bool // by Kontinue: its fields sit in an Update entry
		sameInputs    bool // live carries desired's input set
		want          bool
	}{
		{"a field dropped from an object Kontinue created", map[string]any{"a": "1"}, map[string]any{"a": "1", "b": "2"}, true, false, true},
		{"a field dropped, the object was applied only", map[string]any{"a": "1"}, map[string]any{"a": "1", "b": "2"}, false, false, false},
		{"a field set: the apply takes it", map[string]any{"a": "1", "b": "2"}, map[string]any{"a": "1"}, true, false, false},
		{"up to date", map[string]any{"a": "1"}, map[string]any{"a": "1"}, true, true, false},
		{"up to date, a field someone else added", map[string]any{"a": "1"}, map[string]any{"a": "1", "b": "2"}, true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired, live := configMap(tt.desired, false), configMap(tt.live, tt.created)
			if tt.sameInputs {
				live.SetAnnotations(desired.GetAnnotations())
			}
			assert.Equal(t, tt.want, HandOver(desired, live))
		})
	}
}

// Put refuses an object its owner did not stamp with a NotOwned failure,
// which failure.Write turns into the step's condition.
func TestClaimIsNotOwned(t *testing.T) {
	owner := Claimant{Owner: Owner{Kind: "Workload", Name: "app", UID: "u1"}}
	ours := configMap(nil, false)
	ours.SetOwnerReferences([]metav1.OwnerReference{{Kind: "Workload", Name: "app", UID: "u1", Controller: ptr.To(true)}})
	assert.NoError(t, claim(ours, owner))

	theirs := configMap(nil, false)
	theirs.SetOwnerReferences([]metav1.OwnerReference{{Kind: "Workload", Name: "other", UID: "u2", Controller: ptr.To(true)}})
	d := Decide(configMap(nil, false), Seen{Live: theirs, Whole: true, Taken: true}, owner)
	assert.Equal(t, Refuse, d.Action)
	err := d.Err
	assert.Equal(t, failure.NotOwned, failure.Classify(err))
	c := failure.Write(failure.Subject{Verb: "apply", What: "ConfigMap [app]"}, "app", err).Cond("ResourceSubmitted", failure.Reasons{Taken: "StampedObjectNotOwned"})
	assert.Equal(t, "StampedObjectNotOwned", c.Reason)
	assert.Contains(t, c.Message, "unable to apply ConfigMap [app]: ConfigMap [ns/app] already exists and is controlled by Workload [other]")
}
