package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/runs"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

func TestKeepSet(t *testing.T) {
	img := st.StampedRef{APIVersion: "kpack.io/v1alpha2", Kind: "Image", Namespace: "ns", Name: "app", Resource: "images.kpack.io"}
	cm := st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "app", Resource: "configmaps"}
	shadow := st.StampedRef{APIVersion: "kpack.io/v1alpha2", Kind: "Image", Namespace: "ns", Name: "app-last-good", Resource: "images.kpack.io"}
	assert.Equal(t, refKey{gvr: schema.GroupVersionResource{Group: "kpack.io", Version: "v1alpha2", Resource: "images"}, namespace: "ns", name: "app"}, refKeyOf(img))
	assert.Equal(t, "images.kpack.io", resourceString(refKeyOf(img).gvr))
	assert.Equal(t, "configmaps", resourceString(refKeyOf(cm).gvr))

	k := newKeepSet()
	k.resources([]st.Resource{{Name: "build", StampedRef: &img, ShadowRef: &shadow}})
	assert.True(t, k.has(refKeyOf(img)))
	assert.True(t, k.has(refKeyOf(shadow)), "a shadow the status names stays")
	assert.False(t, k.has(refKeyOf(cm)))

	k.resources([]st.Resource{{Name: "config", StampedRef: &cm}})
	assert.False(t, k.has(refKeyOf(img)), "what the steps point at now, only")

	runGVR := schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "taskruns"}
	k.reach("test")
	k.run(st.StampedRef{APIVersion: "tekton.dev/v1", Kind: "TaskRun", Namespace: "ns", Name: "r2", Resource: "taskruns.tekton.dev"})
	assert.True(t, k.has(refKey{gvr: runGVR, namespace: "ns", name: "r2"}))
	assert.False(t, k.has(refKey{gvr: runGVR, namespace: "ns", name: "r1"}), "retention has it")
	assert.True(t, k.reached["test"])
	assert.False(t, k.reached["build"])
}

func TestOrphans(t *testing.T) {
	img := st.StampedRef{APIVersion: "kpack.io/v1alpha2", Kind: "Image", Namespace: "ns", Name: "app", Resource: "images.kpack.io"}
	cm := st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "app", Resource: "configmaps"}
	shadow := st.StampedRef{APIVersion: "kpack.io/v1alpha2", Kind: "Image", Namespace: "ns", Name: "app-last-good", Resource: "images.kpack.io"}
	left := st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "left", Resource: "configmaps"}
	prev := st.OwnerStatus{
		Resources: []st.Resource{{Name: "build", StampedRef: &img, ShadowRef: &shadow}, {Name: "config", StampedRef: &cm, StampedObjects: []st.StampedRef{cm, img}}},
		Orphans:   []st.StampedRef{left, cm},
	}
	tests := []struct {
		name string
		now  []st.Resource
		want []string // kind/name step
	}{
		{"every step still points at its objects", prev.Resources, []string{"ConfigMap/left "}},
		{"the shadow is gone from status", []st.Resource{{Name: "build", StampedRef: &img}, {Name: "config", StampedRef: &cm}}, []string{"Image/app-last-good build", "ConfigMap/left "}},
		{"a step left the chain: each object once, with the step that had it first", nil,
			[]string{"Image/app build", "Image/app-last-good build", "ConfigMap/app config", "ConfigMap/left "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKeepSet()
			k.resources(tt.now)
			var got []string
			for _, o := range k.orphans(prev) {
				got = append(got, o.ref.Kind+"/"+o.ref.Name+" "+o.step)
				assert.Equal(t, refKeyOf(o.ref), o.key)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestStaleRuns(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "tekton.dev", Version: "v1", Resource: "taskruns"}
	run := func(name, step string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
			"metadata": map[string]any{"name": name, "namespace": "ns", "labels": map[string]any{api.LabelResourceName: step}}}}
	}
	ref := func(name string) *st.StampedRef {
		return &st.StampedRef{APIVersion: "tekton.dev/v1", Kind: "TaskRun", Namespace: "ns", Name: name, Resource: "taskruns.tekton.dev"}
	}
	objs := []*unstructured.Unstructured{run("t2", "test"), run("t1", "test"), run("o1", "old")}
	tests := []struct {
		name    string
		reached []string
		kept    []string
		current map[string]*st.StampedRef
		want    []string
	}{
		{"runs retention keeps stay, a removed step's go", []string{"test"}, []string{"t2", "t1"}, map[string]*st.StampedRef{"test": ref("t2")}, []string{"o1"}},
		{"retention let one go", []string{"test"}, []string{"t2"}, map[string]*st.StampedRef{"test": ref("t2")}, []string{"t1", "o1"}},
		{"a step that failed early and still points at its run keeps its history", nil, nil, map[string]*st.StampedRef{"test": ref("t2")}, []string{"o1"}},
		{"a step that failed early and now points elsewhere (became mutable) does not", nil, nil,
			map[string]*st.StampedRef{"test": {APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "t", Resource: "configmaps"}}, []string{"t2", "t1", "o1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKeepSet()
			for _, s := range tt.reached {
				k.reach(s)
			}
			for _, n := range tt.kept {
				k.run(*ref(n))
			}
			var got []string
			for _, o := range k.staleRuns(gvr, objs, tt.current) {
				got = append(got, o.GetName())
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestUnrecorded(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	const owner = types.UID("owner-uid")
	ownerLabels := labels.SelectorFromSet(labels.Set{api.StampedLabel: "true", api.LabelWorkloadName: "app", api.LabelWorkloadNamespace: "ns"})
	cm := func(name string, mod func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace("ns")
		u.SetName(name)
		u.SetLabels(map[string]string{api.StampedLabel: "true", api.LabelWorkloadName: "app", api.LabelWorkloadNamespace: "ns", api.LabelResourceName: "pair"})
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Name: "app", UID: owner, Controller: ptr.To(true)}})
		if mod != nil {
			mod(u)
		}
		return u
	}
	ref := func(name string) st.StampedRef {
		return st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name, Resource: "configmaps"}
	}
	recorded, orphan := ref("recorded"), ref("listed-orphan")
	prev := st.OwnerStatus{Resources: []st.Resource{{Name: "pair", StampedRef: &recorded}}, Orphans: []st.StampedRef{orphan}}

	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		gone bool
	}{
		{"applied, never recorded, not wanted: goes", cm("unrecorded", nil), true},
		{"rendered in this reconcile (applied or not): stays", cm("wanted", nil), false},
		{"pointed at by the new status: stays", cm("kept", nil), false},
		{"named by the previous status: orphan removal decides", cm("recorded", nil), false},
		{"listed in status.orphans: orphan removal decides", cm("listed-orphan", nil), false},
		{"a run (input digest): stale-run removal decides", cm("run", func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{api.StampedLabel: "true", api.LabelWorkloadName: "app", api.LabelWorkloadNamespace: "ns", runs.LabelInputDigest: "d1"})
		}), false},
		{"controlled by an owner of the same name deleted earlier: stays", cm("old-owner", func(u *unstructured.Unstructured) {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Name: "app", UID: "old", Controller: ptr.To(true)}})
		}), false},
		{"no controller (taken over by a person): stays", cm("no-controller", func(u *unstructured.Unstructured) {
			u.SetOwnerReferences(nil)
		}), false},
		{"another owner's labels: stays", cm("other", func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{api.StampedLabel: "true", api.LabelWorkloadName: "other", api.LabelWorkloadNamespace: "ns"})
		}), false},
		{"already being deleted: stays", cm("deleting", func(u *unstructured.Unstructured) {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKeepSet()
			k.want(ref("wanted"))
			k.resources([]st.Resource{{Name: "pair", StampedRef: ptr.To(ref("kept"))}})
			got := k.unrecorded(prev, owner, ownerLabels, gvr, []*unstructured.Unstructured{tt.obj})
			assert.Equal(t, tt.gone, len(got) == 1, "%v", got)
		})
	}

	k := newKeepSet()
	k.want(ref("wanted"))
	k.resources(nil)
	assert.Equal(t, []schema.GroupVersionResource{gvr}, k.wantedKinds(), "rendered objects survive resources()")
}

func TestSweepsUnrecorded(t *testing.T) {
	for _, tt := range []struct {
		name  string
		conds []metav1.Condition
		want  bool
	}{
		{"no step walked (bad input, no chain)", nil, false},
		{"a step failed", []metav1.Condition{st.Cond(st.ResourcesSubmitted, st.False, "TemplateRejectedByAPIServer", "")}, false},
		{"a step could not tell", []metav1.Condition{st.Cond(st.ResourcesSubmitted, st.Unknown, "UnknownError", "")}, false},
		{"every step submitted", []metav1.Condition{st.Cond(st.ResourcesSubmitted, st.True, "ResourceSubmissionComplete", "")}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, sweepsUnrecorded(st.OwnerStatus{Conditions: tt.conds}))
		})
	}
}

func TestFateOf(t *testing.T) {
	imgGVR := schema.GroupVersionResource{Group: "kpack.io", Version: "v1alpha2", Resource: "images"}
	img := st.StampedRef{APIVersion: "kpack.io/v1alpha2", Kind: "Image", Namespace: "ns", Name: "app", Resource: "images.kpack.io"}
	shadowRef := st.StampedRef{APIVersion: "kpack.io/v1alpha2", Kind: "Image", Namespace: "ns", Name: "app-last-good", Resource: "images.kpack.io"}
	obj := func(name, step string, shadow bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace("ns")
		u.SetName(name)
		l := map[string]string{}
		if step != "" {
			l[api.LabelResourceName] = step
		}
		if shadow {
			l["kontinue.dev/shadow"] = "true"
		}
		u.SetLabels(l)
		return u
	}
	cond := func(status metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: st.ResourceSubmitted, Status: status}}
	}
	waits := st.Resource{Name: "build", StampedRef: &img, Conditions: cond(metav1.ConditionUnknown)}
	refused := st.Resource{Name: "build", StampedRef: &img, Conditions: cond(metav1.ConditionFalse)}
	rendered := st.Resource{Name: "build", StampedRef: &img, Conditions: cond(metav1.ConditionTrue)}
	other := st.Resource{Name: "deploy", Conditions: cond(metav1.ConditionUnknown)}
	tests := []struct {
		name string
		o    *unstructured.Unstructured
		gvr  schema.GroupVersionResource
		now  []st.Resource
		all  bool
		want unrecordedFate
	}{
		{"every step submitted: nothing unrecorded is wanted", obj("app-last-good", "build", true), imgGVR, []st.Resource{rendered}, true, sweepIt},
		{"its step left the chain", obj("x", "gone", false), imgGVR, []st.Resource{waits, other}, false, sweepIt},
		{"no step label: only a sweep of all", obj("x", "", false), imgGVR, []st.Resource{waits}, false, keepIt},
		{"its step rendered without it, another waits", obj("app-last-good", "build", true), imgGVR, []st.Resource{rendered, other}, false, sweepIt},
		{"its step waits: may take it back", obj("app-old", "build", false), imgGVR, []st.Resource{waits}, false, keepIt},
		{"the shadow of the primary a waiting step names", obj("app-last-good", "build", true), imgGVR, []st.Resource{waits, other}, false, nameIt},
		{"the shadow of the primary a refused step names", obj("app-last-good", "build", true), imgGVR, []st.Resource{refused}, false, nameIt},
		{"a shadow of another primary", obj("web-last-good", "build", true), imgGVR, []st.Resource{waits}, false, keepIt},
		{"a shadow of another kind", obj("app-last-good", "build", true), schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, []st.Resource{waits}, false, keepIt},
		{"a shadow in another namespace", func() *unstructured.Unstructured {
			u := obj("app-last-good", "build", true)
			u.SetNamespace("other")
			return u
		}(), imgGVR, []st.Resource{waits}, false, keepIt},
		{"the shadow's name without its label", obj("app-last-good", "build", false), imgGVR, []st.Resource{waits}, false, keepIt},
		{"the step names another shadow already", obj("app-last-good", "build", true), imgGVR, []st.Resource{{Name: "build", StampedRef: &img, ShadowRef: &st.StampedRef{Name: "x"}}}, false, keepIt},
		{"the step names no primary", obj("app-last-good", "build", true), imgGVR, []st.Resource{{Name: "build"}}, false, keepIt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fateOf(tt.o, tt.gvr, tt.now, tt.all))
		})
	}
	assert.Equal(t, shadowRef.Name, step.ShadowName(img.Name), "the shadow's name the cases use")
}
