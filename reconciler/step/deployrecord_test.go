package step

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// The deployment inputs an input set was applied with come from the
// status first, and from the object's own annotation when the status
// write after the apply was lost; never from an object on another set,
// and never from an annotation that is not a record of url and revision.
func TestDeploymentInputsOf(t *testing.T) {
	x := Outputs{"url": "app@x", "revision": "rev-x"}
	rider := DeploymentRider(Observed{Kind: api.KindClusterDeploymentTemplate, Deployment: x})
	on := func(digest, rider string) *unstructured.Unstructured {
		u := object("app", digest, nil)
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationDigest] = digest
		if rider != "" {
			ann[AnnotationDeploymentInputs] = rider
		}
		u.SetAnnotations(ann)
		return u
	}
	other := Outputs{"url": "app@status", "revision": "rev-status"}
	for _, tt := range []struct {
		name   string
		state  State
		digest string
		live   *unstructured.Unstructured
		want   Outputs
	}{
		{"recorded as applied", State{AppliedDigest: "x", AppliedOutputs: other}, "x", on("x", rider), other},
		{"recorded as the last success", State{GoodDigest: "x", Good: other}, "x", on("x", rider), other},
		{"status write lost: the object's own record", State{GoodDigest: "w", Good: other}, "x", on("x", rider), x},
		{"status of another set: the object's record", State{AppliedDigest: "w", AppliedOutputs: other}, "x", on("x", rider), x},
		{"object on another set", State{}, "x", on("y", rider), nil},
		{"object written before the annotation", State{}, "x", on("x", ""), nil},
		{"no object", State{}, "x", nil, nil},
		{"no set", State{}, "", on("", rider), nil},
		{"not JSON", State{}, "x", on("x", "{url"), nil},
		{"not an object", State{}, "x", on("x", `["a"]`), nil},
		{"other keys", State{}, "x", on("x", `{"url":"u","revision":"r","image":"i"}`), nil},
		{"too large", State{}, "x", on("x", `{"url":"`+strings.Repeat("a", deploymentRiderLimit)+`"}`), nil},
		{"one of the two", State{}, "x", on("x", `{"revision":"r"}`), Outputs{"url": nil, "revision": "r"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, deploymentInputsOf(tt.state, tt.digest, tt.live))
		})
	}
}

// The annotation is written only for a deployment step's inputs, keeps
// their values exactly (integers past 2^53 too) and is left out when it
// would crowd the object's annotations.
func TestDeploymentRider(t *testing.T) {
	in := Outputs{"url": "app@x", "revision": int64(9007199254740993)}
	r := DeploymentRider(Observed{Kind: api.KindClusterDeploymentTemplate, Deployment: in})
	require.NotEmpty(t, r)
	assert.Equal(t, in, riddenInputs(r))

	assert.Empty(t, DeploymentRider(Observed{Kind: api.KindClusterTemplate, Deployment: in}), "not a deployment")
	assert.Empty(t, DeploymentRider(Observed{Kind: api.KindClusterDeploymentTemplate}), "no deployment inputs")
	big := Outputs{"url": strings.Repeat("u", deploymentRiderLimit), "revision": "r"}
	assert.Empty(t, DeploymentRider(Observed{Kind: api.KindClusterDeploymentTemplate, Deployment: big}), "too large: the status only")
}

// Issue 45.2's case with the status write after the apply of x (c2) lost:
// the next reconcile holds y (c3) with a state that knows nothing of x. When x
// completes, its success is recorded from the object's record, and y is
// held until it is (not let in with x's end unrecorded).
func TestDeploymentCompletesWhileHeldAfterLostStatus(t *testing.T) {
	k := heldKinds[len(heldKinds)-1]
	require.Equal(t, api.KindClusterDeploymentTemplate, k.kind)
	spec := &api.TemplateSpec{}
	heldRules[0].spec(spec)
	// The state of the status before x was applied: w is the last good set.
	state := State{Good: k.out("c1"), GoodDigest: "c1"}

	withRider := func(u *unstructured.Unstructured, c string) *unstructured.Unstructured {
		ann := u.GetAnnotations()
		ann[AnnotationDeploymentInputs] = DeploymentRider(heldObserved(k, spec, c, State{}, nil))
		u.SetAnnotations(ann)
		return u
	}
	done := merge(heldRules[0].finished("c2"), map[string]any{"observedGeneration": int64(1)})
	o := heldObserved(k, spec, "c3", state, nil)

	ob := Admit(o, withRider(liveOn("c2", done), "c2"))
	assert.True(t, ob.Held, "y waits until x's success is in the status")
	assert.Equal(t, "c2", ob.State.GoodDigest)
	assert.Equal(t, k.out("c2"), ob.State.Good, "x's own inputs, not y's")

	// Before the fix's annotation (an object written by an older Kontinue),
	// x's inputs are not known: nothing to record, and y goes in.
	ob = Admit(o, liveOn("c2", done))
	assert.False(t, ob.Held)
	assert.Equal(t, "c1", ob.State.GoodDigest)
}
