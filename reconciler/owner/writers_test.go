package owner

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/runs"
	"kontinue.dev/kontinue/reconciler/stamp"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/tracking"
)

// stamper plays stamp's side of the port for the step writers: kinds it
// serves, what a Put, Live, LoadRuns or CreateRun answers, and what was
// asked of it.
type fakeStamper struct {
	clusterScoped map[string]bool  // kinds served cluster-scoped
	notServed     map[string]error // kinds whose resolve fails so
	putErr        map[string]error // by object name
	live          *unstructured.Unstructured
	liveErr       error
	runs          []runs.Run
	runsErr       error
	createErr     error
	adoptErr      error

	puts    []string
	adopted []string // kinds looked at in other shards (AdoptMoved)
	created []string
	removed []string
}

func (s *fakeStamper) Resolve(gvk schema.GroupVersionKind) (stamp.Target, error) {
	if err := s.notServed[gvk.Kind]; err != nil {
		return stamp.Target{}, err
	}
	return stamp.Target{GVR: gvk.GroupVersion().WithResource(lower(gvk.Kind) + "s"), Namespaced: !s.clusterScoped[gvk.Kind]}, nil
}

func (s *fakeStamper) Put(_ context.Context, _ stamp.For, _ stamp.Target, _ stamp.Watch, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	if err := s.putErr[desired.GetName()]; err != nil {
		return nil, false, err
	}
	s.puts = append(s.puts, desired.GetName())
	return desired.DeepCopy(), true, nil
}

func (s *fakeStamper) Live(context.Context, tracking.Key, stamp.Watch, string, string) (*unstructured.Unstructured, error) {
	return s.live, s.liveErr
}

func (s *fakeStamper) Read(context.Context, dynamic.Interface, schema.GroupVersionResource, string, string) (*unstructured.Unstructured, error) {
	return s.live, s.liveErr
}

func (s *fakeStamper) Create(context.Context, stamp.For, schema.GroupVersionResource, *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return nil, errors.New("not in this test")
}

func (s *fakeStamper) ApplyTo(context.Context, stamp.For, schema.GroupVersionResource, *unstructured.Unstructured, *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return nil, errors.New("not in this test")
}

func (s *fakeStamper) Remove(_ context.Context, _ dynamic.Interface, _ schema.GroupVersionResource, obj, _ *unstructured.Unstructured, _, _ string) error {
	s.removed = append(s.removed, obj.GetName())
	return nil
}

func (s *fakeStamper) ListRuns(context.Context, stamp.RunQuery) ([]runs.Run, error) {
	return s.runs, s.runsErr
}

func (s *fakeStamper) Record(cached *unstructured.Unstructured, _, _ string) *unstructured.Unstructured {
	return cached
}

func (s *fakeStamper) KeepRecord(context.Context, dynamic.Interface, *unstructured.Unstructured, types.UID) error {
	return nil
}

func (s *fakeStamper) LoadRuns(context.Context, stamp.RunQuery) ([]runs.Run, bool, error) {
	return s.runs, false, s.runsErr
}

func (s *fakeStamper) CreateRun(_ context.Context, _ stamp.For, _ schema.GroupVersionResource, run *unstructured.Unstructured, _, _ string) (*unstructured.Unstructured, error) {
	if s.createErr != nil {
		return nil, s.createErr
	}
	c := run.DeepCopy()
	c.SetName("run-1")
	s.created = append(s.created, c.GetName())
	return c, nil
}

func (s *fakeStamper) RemoveRuns(_ context.Context, _ dynamic.Interface, _ schema.GroupVersionResource, doomed []runs.Run, _ *unstructured.Unstructured, _, _ string) (bool, error) {
	for _, r := range doomed {
		s.removed = append(s.removed, r.Name)
	}
	return false, nil
}

func (s *fakeStamper) AdoptMoved(_ context.Context, _ func() (dynamic.Interface, error), gvr schema.GroupVersionResource, _ string, _ labels.Set, _ types.UID) (int, error) {
	s.adopted = append(s.adopted, gvr.Resource)
	return 0, s.adoptErr
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// writerIO is the port of an owner's reconcile over s.
func writerIO(s *fakeStamper, watched *[]tracking.Key) *ownerIO {
	own := walkOwner()
	return &ownerIO{ctx: context.Background(), w: s, keep: newKeepSet(), owner: own,
		watch:   func(k tracking.Key) bool { *watched = append(*watched, k); return true },
		claim:   stamp.Owner{Kind: api.KindWorkload, Name: "app", UID: own.GetUID()},
		account: api.ServiceAccountRef{Namespace: "dev", Name: "default"},
		client:  func() (dynamic.Interface, error) { return nil, nil }, user: "Workload/dev/app"}
}

func desired(kind, name string) *unstructured.Unstructured {
	u := obj(kind, name, "v1")
	u.SetNamespace("dev")
	return u
}

func mutableStep(spec *api.TemplateSpec) *stepCtx {
	return &stepCtx{step: api.Step{Name: "app"}, kind: api.KindClusterTemplate, tmplName: "t", spec: spec}
}

// The mutable writer resolves every object before anything is written
// (a step that fails never loses track of its objects), reads the live
// primary only for a gated step, and lends it only when this owner
// controls it.
func TestMutableWriterLoad(t *testing.T) {
	gated := &api.TemplateSpec{AlwaysSuccessful: true}
	mine := desired("ConfigMap", "a")
	mine.SetOwnerReferences([]metav1.OwnerReference{{UID: "uid-1", Controller: ptr.To(true)}})
	for _, tt := range []struct {
		name   string
		s      fakeStamper
		spec   *api.TemplateSpec
		objs   []string
		reason string // the stepFail's (empty: none)
		retry  bool
		live   bool // Seen.Live is set
		kept   int  // refs kept
	}{
		{name: "every object resolved and kept", spec: &api.TemplateSpec{}, objs: []string{"a", "b"}, kept: 2},
		{name: "a cluster-scoped kind: refused before anything is written", spec: &api.TemplateSpec{},
			s: fakeStamper{clusterScoped: map[string]bool{"ConfigMap": true}}, objs: []string{"a"}, reason: step.ReasonStampFailure},
		{name: "a kind the API server does not serve: refused until discovery says otherwise", spec: &api.TemplateSpec{},
			s:    fakeStamper{notServed: map[string]error{"ConfigMap": &meta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: "ConfigMap"}}}},
			objs: []string{"a"}, reason: step.ReasonRejected},
		{name: "resolving failed otherwise: Unknown, retried", spec: &api.TemplateSpec{},
			s:    fakeStamper{notServed: map[string]error{"ConfigMap": errors.New("discovery timed out")}},
			objs: []string{"a"}, reason: step.ReasonUnknownError, retry: true},
		{name: "gated: the live primary this owner controls", spec: gated, s: fakeStamper{live: mine}, objs: []string{"a"}, live: true, kept: 1},
		{name: "gated: a live object someone else controls is not lent", spec: gated, s: fakeStamper{live: desired("ConfigMap", "a")}, objs: []string{"a"}, kept: 1},
		{name: "gated: the live primary unreadable: Unknown, retried", spec: gated, s: fakeStamper{liveErr: errors.New("timeout")},
			objs: []string{"a"}, reason: "", retry: true, kept: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var watched []tracking.Key
			x := writerIO(&tt.s, &watched)
			w := &mutableWriter{io: x, sc: mutableStep(tt.spec), targets: map[*unstructured.Unstructured]target{}}
			o := step.Observed{}
			for _, n := range tt.objs {
				o.Objects = append(o.Objects, desired("ConfigMap", n))
			}
			o.Desired = o.Objects[0]
			seen, fail := w.load(&o)
			switch {
			case tt.reason != "":
				require.NotNil(t, fail)
				assert.Equal(t, tt.reason, fail.cond.Reason)
			case tt.retry:
				require.NotNil(t, fail)
				assert.Equal(t, metav1.ConditionUnknown, fail.cond.Status)
				assert.Contains(t, fail.cond.Message, "to decide whether its new inputs must wait")
			default:
				require.Nil(t, fail)
			}
			if fail != nil {
				assert.Equal(t, tt.retry, fail.err != nil, "retried")
			}
			assert.Equal(t, tt.live, seen.Live != nil)
			assert.Len(t, x.keep.refs, tt.kept)
			assert.Len(t, x.keep.wanted, tt.kept)
			assert.Len(t, watched, tt.kept, "each resolved kind watched")
		})
	}
}

// The mutable writer applies a Plan's objects in order; a failed apply
// ends the step, a failed shadow is only reported.
func TestMutableWriterWrite(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "b", errors.New("no"))
	for _, tt := range []struct {
		name   string
		s      fakeStamper
		shadow bool
		puts   []string
		failed string // Got.Failed
		reason string // the stepFail's
	}{
		{name: "in order", puts: []string{"a", "b"}},
		{name: "a refused apply ends the step", s: fakeStamper{putErr: map[string]error{"b": forbidden}}, puts: []string{"a"}, reason: step.ReasonRejected},
		{name: "the shadow", shadow: true, puts: []string{"a"}},
		{name: "a refused shadow is reported, not fatal", shadow: true, s: fakeStamper{putErr: map[string]error{"a": forbidden}}, failed: "is not allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var watched []tracking.Key
			w := &mutableWriter{io: writerIO(&tt.s, &watched), sc: mutableStep(&api.TemplateSpec{}), targets: map[*unstructured.Unstructured]target{}}
			o := step.Observed{Objects: []*unstructured.Unstructured{desired("ConfigMap", "a"), desired("ConfigMap", "b")}}
			o.Desired = o.Objects[0]
			_, fail := w.load(&o)
			require.Nil(t, fail)
			p := step.Plan{Apply: o.Objects, Primary: 0}
			if tt.shadow {
				p = step.Plan{Apply: o.Objects[:1], Shadow: true}
			}
			got, fail := w.write(o, p)
			assert.Equal(t, tt.puts, tt.s.puts)
			if tt.reason != "" {
				require.NotNil(t, fail)
				assert.Equal(t, tt.reason, fail.cond.Reason)
				return
			}
			require.Nil(t, fail)
			if tt.failed != "" {
				assert.Contains(t, got.Failed, tt.failed)
				return
			}
			assert.Len(t, got.Live, len(tt.puts))
			assert.Len(t, got.Refs, len(tt.puts))
			assert.Equal(t, "configmaps", got.Refs[0].Resource)
			assert.True(t, got.Wrote || tt.shadow, "the primary was written")
		})
	}
}

// The immutable writer: the run of the rendered object, its runs through
// stamp's run protocol, a run created, runs removed.
func TestImmutableWriter(t *testing.T) {
	sc := &stepCtx{step: api.Step{Name: "build"}, kind: api.KindClusterImageTemplate, tmplName: "job", spec: &api.TemplateSpec{Lifecycle: "immutable"}}
	rendered := desired("Job", "")
	rendered.SetGenerateName("build-")
	rendered.SetAnnotations(map[string]string{api.AnnotationDigest: "d"})

	s := &fakeStamper{runs: []runs.Run{{Name: "old"}}}
	var watched []tracking.Key
	w := &immutableWriter{io: writerIO(s, &watched), sc: sc}
	o := step.Observed{Objects: []*unstructured.Unstructured{rendered}, Desired: rendered}
	seen, fail := w.load(&o)
	require.Nil(t, fail)
	assert.Equal(t, s.runs, seen.Runs)
	assert.NotEmpty(t, o.Digest, "the run's input set")
	assert.NotContains(t, o.Desired.GetAnnotations(), api.AnnotationDigest, "runs are never applied: no digest")
	assert.Len(t, watched, 1)

	got, fail := w.write(o, step.Plan{Create: o.Desired})
	require.Nil(t, fail)
	assert.Equal(t, []string{"run-1"}, s.created)
	assert.True(t, got.Wrote)
	assert.Equal(t, "run-1", got.Refs[0].Name)
	assert.Equal(t, "jobs", got.Refs[0].Resource)

	require.NoError(t, w.remove(step.Plan{}))
	assert.Empty(t, s.removed, "nothing to remove: nothing asked")
	require.NoError(t, w.remove(step.Plan{Delete: []runs.Run{{Name: "old"}}}))
	assert.Equal(t, []string{"old"}, s.removed)

	s.runsErr = errors.New("list failed")
	_, fail = w.load(&step.Observed{Objects: []*unstructured.Unstructured{rendered}})
	require.NotNil(t, fail)
	assert.Equal(t, "Unknown UnknownError", string(fail.cond.Status)+" "+fail.cond.Reason)
	assert.Equal(t, s.runsErr, fail.err)

	s.runsErr, s.createErr = nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "jobs"}, "build")
	_, fail = w.write(o, step.Plan{Create: o.Desired})
	require.NotNil(t, fail)
	assert.Equal(t, st.False, fail.cond.Status)
	assert.Contains(t, fail.cond.Message, "give the template metadata.generateName")
}

// Without a client for the service account (it does not exist, or its
// client cannot be built) nothing is written as it: the step says
// ServiceAccountError, and runs are not removed.
func TestOwnerIOWithoutClient(t *testing.T) {
	s := &fakeStamper{}
	var watched []tracking.Key
	x := writerIO(s, &watched)
	noClient := errors.New("service account dev/default not found")
	x.client = func() (dynamic.Interface, error) { return nil, noClient }

	tg, fail := x.resolve(desired("ConfigMap", "a"), "apply", "ConfigMap [a]")
	require.Nil(t, fail)
	_, _, fail = x.put("app", riders{}, tg, desired("ConfigMap", "a"), false)
	require.NotNil(t, fail)
	assert.Equal(t, "False ServiceAccountError", string(fail.cond.Status)+" "+fail.cond.Reason)
	assert.Equal(t, noClient.Error(), fail.cond.Message)
	assert.Empty(t, s.puts)

	_, fail = x.createRun(x.stepRuns("build", tg.key, "d"), "build", riders{}, desired("Job", "b"), tg.gvr, "Job")
	require.NotNil(t, fail)
	assert.Equal(t, step.ReasonServiceAccountError, fail.cond.Reason)
	assert.Empty(t, s.created)

	assert.NoError(t, x.removeRuns(tg.gvr, nil, "why"), "nothing to remove needs no client")
	assert.Equal(t, noClient, x.removeRuns(tg.gvr, []runs.Run{{Name: "old"}}, "why"))
	assert.Empty(t, s.removed)
}
