package stamp

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"kontinue.dev/kontinue/reconciler/failure"
)

// The write protocol's one decision: every case of what may be found at
// a stamped object's name, and what Put does about it. Nothing is written
// to an object that was not read and proven this owner's step's.
func TestDecide(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	c := Claimant{Owner: Owner{Kind: "Workload", Name: "app", UID: "u-me"}, Step: "config", Holds: holding("config", "deploy")}
	desired := func(data map[string]any, shard string) *unstructured.Unstructured {
		u := configMap(data, false)
		l := map[string]string{"carto.run/resource-name": "config"}
		if shard != "" {
			l["kontinue.dev/shard"] = shard
		}
		u.SetLabels(l)
		// What prepare renders: the owner as controller.
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Name: "app", UID: "u-me", Controller: ptr.To(true)}})
		return u
	}
	// live is a ConfigMap at desired's name: controlled by ctrl's UID
	// ("": none), labelled for step, created by Kontinue (an Update entry
	// holds its fields), in shard.
	live := func(data map[string]any, ctrl, step string, created bool, shard string, ann map[string]string) *unstructured.Unstructured {
		u := configMap(data, created)
		u.SetUID("u-cm")
		u.SetResourceVersion("7")
		switch ctrl {
		case "me":
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Name: "app", UID: "u-me", Controller: ptr.To(true)}})
		case "them":
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Name: "other", UID: "u-them", Controller: ptr.To(true)}})
		}
		l := map[string]string{}
		if step != "" {
			l["carto.run/resource-name"] = step
		}
		if shard != "" {
			l["kontinue.dev/shard"] = shard
		}
		u.SetLabels(l)
		a := u.GetAnnotations()
		for k, v := range ann {
			a[k] = v
		}
		u.SetAnnotations(a)
		return u
	}
	one := map[string]any{"a": "1"}
	two := map[string]any{"a": "1", "b": "2"}
	forbidden := apierrors.NewForbidden(gr, "app", errors.New(`User "system:serviceaccount:dev:sa" cannot get resource "configmaps"`))
	adopt := map[string]string{"kontinue.dev/adopt-by": "Workload/app"}

	cases := []struct {
		name    string
		desired *unstructured.Unstructured
		seen    Seen
		want    Action
		hand    bool                   // Apply: hand the create's fields over first
		quiet   bool                   // Apply: a relabel only
		class   failure.Class          // Refuse: the error's class
		reason  string                 // Refuse: the step's condition reason
		status  metav1.ConditionStatus // Refuse: the step's condition status
		retry   bool                   // Refuse: retried with backoff
		held    string                 // Refuse: the step that holds it
		parts   []string               // Refuse: in the message
	}{
		{name: "nothing at the name: create", desired: desired(one, ""), seen: Seen{}, want: Create},
		{name: "gone since the create found it taken: create again", desired: desired(one, ""), seen: Seen{Taken: true, Whole: true}, want: Create},

		// The read that proves ownership failed: never written.
		{name: "taken, and the account may not read it (no get): refused", desired: desired(one, ""), seen: Seen{Taken: true, Err: forbidden},
			want: Refuse, class: failure.NotOwned, reason: "StampedObjectNotOwned", status: metav1.ConditionFalse,
			parts: []string{"ConfigMap [ns/app] exists, and the service account may not read it", "cannot prove it is this Workload's, so it does not write it", `cannot get resource "configmaps"`}},
		{name: "the hand-over read refused: refused", desired: desired(one, ""), seen: Seen{Err: forbidden},
			want: Refuse, class: failure.NotOwned, reason: "StampedObjectNotOwned", status: metav1.ConditionFalse, parts: []string{"may not read it"}},
		{name: "taken, the read timed out: retried", desired: desired(one, ""), seen: Seen{Taken: true, Err: apierrors.NewTimeoutError("slow", 1)},
			want: Refuse, class: failure.Transient, reason: "UnknownError", status: metav1.ConditionUnknown, retry: true,
			parts: []string{"unable to read ConfigMap [ns/app] to prove it is this Workload's; nothing was written, retrying"}},
		{name: "taken, the read throttled (429): retried", desired: desired(one, ""), seen: Seen{Taken: true, Err: apierrors.NewTooManyRequests("slow down", 1)},
			want: Refuse, class: failure.Transient, reason: "UnknownError", status: metav1.ConditionUnknown, retry: true},
		{name: "taken, the read failed (500): retried", desired: desired(one, ""), seen: Seen{Taken: true, Err: apierrors.NewInternalError(errors.New("etcd"))},
			want: Refuse, class: failure.Transient, reason: "UnknownError", status: metav1.ConditionUnknown, retry: true},
		{name: "taken, the read failed (503): retried", desired: desired(one, ""), seen: Seen{Taken: true, Err: apierrors.NewServiceUnavailable("later")},
			want: Refuse, class: failure.Transient, reason: "UnknownError", status: metav1.ConditionUnknown, retry: true},
		{name: "taken, the account's token refused: retried", desired: desired(one, ""), seen: Seen{Taken: true, Err: apierrors.NewUnauthorized("who")},
			want: Refuse, class: failure.Transient, reason: "UnknownError", status: metav1.ConditionUnknown, retry: true},

		// Someone else's.
		{name: "a person's object", desired: desired(one, ""), seen: Seen{Taken: true, Whole: true, Live: live(one, "", "", false, "", nil)},
			want: Refuse, class: failure.NotOwned, reason: "StampedObjectNotOwned", status: metav1.ConditionFalse,
			parts: []string{"was not stamped by this Workload", "kontinue.dev/adopt-by=Workload/app"}},
		{name: "a person's object, up to date and labelled like ours, from the cache: read it first", desired: desired(one, ""), seen: Seen{Live: live(one, "", "config", false, "", nil)},
			want: Read},
		{name: "a person's object, up to date and labelled like ours, read whole", desired: desired(one, ""), seen: Seen{Whole: true, Live: live(one, "", "config", false, "", nil)},
			want: Refuse, class: failure.NotOwned, reason: "StampedObjectNotOwned", status: metav1.ConditionFalse},
		{name: "another owner's, from the cache: read it first (a hand over may not have reached the cache)", desired: desired(one, ""), seen: Seen{Live: live(one, "them", "config", false, "", nil)},
			want: Read},
		{name: "another owner's, read whole", desired: desired(one, ""), seen: Seen{Whole: true, Live: live(one, "them", "config", false, "", nil)},
			want: Refuse, class: failure.NotOwned, reason: "StampedObjectNotOwned", status: metav1.ConditionFalse, parts: []string{"is controlled by Workload"}},
		{name: "another step's of this owner", desired: desired(two, ""), seen: Seen{Live: live(one, "me", "deploy", true, "", nil)},
			want: Refuse, class: failure.NotOwned, reason: "StampedObjectNotOwned", status: metav1.ConditionFalse, held: "deploy",
			parts: []string{"is stamped by step [deploy] of this Workload", "step [config] renders an object of the same name"}},

		// Handed over, or this step's.
		{name: "a person's object handed over (adopt-by)", desired: desired(two, ""), seen: Seen{Taken: true, Whole: true, Live: live(one, "", "", false, "", adopt)},
			want: Apply},
		{name: "a step renamed since (its object orphaned): taken over", desired: desired(two, ""), seen: Seen{Live: live(one, "me", "old-name", false, "", nil)},
			want: Apply},
		{name: "an object stamped before step labels", desired: desired(two, ""), seen: Seen{Live: live(one, "me", "", false, "", nil)},
			want: Apply},
		{name: "ours, up to date: nothing written", desired: desired(one, ""), seen: Seen{Live: live(one, "me", "config", true, "", nil)},
			want: Keep},
		{name: "ours, a field set: applied", desired: desired(two, ""), seen: Seen{Live: live(one, "me", "config", true, "", nil)},
			want: Apply},
		{name: "ours, created by Kontinue, a field dropped, from the cache: read whole first", desired: desired(one, ""), seen: Seen{Live: live(two, "me", "config", true, "", nil)},
			want: Read},
		{name: "ours, created by Kontinue, a field dropped, read whole: hand over, apply", desired: desired(one, ""), seen: Seen{Whole: true, Live: live(two, "me", "config", true, "", nil)},
			want: Apply, hand: true},
		{name: "ours, applied before, a field dropped: the apply alone removes it", desired: desired(one, ""), seen: Seen{Live: live(two, "me", "config", false, "", nil)},
			want: Apply},
		{name: "ours, the create found it taken (the cache lagged): applied", desired: desired(two, ""), seen: Seen{Taken: true, Whole: true, Live: live(one, "me", "config", false, "", nil)},
			want: Apply},

		// Shards.
		{name: "the owner moved shard: relabelled, no news", desired: desired(one, "b"), seen: Seen{Live: live(one, "me", "config", false, "a", nil)},
			want: Apply, quiet: true},
		{name: "the owner moved shard, and a change: news", desired: desired(two, "b"), seen: Seen{Live: live(one, "me", "config", false, "a", nil)},
			want: Apply},
		{name: "another owner's object in another shard", desired: desired(one, "b"), seen: Seen{Whole: true, Live: live(one, "them", "config", false, "a", nil)},
			want: Refuse, class: failure.NotOwned, reason: "StampedObjectNotOwned", status: metav1.ConditionFalse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.desired, tc.seen, c)
			assert.Equal(t, tc.want.String(), d.Action.String())
			assert.Equal(t, tc.hand, d.HandOver, "hand over")
			assert.Equal(t, tc.quiet, d.Quiet, "quiet")
			if tc.want != Refuse {
				assert.NoError(t, d.Err)
				return
			}
			var fe *failure.Error
			if !assert.ErrorAs(t, d.Err, &fe) {
				return
			}
			assert.Equal(t, tc.class, failure.Classify(d.Err))
			cond := failure.Write(failure.Subject{Verb: "apply", What: "ConfigMap [app] for step [config]", Account: "ns/sa"}, "app", d.Err)
			reasons := failure.Reasons{Unknown: "UnknownError", Refused: "TemplateRejectedByAPIServer", Taken: "StampedObjectNotOwned"}
			got := cond.Cond("ResourceSubmitted", reasons)
			assert.Equal(t, tc.reason, got.Reason)
			assert.Equal(t, tc.status, got.Status)
			assert.Equal(t, tc.retry, cond.Retry != nil, "retried")
			for _, p := range tc.parts {
				assert.Contains(t, got.Message, p)
			}
			var held *HeldByStep
			if tc.held != "" && assert.ErrorAs(t, d.Err, &held) {
				assert.Equal(t, tc.held, held.Step)
			}
		})
	}
}

// The apply carries the UID of the object proven, on a copy: desired is
// the caller's (a shadow's last good object, kept in its status).
func TestWithUID(t *testing.T) {
	d := configMap(map[string]any{"a": "1"}, false)
	before := d.DeepCopy()
	got := withUID(d, "u-1")
	assert.Equal(t, "u-1", string(got.GetUID()))
	assert.Equal(t, before, d, "desired unchanged")
	got.SetUID("")
	assert.Equal(t, before.Object["data"], got.Object["data"])
}
