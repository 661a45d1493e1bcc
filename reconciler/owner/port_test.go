package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/tracking"
)

func obj(kind, name, apiVersion string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	return u
}

// The primary of several rendered objects: the one the template's
// primary selector names, else the first.
func TestPrimaryIndex(t *testing.T) {
	objs := []*unstructured.Unstructured{obj("ConfigMap", "a", "v1"), obj("Deployment", "web", "apps/v1"), obj("Deployment", "api", "apps/v1")}
	for _, tt := range []struct {
		name    string
		primary *api.ObjectSelector
		want    int
	}{
		{"none: the first", nil, 0},
		{"by kind: the first of it", &api.ObjectSelector{Kind: "Deployment"}, 1},
		{"by kind and name", &api.ObjectSelector{Kind: "Deployment", Name: "api"}, 2},
		{"by apiVersion too", &api.ObjectSelector{Kind: "Deployment", APIVersion: "apps/v1", Name: "web"}, 1},
		{"an apiVersion nothing has: the first", &api.ObjectSelector{Kind: "Deployment", APIVersion: "apps/v2"}, 0},
		{"nothing matches: the first", &api.ObjectSelector{Kind: "Service"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, primaryIndex(&api.TemplateSpec{Primary: tt.primary}, objs))
		})
	}
}

// The owner's records of its generated ClusterRunTemplates: one per step
// and name, replaced in place; legacy (no record, the name listed by the
// previous status) and labels as versions without records wrote them.
func TestRunTemplateRecords(t *testing.T) {
	prev := st.OwnerStatus{Resources: []st.Resource{{Name: "tests", StampedObjects: []st.StampedRef{{Kind: api.KindClusterRunTemplate, Name: "crt-1"}}}}}
	r := &records{prev: prev}

	assert.Nil(t, r.get("tests", "crt-1"))
	r.set(st.GeneratedRunTemplate{Step: "tests", Name: "crt-1", Claim: "c"})
	r.set(st.GeneratedRunTemplate{Step: "other", Name: "crt-2"})
	r.set(st.GeneratedRunTemplate{Step: "tests", Name: "crt-1", Claim: "c", UID: "u1"})
	require.Len(t, r.list, 2, "replaced, not added")
	rec := r.get("tests", "crt-1")
	require.NotNil(t, rec)
	assert.Equal(t, types.UID("u1"), rec.UID)
	rec.UID = "changed"
	assert.Equal(t, types.UID("u1"), r.get("tests", "crt-1").UID, "a copy")

	assert.True(t, r.legacy("tests", "crt-1"), "no record before, the name listed")
	assert.False(t, r.legacy("tests", "crt-9"), "another name")
	assert.False(t, r.legacy("gone", "crt-1"), "a step the status did not list")
	r.prev.GeneratedRunTemplates = []st.GeneratedRunTemplate{{Step: "tests", Name: "crt-0"}}
	assert.False(t, r.legacy("tests", "crt-1"), "a version that kept records: no legacy")

	f := api.WorkloadFlavor
	x := &ownerIO{labels: labels.Set{api.StampedLabel: "true", f.LabelOwnerName: "app", f.LabelOwnerNS: "dev"}}
	l := obj(api.KindClusterRunTemplate, "crt-1", "carto.run/v1alpha1")
	l.SetLabels(map[string]string{api.StampedLabel: "true", f.LabelOwnerName: "app", f.LabelOwnerNS: "dev", api.LabelResourceName: "tests"})
	assert.True(t, x.labelledFor(l, "tests"))
	assert.False(t, x.labelledFor(l, "other"))
	assert.False(t, x.labelledFor(nil, "tests"))
	l.SetLabels(map[string]string{f.LabelOwnerName: "app", f.LabelOwnerNS: "dev", api.LabelResourceName: "tests"})
	assert.False(t, x.labelledFor(l, "tests"), "not stamped")
}

func TestWithClaim(t *testing.T) {
	d := obj(api.KindClusterRunTemplate, "crt", "carto.run/v1alpha1")
	d.SetAnnotations(map[string]string{"keep": "me"})
	c := withClaim(d, "abc")
	assert.Equal(t, map[string]string{"keep": "me", AnnotationClaim: "abc"}, c.GetAnnotations())
	assert.Equal(t, map[string]string{"keep": "me"}, d.GetAnnotations(), "a copy")
	assert.Equal(t, d.GetAnnotations(), withClaim(d, "").GetAnnotations(), "no claim: as it is")
	assert.Len(t, newClaim(), 24)
	assert.NotEqual(t, newClaim(), newClaim())
}

// What the port names for a step: its runs (the owner's labels and the
// step's, this very owner as controller, the memory of runs just created
// per owner and step), and whose write a failure's message is about.
func TestOwnerIO(t *testing.T) {
	own := walkOwner()
	f := api.WorkloadFlavor
	x := &ownerIO{owner: own, user: "Workload/dev/app", claim: stamp.Owner{Kind: f.OwnerKind, Name: "app", UID: own.GetUID()},
		account: api.ServiceAccountRef{Namespace: "dev", Name: "sa"},
		labels:  labels.Set{api.StampedLabel: "true", f.LabelOwnerName: "app", f.LabelOwnerNS: "dev"}}
	key := tracking.Key{GVR: api.GVR("runs"), Selector: api.StampedSelector}
	q := x.stepRuns("build", key, "d1")
	assert.Equal(t, key, q.Kind)
	assert.Equal(t, "dev", q.Namespace)
	assert.Equal(t, own.GetUID(), q.Controller)
	assert.Equal(t, "d1", q.Current)
	assert.Equal(t, "Workload/dev/app/build", q.Memo)
	assert.Equal(t, "build", q.Labels[api.LabelResourceName])
	assert.Equal(t, "app", q.Labels[f.LabelOwnerName])
	assert.Len(t, x.labels, 3, "the owner's labels are not changed")

	s := x.subject("apply", "ConfigMap [a]")
	assert.Equal(t, "dev/sa", s.Account)
	assert.Equal(t, "stamped objects must live in the Workload's namespace", s.Home)

	mine := obj("ConfigMap", "a", "v1")
	mine.SetOwnerReferences([]metav1.OwnerReference{{UID: own.GetUID(), Controller: ptr.To(true)}})
	other := obj("ConfigMap", "b", "v1")
	other.SetOwnerReferences([]metav1.OwnerReference{{UID: own.GetUID()}}) // an owner, not the controller
	ref := st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "a"}
	assert.True(t, x.stamps("build", ref, mine))
	assert.False(t, x.stamps("build", ref, other))
	assert.False(t, x.stamps("build", ref, nil))
	// Another step of the owner that still stamps it holds it.
	x.steps = newStepObjects([]api.Step{{Name: "build"}, {Name: "deploy"}}, nil, own.GetUID())
	mine.SetLabels(map[string]string{api.LabelResourceName: "deploy"})
	assert.False(t, x.stamps("build", ref, mine), "deploy's")
	assert.True(t, x.stamps("deploy", ref, mine))
	x.steps.resolved("deploy", st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "other"})
	assert.True(t, x.stamps("build", ref, mine), "deploy stamps another object now")
	assert.True(t, ownedByUID(other, own), "a Helm release Secret needs only an owner reference")
	assert.False(t, ownedByUID(obj("Secret", "s", "v1"), own))
}
