package owner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/runs"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// world plays the port: what each step's stepIO finds and leaves behind,
// by step name. The walk (prepare → Strategy → status) runs for real; only
// the reads and writes are fake.
type world struct {
	status    map[string]map[string]any // the status a step's object shows once applied (nil: none)
	loadFail  map[string]*stepFail      // the step's load fails so
	writeFail map[string]*stepFail      // the step's write fails so
	runs      map[string][]fakeRun      // the runs an immutable step finds, newest first
	pending   bool                      // a run was just created that the cache does not show yet
	traced    bool                      // objects carry their trace context

	traces map[string]string // the trace context each step wrote with
	defs   map[string]string // the chain step each step's decision saw (Observed.Def), by name

	applied []*unstructured.Unstructured // every object written (applied or created), in order
	removed []string                     // the runs removed
	// removeErr: removing runs fails so (the step's status stands; the
	// error is retried).
	removeErr error
}

// fakeRun is a run a step finds: of the input set rendered now (current)
// or of an earlier one, and how it ended.
type fakeRun struct {
	name    string
	current bool
	outcome runs.Outcome
	status  map[string]any
}

// fakeIO is one step's stepIO in the world.
type fakeIO struct {
	w         *world
	step      string
	lifecycle *step.Lifecycle
	sc        *stepCtx
}

// load does what the immutable writer's does to Observed (the run and its
// input set), and finds the world's runs.
func (x fakeIO) load(o *step.Observed) (step.Seen, *stepFail) {
	if f := x.w.loadFail[x.step]; f != nil {
		return step.Seen{}, f
	}
	if x.lifecycle == nil || !x.lifecycle.Runs {
		return step.Seen{}, nil
	}
	o.Desired, o.Digest = step.RunOf(o.Objects[0])
	o.Objects = []*unstructured.Unstructured{o.Desired}
	seen := step.Seen{Pending: x.w.pending}
	for i, r := range x.w.runs[x.step] {
		u := o.Desired.DeepCopy()
		u.SetName(r.name)
		digest := "earlier"
		if r.current {
			digest = o.Digest
		}
		u.SetLabels(map[string]string{runs.LabelInputDigest: digest})
		u.SetCreationTimestamp(metav1.NewTime(time.Unix(int64(900-i), 0)))
		u.Object["status"] = r.status
		seen.Runs = append(seen.Runs, runs.FromObject(u, r.outcome))
	}
	return seen, nil
}

func (x fakeIO) write(o step.Observed, p step.Plan) (step.Got, *stepFail) {
	if f := x.w.writeFail[x.step]; f != nil {
		return step.Got{}, f
	}
	if x.w.defs == nil {
		x.w.defs = map[string]string{}
	}
	if o.Def != nil {
		x.w.defs[x.step] = o.Def.Name
	}
	if x.w.traces == nil {
		x.w.traces = map[string]string{}
	}
	x.w.traces[x.step] = x.sc.traceParent
	if p.Create != nil {
		created := p.Create.DeepCopy()
		created.SetName(x.step + "-new")
		created.SetLabels(map[string]string{runs.LabelInputDigest: "new"})
		created.SetCreationTimestamp(metav1.NewTime(time.Unix(1000, 0)))
		x.w.applied = append(x.w.applied, created)
		live := created.DeepCopy()
		if s := x.w.status[x.step]; s != nil {
			live.Object["status"] = s
		}
		return step.Got{Live: []*unstructured.Unstructured{live}, Refs: []st.StampedRef{x.ref(created)}, Wrote: true}, nil
	}
	var got step.Got
	for _, u := range p.Apply {
		x.w.applied = append(x.w.applied, u)
		live := u.DeepCopy()
		if s := x.w.status[x.step]; s != nil {
			live.Object["status"] = s
		}
		got.Live, got.Refs = append(got.Live, live), append(got.Refs, x.ref(u))
	}
	got.Wrote = len(p.Apply) > 0
	return got, nil
}

func (fakeIO) ref(u *unstructured.Unstructured) st.StampedRef {
	return st.StampedRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Resource: "configmaps"}
}

func (x fakeIO) remove(p step.Plan) error {
	if len(p.Delete) > 0 && x.w.removeErr != nil {
		return x.w.removeErr
	}
	for _, r := range p.Delete {
		x.w.removed = append(x.w.removed, r.Name)
	}
	return nil
}

// events records the owner's events as "type reason: message".
type events []string

func (e *events) Event(_ *unstructured.Unstructured, typ, reason, msgFmt string, args ...any) {
	*e = append(*e, fmt.Sprintf("%s %s: %s", typ, reason, fmt.Sprintf(msgFmt, args...)))
}

func walkOwner() *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "carto.run/v1alpha1", "kind": "Workload",
		"metadata": map[string]any{"name": "app", "namespace": "dev", "generation": int64(3)},
		"spec":     map[string]any{},
	}}
	o.SetUID(types.UID("uid-1"))
	return o
}

// The chain under test: source (a ConfigMap whose status gives url and
// revision) → image (a ConfigMap reading the source's url, whose status
// gives the image).
var (
	walkChain = []api.Step{
		{Name: "source", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterSourceTemplate, Name: "src"}},
		{Name: "image", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterImageTemplate, Name: "img"},
			Sources: []api.StepInput{{Name: "src", Resource: "source"}}},
	}
	healthy       = &api.HealthRule{AlwaysHealthy: &struct{}{}}
	walkTemplates = map[string]*api.TemplateSpec{
		"src": {URLPath: "status.url", RevisionPath: "status.rev", HealthRule: healthy, Template: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app-src"}}},
		"img": {ImagePath: "status.image", HealthRule: healthy, Template: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app-img"},
			"data": map[string]any{"url": "$(source.url)$"}}},
	}
	sourceReady = map[string]any{"url": "https://git/x", "rev": "r1"}
	imageReady  = map[string]any{"image": "img@d1"}
)

// walk runs the steps stage of an owner over w, after prev (the steps'
// previous statuses).
// walkedOver is what a walk left: the steps' statuses, the requeue and
// error it returns, the events told.
type walkedOver struct {
	res     []st.Resource
	requeue time.Duration
	err     error
	events  events
	keep    *keepSet
	// verifyUntil: until when the status may wait for an input's
	// decision (inputCheck.until).
	verifyUntil time.Time
}

func walk(t *testing.T, w *world, prev []st.Resource, missing ...string) walkedOver {
	t.Helper()
	tmpls := map[string]*api.TemplateSpec{}
	for n, s := range walkTemplates {
		if !slices.Contains(missing, n) {
			tmpls[n] = s
		}
	}
	return walkWith(t, w, prev, walkChain, tmpls)
}

// walkWith runs the steps stage of chain over w.
func walkWith(t *testing.T, w *world, prev []st.Resource, defs []api.Step, tmpls map[string]*api.TemplateSpec) walkedOver {
	t.Helper()
	return walkWithSetup(t, w, prev, defs, tmpls, func(*steps) {})
}

// walkWithSetup runs the steps stage of chain over w, the steps changed by
// setup first.
func walkWithSetup(t *testing.T, w *world, prev []st.Resource, defs []api.Step, tmpls map[string]*api.TemplateSpec, setup func(*steps)) walkedOver {
	t.Helper()
	own := walkOwner()
	doc, err := json.Marshal(own.Object)
	require.NoError(t, err)
	chain := &api.ChainSpec{Resources: defs}
	var ev events
	s := &steps{ctx: context.Background(), owner: own, user: "Workload/dev/app", chainName: "web",
		now: metav1.NewTime(time.Unix(1000, 0)), prev: prev, keep: newKeepSet(), events: &ev,
		prepare: prepare.Env{Flavor: api.WorkloadFlavor, Owner: own, OwnerDoc: doc, ChainName: "web", Chain: chain,
			Options: func(def api.Step) ([]selector.Candidate, error) { return prepare.Options(def) },
			Template: func(_, name string) (*api.TemplateSpec, error) {
				if t, ok := tmpls[name]; ok {
					return t, nil
				}
				return nil, prepare.ErrNotFound
			}},
		io: func(l *step.Lifecycle, sc *stepCtx) stepIO {
			return fakeIO{w: w, step: sc.step.Name, lifecycle: l, sc: sc}
		}, traced: w.traced}
	setup(s)
	res, requeue, err := s.walk(chain.Resources)
	out := walkedOver{res: res, requeue: requeue, err: err, events: ev, keep: s.keep}
	if s.verify != nil {
		out.verifyUntil = s.verify.until
	}
	return out
}

// cond is a step's condition as "Status Reason".
func cond(r st.Resource, typ string) string {
	c := st.Find(r.Conditions, typ)
	if c == nil {
		return ""
	}
	return string(c.Status) + " " + c.Reason
}

func outputNames(r st.Resource) []string {
	var out []string
	for _, o := range r.Outputs {
		out = append(out, o.Name+"="+strings.TrimSpace(o.Preview))
	}
	return out
}

func TestStepsWalk(t *testing.T) {
	forbidden := &stepFail{cond: st.Cond(st.ResourceSubmitted, st.False, step.ReasonRejected, "forbidden")}
	flaky := errors.New("connection reset")
	prevSource := st.Resource{Name: "source", Outputs: []st.Output{{Name: "url", Preview: "https://git/old", Digest: "old"}},
		Conditions: []metav1.Condition{st.Cond(st.Healthy, st.Unknown, "OutputNotAvailable", "")}}
	for _, tt := range []struct {
		name    string
		w       world
		prev    []st.Resource
		missing []string // templates not in the cache
		// want
		submitted [2]string // ResourceSubmitted of source, image
		ready     [2]string
		outputs   [2][]string
		applied   []string // names, in order
		imageURL  string   // what the image step rendered from the source's outputs
		requeue   time.Duration
		err       error
		events    []string
	}{
		{name: "outputs flow downstream, in the chain's order",
			w:         world{status: map[string]map[string]any{"source": sourceReady, "image": imageReady}},
			submitted: [2]string{"True ResourceSubmissionComplete", "True ResourceSubmissionComplete"},
			ready:     [2]string{"True Ready", "True Ready"},
			outputs:   [2][]string{{"url=https://git/x", "revision=r1"}, {"image=img@d1"}},
			applied:   []string{"app-src", "app-img"}, imageURL: "https://git/x"},
		{name: "a step without outputs yet: the next one waits, nothing of it is written",
			w:         world{status: map[string]map[string]any{"image": imageReady}},
			submitted: [2]string{"Unknown MissingValueAtPath", "Unknown MissingValueAtPath"},
			ready:     [2]string{"Unknown MissingValueAtPath", "Unknown MissingValueAtPath"},
			applied:   []string{"app-src"}},
		{name: "a refused write ends its step with its condition (and a Warning); the next one waits",
			w:         world{writeFail: map[string]*stepFail{"source": forbidden}},
			submitted: [2]string{"False TemplateRejectedByAPIServer", "Unknown MissingValueAtPath"},
			ready:     [2]string{"False TemplateRejectedByAPIServer", "Unknown MissingValueAtPath"},
			events:    []string{"Warning TemplateRejectedByAPIServer: step [source]: forbidden"}},
		{name: "a template not in the cache: the step fails with a Warning, earlier steps go on",
			w:         world{status: map[string]map[string]any{"source": sourceReady}},
			missing:   []string{"img"},
			submitted: [2]string{"True ResourceSubmissionComplete", "False TemplateObjectRetrievalFailure"},
			ready:     [2]string{"True Ready", "False TemplateObjectRetrievalFailure"},
			outputs:   [2][]string{{"url=https://git/x", "revision=r1"}},
			applied:   []string{"app-src"},
			events:    []string{"Warning TemplateObjectRetrievalFailure: step [image]: unable to get template [ClusterImageTemplate/img] for step [image]: not found"}},
		{name: "a transient failure is returned for a retry, the soonest requeue wins",
			w: world{status: map[string]map[string]any{"source": sourceReady},
				loadFail: map[string]*stepFail{"image": {cond: st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonUnknownError, "reset"), err: flaky, requeue: time.Second}}},
			submitted: [2]string{"True ResourceSubmissionComplete", "Unknown UnknownError"},
			ready:     [2]string{"True Ready", "Unknown UnknownError"},
			outputs:   [2][]string{{"url=https://git/x", "revision=r1"}},
			applied:   []string{"app-src"}, requeue: time.Second, err: flaky},
		{name: "a new output and a health change are told as events",
			w:         world{status: map[string]map[string]any{"source": sourceReady, "image": imageReady}},
			prev:      []st.Resource{prevSource},
			submitted: [2]string{"True ResourceSubmissionComplete", "True ResourceSubmissionComplete"},
			ready:     [2]string{"True Ready", "True Ready"},
			outputs:   [2][]string{{"url=https://git/x", "revision=r1"}, {"image=img@d1"}},
			applied:   []string{"app-src", "app-img"}, imageURL: "https://git/x",
			events: []string{"Normal ResourceOutputChanged: [app] found a new output in step [source]: url, revision",
				"Normal ResourceHealthyStatusChanged: [app] step [source] Healthy is now True: AlwaysHealthy"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.w
			got := walk(t, &w, tt.prev, tt.missing...)
			res, requeue, err, ev := got.res, got.requeue, got.err, got.events
			require.Len(t, res, 2)
			for i, r := range res {
				assert.Equal(t, walkChain[i].Name, r.Name)
				assert.Equal(t, tt.submitted[i], cond(r, st.ResourceSubmitted), "ResourceSubmitted of %s", r.Name)
				assert.Equal(t, tt.ready[i], cond(r, st.Ready), "Ready of %s", r.Name)
				assert.Equal(t, tt.outputs[i], outputNames(r), "outputs of %s", r.Name)
			}
			var applied []string
			url := ""
			for _, u := range w.applied {
				applied = append(applied, u.GetName())
				if u.GetName() == "app-img" {
					url, _, _ = unstructured.NestedString(u.Object, "data", "url")
				}
				// Every object carries the owner's controller reference and labels.
				assert.Equal(t, "uid-1", string(metav1.GetControllerOf(u).UID))
				assert.Equal(t, "app", u.GetLabels()[api.LabelWorkloadName])
			}
			assert.Equal(t, tt.applied, applied)
			assert.Equal(t, tt.imageURL, url)
			assert.Equal(t, tt.requeue, requeue)
			assert.Equal(t, tt.err, err)
			assert.Equal(t, tt.events, []string(ev))
		})
	}
}

// A step that cannot be prepared keeps pointing at what it stamped: bad
// input never makes the owner forget (and so delete) an object.
func TestStepsWalkKeepsWhatARefusedStepStamped(t *testing.T) {
	old := &st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "app-img", Resource: "configmaps"}
	prev := []st.Resource{{Name: "image", StampedRef: old, Conditions: []metav1.Condition{st.Cond(st.Ready, st.True, "Ready", "")}}}
	w := world{} // the source has no outputs: the image step is refused
	got := walk(t, &w, prev)
	res, ev := got.res, got.events
	require.Len(t, res, 2)
	assert.Equal(t, old, res[1].StampedRef)
	assert.Equal(t, "Unknown MissingValueAtPath", cond(res[1], st.Ready))
	assert.Empty(t, ev, "Unknown is no failure: no Warning")
}

// An immutable step through the same walk: a run per input set, created
// only when the newest run is of other inputs; retention lets old ones go.
func TestStepsWalkImmutable(t *testing.T) {
	build := []api.Step{{Name: "build", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterImageTemplate, Name: "job"}}}
	job := &api.TemplateSpec{Lifecycle: "immutable", ImagePath: "status.image", HealthRule: healthy,
		RetentionPolicy: &api.RetentionPolicy{MaxSuccessfulRuns: 1, MaxFailedRuns: 1},
		Template:        map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"generateName": "build-"}}}
	built := map[string]any{"image": "img@new"}
	for _, tt := range []struct {
		name    string
		runs    []fakeRun
		created bool
		ref     string // the step's stampedRef
		ready   string
		out     []string
		removed []string
	}{
		{name: "no run yet: one is created and serves the outputs", created: true,
			ref: "build-new", ready: "True Ready", out: []string{"image=img@new"}},
		{name: "the newest run is of these inputs: nothing is created",
			runs: []fakeRun{{name: "build-1", current: true, outcome: runs.Succeeded, status: built}},
			ref:  "build-1", ready: "True Ready", out: []string{"image=img@new"}},
		{name: "new inputs: a new run; retention keeps one success, the older ones go", created: true,
			runs: []fakeRun{{name: "build-2", outcome: runs.Succeeded, status: map[string]any{"image": "img@2"}},
				{name: "build-1", outcome: runs.Succeeded, status: map[string]any{"image": "img@1"}}},
			ref: "build-new", ready: "True Ready", out: []string{"image=img@new"}, removed: []string{"build-2", "build-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := world{status: map[string]map[string]any{"build": built}, runs: map[string][]fakeRun{"build": tt.runs}}
			got := walkWith(t, &w, nil, build, map[string]*api.TemplateSpec{"job": job})
			require.NoError(t, got.err)
			require.Len(t, got.res, 1)
			r := got.res[0]
			assert.Equal(t, tt.created, len(w.applied) == 1, "created a run")
			require.NotNil(t, r.StampedRef)
			assert.Equal(t, tt.ref, r.StampedRef.Name)
			assert.Equal(t, tt.ready, cond(r, st.Ready))
			assert.Equal(t, tt.out, outputNames(r))
			assert.Equal(t, tt.removed, w.removed)
			assert.True(t, got.keep.reached["build"], "the step reached its runs: stale-run removal may judge them")
			assert.True(t, got.keep.runs[refKeyOf(*r.StampedRef)], "the run serving the step is kept")
		})
	}
}

// Runs that cannot be removed leave the step's status as decided, and the
// error is returned for a retry.
func TestStepsWalkRemoveFails(t *testing.T) {
	build := []api.Step{{Name: "build", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterImageTemplate, Name: "job"}}}
	job := &api.TemplateSpec{Lifecycle: "immutable", ImagePath: "status.image", HealthRule: healthy,
		RetentionPolicy: &api.RetentionPolicy{MaxSuccessfulRuns: 1, MaxFailedRuns: 1},
		Template:        map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"generateName": "build-"}}}
	gone := errors.New("forbidden to delete")
	w := world{status: map[string]map[string]any{"build": {"image": "img@new"}}, removeErr: gone,
		runs: map[string][]fakeRun{"build": {{name: "build-1", outcome: runs.Succeeded, status: map[string]any{"image": "img@1"}}}}}
	got := walkWith(t, &w, nil, build, map[string]*api.TemplateSpec{"job": job})
	assert.Equal(t, gone, got.err)
	require.Len(t, got.res, 1)
	assert.Equal(t, "True Ready", cond(got.res[0], st.Ready))
	assert.Equal(t, "build-new", got.res[0].StampedRef.Name)
	assert.Empty(t, w.removed)
}

// A pass-through step stamps nothing: it forwards its input's outputs,
// has no Healthy condition, and forgets what it stamped before.
func TestStepsWalkPassThrough(t *testing.T) {
	chain := []api.Step{walkChain[0], {Name: "image", Sources: []api.StepInput{{Name: "src", Resource: "source"}},
		TemplateRef: api.StepTemplateRef{Kind: api.KindClusterSourceTemplate, Options: []api.TemplateOption{
			{PassThrough: "src", Selector: api.OptionSelector{MatchFields: []api.FieldRequirement{{Key: "metadata.name", Operator: "Exists"}}}}}}}}
	old := &st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "app-img", Resource: "configmaps"}
	prev := []st.Resource{{Name: "image", StampedRef: old, TemplateRef: &st.TemplateRef{Kind: api.KindClusterImageTemplate, Name: "img"}}}
	w := world{status: map[string]map[string]any{"source": sourceReady}}
	got := walkWith(t, &w, prev, chain, walkTemplates)
	require.NoError(t, got.err)
	require.Len(t, got.res, 2)
	r := got.res[1]
	assert.Equal(t, "True PassThrough", cond(r, st.ResourceSubmitted))
	assert.Equal(t, "True Ready", cond(r, st.Ready))
	assert.Equal(t, "", cond(r, st.Healthy), "Cartographer gives a pass-through no Healthy")
	assert.Equal(t, []string{"url=https://git/x", "revision=r1"}, outputNames(r))
	assert.Nil(t, r.StampedRef, "a pass-through stamps nothing")
	assert.Nil(t, r.TemplateRef)
	assert.Equal(t, []string{"app-src"}, appliedNames(w.applied))
}

func appliedNames(us []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.GetName())
	}
	return out
}

// Steps that do not read each other are all realized, whatever an earlier
// one met: the soonest requeue and the first error come back.
func TestStepsWalkIndependentSteps(t *testing.T) {
	a, b := walkChain[0], walkChain[0]
	a.Name, b.Name = "a", "b"
	first, second := errors.New("a failed"), errors.New("b failed")
	w := world{loadFail: map[string]*stepFail{
		"a": {cond: st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonUnknownError, "a"), err: first, requeue: 2 * time.Second},
		"b": {cond: st.Cond(st.ResourceSubmitted, st.Unknown, step.ReasonUnknownError, "b"), err: second, requeue: time.Second},
	}}
	got := walkWith(t, &w, nil, []api.Step{a, b}, walkTemplates)
	require.Len(t, got.res, 2)
	assert.Equal(t, first, got.err, "the first error")
	assert.Equal(t, time.Second, got.requeue, "the soonest requeue")
	for _, r := range got.res {
		assert.Equal(t, "Unknown UnknownError", cond(r, st.Ready))
	}
}

// A failure, a health change or new outputs are told once per change: a
// step that fails again the same way, or stays as it was, says nothing.
func TestStepsWalkEventsOncePerChange(t *testing.T) {
	forbidden := &stepFail{cond: st.Cond(st.ResourceSubmitted, st.False, step.ReasonRejected, "forbidden")}
	ready := world{status: map[string]map[string]any{"source": sourceReady, "image": imageReady}}
	failing := world{writeFail: map[string]*stepFail{"source": forbidden}}

	first := walk(t, &failing, nil)
	assert.Len(t, first.events, 1, "the failure is told")
	again := walk(t, &failing, first.res)
	assert.Empty(t, again.events, "the same failure again: nothing new")

	w := ready
	ok := walk(t, &w, nil)
	assert.Empty(t, ok.events, "a first success has nothing to compare with")
	w = ready
	same := walk(t, &w, ok.res)
	assert.Empty(t, same.events, "nothing changed")
	w = world{status: map[string]map[string]any{"source": {"url": "https://git/y", "rev": "r2"}, "image": imageReady}}
	moved := walk(t, &w, ok.res)
	assert.Equal(t, []string{"Normal ResourceOutputChanged: [app] found a new output in step [source]: url, revision"}, []string(moved.events))
}

// A run just created that the cache does not show yet: no second run,
// the step looks again shortly.
func TestStepsWalkImmutablePending(t *testing.T) {
	build := []api.Step{{Name: "build", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterImageTemplate, Name: "job"}}}
	job := &api.TemplateSpec{Lifecycle: "immutable", ImagePath: "status.image", HealthRule: healthy,
		Template: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"generateName": "build-"}}}
	w := world{pending: true}
	got := walkWith(t, &w, nil, build, map[string]*api.TemplateSpec{"job": job})
	require.NoError(t, got.err)
	assert.Empty(t, w.applied, "no second run")
	assert.Equal(t, runs.PendingWait, got.requeue)
}

// TestWalkTraceContext: with traces on, a step writes with the trace
// context of its input set, which is the span the step gets once that set
// ends (spans.Of on the status the walk made); a first step writes with
// none (its revision is what it publishes); with traces off, none at all.
func TestWalkTraceContext(t *testing.T) {
	w := world{status: map[string]map[string]any{"source": sourceReady, "image": imageReady}, traced: true}
	got := walk(t, &w, nil)
	require.NoError(t, got.err)
	assert.Equal(t, "", w.traces["source"])
	require.NotEmpty(t, w.traces["image"])

	ended := spans.Of(spans.Owner{UID: "uid-1"}, nil, got.res, time.Unix(1000, 0))
	var image *spans.Span
	for i := range ended {
		if ended[i].Name == "image" {
			image = &ended[i]
		}
	}
	require.NotNil(t, image, "the image step's set succeeded: %v", ended)
	assert.Equal(t, spans.Format(image.TraceID, image.SpanID), w.traces["image"])

	again := world{status: w.status, traced: true}
	walk(t, &again, got.res)
	assert.Equal(t, w.traces, again.traces, "the same inputs: the same trace context")

	off := world{status: w.status}
	walk(t, &off, nil)
	assert.Equal(t, map[string]string{"source": "", "image": ""}, off.traces)
}

// A step's decisions see its chain step (Observed.Def): a field of it a
// decision reads needs no plumbing of its own.
func TestWalkObservedHasTheChainStep(t *testing.T) {
	w := world{status: map[string]map[string]any{"source": sourceReady, "image": imageReady}}
	require.NoError(t, walk(t, &w, nil).err)
	assert.Equal(t, map[string]string{"source": "source", "image": "image"}, w.defs)
}

// Every lifecycle (reconciler/step) has a writer on the doing side.
func TestEveryLifecycleHasAWriter(t *testing.T) {
	for _, l := range step.Lifecycles() {
		assert.NotNil(t, writers[l.IO], "lifecycle %s: no writer for %q", l.Name, l.IO)
	}
}
