package owner

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/selector"
	"kontinue.dev/kontinue/reconciler/specs"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// templates serves walkTemplates (Env.Templates), less the missing ones.
type templates struct{ missing map[string]bool }

func (templates) Options(_, _ string, def api.Step) ([]selector.Candidate, error) {
	return prepare.Options(def)
}

func (t templates) Template(_, name string) (*api.TemplateSpec, error) {
	if s, ok := walkTemplates[name]; ok && !t.missing[name] {
		return s, nil
	}
	return nil, prepare.ErrNotFound
}

func (t templates) Exists(kind, name string) bool {
	_, err := t.Template(kind, name)
	return err == nil
}

// owned is an owner over walkChain, loaded (its chain chosen, ready to
// walk), whose steps write to w (a fake port).
type owned struct {
	env *Env
	l   *loaded
	x   *ownerIO
	w   *world
}

func loadedOwner(t *testing.T, w *world, env Env, prev st.OwnerStatus) (*owned, *events) {
	t.Helper()
	own := walkOwner()
	doc, err := json.Marshal(own.Object)
	require.NoError(t, err)
	ev := &events{}
	env.Flavor, env.Events = api.WorkloadFlavor, ev
	if env.Templates == nil {
		env.Templates = templates{}
	}
	l := &loaded{owner: own, user: "Workload/dev/app", doc: doc, now: metav1.NewTime(time.Unix(1000, 0)), prev: prev,
		chainName: "web", chain: &specs.Chain{Name: "web", RV: "1", Spec: api.ChainSpec{Resources: walkChain}},
		walk: true, chainReady: st.Cond(api.WorkloadFlavor.ChainReadyCondition, st.True, "Ready", "")}
	l.defs = liveDefs(&env, l.chain)
	x := &ownerIO{ctx: context.Background(), keep: newKeepSet(), owner: own, user: l.user, records: &records{prev: prev},
		steps: newStepObjects(walkChain, nil, own.GetUID())}
	return &owned{env: &env, l: l, x: x, w: w}, ev
}

// steps runs the steps stage, then the fold.
func (o *owned) steps() (walked, st.OwnerStatus) {
	wk := walkSteps(context.Background(), o.env, o.l, o.x, func(_ *step.Lifecycle, sc *stepCtx) stepIO { return fakeIO{w: o.w, step: sc.step.Name, sc: sc} })
	return wk, fold(o.env, o.l, wk)
}

// conds are the owner's conditions as "Type Status Reason", in order.
func conds(s st.OwnerStatus) []string {
	var out []string
	for _, c := range s.Conditions {
		out = append(out, c.Type+" "+string(c.Status)+" "+c.Reason)
	}
	return out
}

// The fold: the owner's conditions summed up from its steps', in the
// contract's order, Ready last (then kstatus's when on).
func TestPassFold(t *testing.T) {
	forbidden := &stepFail{cond: st.Cond(st.ResourceSubmitted, st.False, step.ReasonRejected, "forbidden")}
	for _, tt := range []struct {
		name    string
		w       world
		kstatus bool
		want    []string
	}{
		{name: "every step ready",
			w: world{status: map[string]map[string]any{"source": sourceReady, "image": imageReady}},
			want: []string{"SupplyChainReady True Ready", "ResourcesSubmitted True ResourceSubmissionComplete",
				"ResourcesHealthy True HealthyConditionRule", "Ready True Ready"}},
		{name: "a healthy step without its outputs yet: the owner is Unknown, healthy",
			w: world{status: map[string]map[string]any{"source": sourceReady}},
			want: []string{"SupplyChainReady True Ready", "ResourcesSubmitted Unknown MissingValueAtPath",
				"ResourcesHealthy True HealthyConditionRule", "Ready Unknown MissingValueAtPath"}},
		{name: "a step refused: the owner is False with its reason",
			w: world{writeFail: map[string]*stepFail{"source": forbidden}},
			want: []string{"SupplyChainReady True Ready", "ResourcesSubmitted False TemplateRejectedByAPIServer",
				"ResourcesHealthy Unknown HealthyConditionRule", "Ready False TemplateRejectedByAPIServer"}},
		{name: "kstatus: Stalled after a False Ready", kstatus: true,
			w: world{writeFail: map[string]*stepFail{"source": forbidden}},
			want: []string{"SupplyChainReady True Ready", "ResourcesSubmitted False TemplateRejectedByAPIServer",
				"ResourcesHealthy Unknown HealthyConditionRule", "Ready False TemplateRejectedByAPIServer", "Stalled True TemplateRejectedByAPIServer"}},
		{name: "kstatus: Reconciling while Unknown", kstatus: true,
			w: world{status: map[string]map[string]any{"source": sourceReady}},
			want: []string{"SupplyChainReady True Ready", "ResourcesSubmitted Unknown MissingValueAtPath",
				"ResourcesHealthy True HealthyConditionRule", "Ready Unknown MissingValueAtPath", "Reconciling True MissingValueAtPath"}},
		{name: "kstatus: nothing more when Ready", kstatus: true,
			w: world{status: map[string]map[string]any{"source": sourceReady, "image": imageReady}},
			want: []string{"SupplyChainReady True Ready", "ResourcesSubmitted True ResourceSubmissionComplete",
				"ResourcesHealthy True HealthyConditionRule", "Ready True Ready"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.w
			o, _ := loadedOwner(t, &w, Env{Kstatus: tt.kstatus}, st.OwnerStatus{})
			wk, status := o.steps()
			require.NoError(t, wk.err)
			assert.Equal(t, tt.want, conds(status))
			require.Len(t, status.Resources, 2)
			// What the steps point at now is what removal keeps.
			for _, r := range status.Resources {
				if r.StampedRef != nil {
					assert.True(t, o.x.keep.has(refKeyOf(*r.StampedRef)), "keeps %s", r.StampedRef.Name)
				}
			}
		})
	}
}

// The owner's ResourcesHealthy is the steps' Healthy summed up as
// Cartographer does (its condition manager): the last False step's
// message, else the first Unknown one's, as the step wrote it; the reason
// is always HealthyConditionRule.
func TestHealthySummary(t *testing.T) {
	h := func(name string, status metav1.ConditionStatus, msg string) st.Resource {
		return st.Resource{Name: name, Conditions: []metav1.Condition{st.Cond(st.Healthy, status, "R"+name, msg)}}
	}
	pass := st.Resource{Name: "pass"} // a pass-through has no Healthy
	tests := []struct {
		name   string
		res    []st.Resource
		status metav1.ConditionStatus
		msg    string
	}{
		{"every step healthy", []st.Resource{h("a", st.True, "fine"), pass}, st.True, ""},
		{"no step with a Healthy condition", []st.Resource{pass}, st.True, ""},
		{"one unhealthy: its message, bare", []st.Resource{h("a", st.True, ""), h("image", st.False, "build failed"), pass}, st.False, "build failed"},
		{"several unhealthy: the last one's", []st.Resource{h("a", st.False, "first"), h("b", st.Unknown, "waiting"), h("c", st.False, "last")}, st.False, "last"},
		{"unknown only: the first one's", []st.Resource{h("a", st.True, ""), h("b", st.Unknown, "first"), h("c", st.Unknown, "second")}, st.Unknown, "first"},
		{"a reason Cartographer says nothing for: no message", []st.Resource{{Name: "img", Conditions: []metav1.Condition{
			st.Cond(st.Healthy, st.Unknown, "OutputNotAvailable", `waiting for outputs: no value at path ".status.latestImage"`)}}}, st.Unknown, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hl := healthySummary(tt.res)
			assert.Equal(t, tt.status, hl.Status)
			assert.Equal(t, step.ReasonHealthyConditionRule, hl.Reason, "Cartographer's one reason, whatever the steps say")
			assert.Equal(t, tt.msg, hl.Message)
		})
	}
}

// An owner whose service account does not exist writes nothing and says
// so: ServiceAccountError, told once (not again while nothing changed).
func TestPassAccountMissing(t *testing.T) {
	sa := api.ServiceAccountRef{Namespace: "dev", Name: "gone"}
	o, ev := loadedOwner(t, &world{}, Env{}, st.OwnerStatus{})
	o.l.accountMissing(o.env, sa)
	assert.True(t, o.l.noAccount)
	assert.Equal(t, []string{"SupplyChainReady True Ready", "ResourcesSubmitted False ServiceAccountError",
		"ResourcesHealthy True HealthyConditionRule", "Ready False ServiceAccountError"}, conds(o.l.status), "no step: nothing unhealthy")
	require.Len(t, *ev, 1)
	assert.Contains(t, (*ev)[0], "Warning ServiceAccountError: ")

	again, ev2 := loadedOwner(t, &world{}, Env{}, o.l.status)
	again.l.accountMissing(again.env, sa)
	assert.Empty(t, *ev2, "told once per change")
}

// An owner that cannot be realized keeps the chain it had when none is
// chosen, names the one chosen otherwise.
func TestPassFail(t *testing.T) {
	prev := st.OwnerStatus{SupplyChainRef: &st.ObjectRef{Kind: api.KindClusterSupplyChain, Name: "old"}}
	o, _ := loadedOwner(t, &world{}, Env{}, prev)
	o.l.fail(o.env, "SupplyChainReady", "SupplyChainNotFound", "no supply chain")
	assert.Equal(t, []string{"SupplyChainReady False SupplyChainNotFound", "Ready False SupplyChainNotFound"}, conds(o.l.status))
	assert.Equal(t, "old", o.l.status.SupplyChainRef.Name)

	o, _ = loadedOwner(t, &world{}, Env{}, prev)
	o.l.status.SupplyChainRef = &st.ObjectRef{Kind: api.KindClusterSupplyChain, Name: "new"}
	o.l.fail(o.env, "SupplyChainReady", "InvalidChain", "bad")
	assert.Equal(t, "new", o.l.status.SupplyChainRef.Name)
}
