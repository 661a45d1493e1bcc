package dora

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func at(s int) *metav1.Time { t := metav1.NewTime(t0.Add(time.Duration(s) * time.Second)); return &t }

const repo = "https://git.example/app.git"

func outs(when int, kv ...string) []st.Output {
	var out []st.Output
	for i := 0; i < len(kv); i += 2 {
		p, d := st.Preview(kv[i+1])
		out = append(out, st.Output{Name: kv[i], Preview: p, Digest: d, LastTransitionTime: *at(when)})
	}
	return out
}

// A chain source → build → deploy (a ClusterDeploymentTemplate, last), as
// the controller's statuses show it write after write.
type world struct {
	commit     string
	commitAt   int
	build      st.Provenance
	image      string
	imageAt    int
	deploy     st.Provenance
	shadow     bool
	readyFalse *metav1.Time
}

func (w world) status() []st.Resource {
	src := st.Resource{Name: "source", TemplateRef: &st.TemplateRef{Kind: api.KindClusterSourceTemplate},
		Outputs: outs(w.commitAt, "url", repo, "revision", w.commit),
		Provenance: &st.Provenance{Current: &st.InputSet{Digest: "src-" + w.commit, TakenAt: at(w.commitAt), EndedAt: at(w.commitAt),
			Outcome: st.OutcomeSucceeded}}}
	b := st.Resource{Name: "build", TemplateRef: &st.TemplateRef{Kind: api.KindClusterImageTemplate}, Inputs: []st.Input{{Name: "source"}},
		Provenance: copyProv(w.build)}
	if w.image != "" {
		b.Outputs = outs(w.imageAt, "image", w.image)
	}
	d := st.Resource{Name: "deploy", TemplateRef: &st.TemplateRef{Kind: api.KindClusterDeploymentTemplate}, Inputs: []st.Input{{Name: "build"}},
		Provenance: copyProv(w.deploy)}
	if w.shadow {
		d.ServedBy = "shadow"
	}
	if w.readyFalse != nil {
		d.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "DeployFailed", Message: "rollout failed",
			LastTransitionTime: *w.readyFalse}}
	}
	return []st.Resource{src, b, d}
}

func copyProv(p st.Provenance) *st.Provenance {
	if p.Current == nil && p.Latest == nil && p.Held == nil {
		return nil
	}
	c := p
	return &c
}

func buildSet(commit, outcome string, taken, ended int) *st.InputSet {
	s := &st.InputSet{Digest: "b-" + commit, Sources: []st.SourceValue{{Name: "source", Resource: "source", URL: repo, Revision: commit}},
		TakenAt: at(taken), Outcome: outcome}
	if ended >= 0 {
		s.EndedAt = at(ended)
	}
	return s
}

func deploySet(image, outcome string, taken, ended int) *st.InputSet {
	s := &st.InputSet{Digest: "d-" + image, Images: []st.ImageValue{{Name: "image", Resource: "build", Image: image}},
		TakenAt: at(taken), Outcome: outcome}
	if ended >= 0 {
		s.EndedAt = at(ended)
	}
	return s
}

// script is the scripted history: c1 deployed (lead 200 s); c2's and
// c3's deployments fail (a shadow serves c1 meanwhile); c4 deploys (lead
// 400 s), restoring 2,200 s after c2 failed; c5 deploys (lead 900 s).
func script() [][]st.Resource {
	var out [][]st.Resource
	w := world{commit: "c1", commitAt: 0}
	snap := func() { out = append(out, w.status()) }
	w.build = st.Provenance{Latest: buildSet("c1", st.OutcomeProcessing, 10, -1)}
	snap()
	w.build, w.image, w.imageAt = st.Provenance{Current: buildSet("c1", st.OutcomeSucceeded, 10, 100)}, "img:1", 100
	w.deploy = st.Provenance{Latest: deploySet("img:1", st.OutcomeProcessing, 110, -1)}
	snap()
	w.deploy = st.Provenance{Current: deploySet("img:1", st.OutcomeSucceeded, 110, 200)}
	snap()
	good := w.deploy.Current
	for i, c := range []struct {
		commit string
		base   int
		fails  bool
		end    int
	}{{"c2", 1000, true, 1200}, {"c3", 2000, true, 2200}, {"c4", 3000, false, 3400}, {"c5", 5000, false, 5900}} {
		img := "img:" + c.commit[1:]
		w.commit, w.commitAt = c.commit, c.base
		w.build.Latest = buildSet(c.commit, st.OutcomeProcessing, c.base+10, -1)
		snap()
		w.build, w.image, w.imageAt = st.Provenance{Current: buildSet(c.commit, st.OutcomeSucceeded, c.base+10, c.base+100)}, img, c.base+100
		w.deploy = st.Provenance{Current: good, Latest: deploySet(img, st.OutcomeProcessing, c.base+110, -1)}
		snap()
		if c.fails {
			w.deploy.Latest = deploySet(img, st.OutcomeFailed, c.base+110, c.end)
			w.shadow = true
			if w.readyFalse == nil {
				w.readyFalse = at(c.end)
			}
		} else {
			good = deploySet(img, st.OutcomeSucceeded, c.base+110, c.end)
			w.deploy = st.Provenance{Current: good}
			w.shadow, w.readyFalse = false, nil
		}
		snap()
		_ = i
	}
	return out
}

var want = Numbers{Deployments: 3, Failed: 2, Shadowed: 2, PerDay: 1.5, LeadTimes: 3,
	LeadTimeMedian: 400 * time.Second, LeadTimeMean: 500 * time.Second, ChangeFailureRate: 0.4,
	Restores: 1, TimeToRestoreMedian: 2200 * time.Second, TimeToRestoreMean: 2200 * time.Second}

// TestScriptedHistory: the same scripted history gives the same
// deployments and the exact four numbers, observed write by write (the
// metrics) and read back from the owner's history (kontinue dora).
func TestScriptedHistory(t *testing.T) {
	writes := script()
	steps := StepsOf(writes[0], nil)
	require.Equal(t, map[string]bool{"deploy": true}, steps)

	obs := NewObserver()
	var observed []Deployment
	h := history.History{}
	for i := 1; i < len(writes); i++ {
		observed = append(observed, obs.Observe("uid", writes[i-1], writes[i], steps, t0.Add(time.Hour*2))...)
		h, _ = history.Apply(h, history.Events(writes[i-1], writes[i], t0.Add(2*time.Hour)), 10)
	}
	recorded := FromHistory(history.View(h, writes[len(writes)-1], 10), steps)

	for name, deps := range map[string][]Deployment{"observed": observed, "history": recorded} {
		t.Run(name, func(t *testing.T) {
			require.Len(t, deps, 5)
			assert.Equal(t, []bool{false, true, true, false, false}, []bool{deps[0].Failed, deps[1].Failed, deps[2].Failed, deps[3].Failed, deps[4].Failed})
			assert.Equal(t, at(3400).Time, deps[3].At)
			assert.Equal(t, 2200*time.Second, deps[3].Restore)
			assert.Equal(t, 900*time.Second, deps[4].Lead)
			assert.True(t, deps[1].Shadowed)
			got := Summarize(deps, t0, t0.Add(48*time.Hour))
			assert.Equal(t, want, got)
		})
	}
	assert.Equal(t, Numbers{}, Summarize(observed, t0.Add(-time.Hour), t0), "nothing before the window")
	one := Summarize(observed, t0, t0.Add(1000*time.Second))
	assert.Equal(t, 1, one.Deployments)
	assert.Zero(t, one.ChangeFailureRate)
}

// TestObserverAfterRestart: an Observer that saw none of the failures
// (a restart) starts them at what the last status shows.
func TestObserverAfterRestart(t *testing.T) {
	writes := script()
	steps := StepsOf(writes[0], nil)
	// The writes of c4: its recovery, seen by a fresh Observer.
	i := 11
	deps := NewObserver().Observe("uid", writes[i-1], writes[i], steps, t0)
	require.Len(t, deps, 1)
	assert.False(t, deps[0].Failed)
	assert.Equal(t, 2200*time.Second, deps[0].Restore, "from the deploy step's Ready False since c2 failed: the status no longer shows a failed set")
}

func TestSteps(t *testing.T) {
	chain := []api.Step{{Name: "source", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterSourceTemplate}},
		{Name: "deploy", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterDeploymentTemplate}},
		{Name: "smoke", TemplateRef: api.StepTemplateRef{Kind: api.KindClusterTemplate}}}
	assert.Equal(t, map[string]bool{"deploy": true, "smoke": true}, Steps(chain, nil))
	assert.Equal(t, map[string]bool{"deploy": true}, Steps(chain, []string{"deploy"}))
	assert.Equal(t, map[string]bool{"writer": true}, Steps([]api.Step{{Name: "src"}, {Name: "writer"}}, nil))
	assert.Empty(t, Steps(nil, nil))
}

// TestTwoDeploymentSteps: a revision is deployed once every deployment
// step succeeded with it, and counted once; one failing is its failure.
func TestTwoDeploymentSteps(t *testing.T) {
	h := history.History{Revisions: []history.Revision{
		{Roots: []history.Root{{Key: "source@1", Label: "c1"}}, Since: at(0), Steps: []history.Cell{
			{Step: "deploy", Outcome: st.OutcomeSucceeded, EndedAt: at(100)}, {Step: "smoke", Outcome: st.OutcomeSucceeded, EndedAt: at(150)}}},
		{Roots: []history.Root{{Key: "source@2", Label: "c2"}}, Since: at(200), Steps: []history.Cell{
			{Step: "deploy", Outcome: st.OutcomeSucceeded, EndedAt: at(300)}, {Step: "smoke", Outcome: st.OutcomeFailed, EndedAt: at(320)}}},
		{Roots: []history.Root{{Key: "source@3", Label: "c3"}}, Since: at(400), Steps: []history.Cell{
			{Step: "deploy", Outcome: st.OutcomeSucceeded, EndedAt: at(500)}}},
	}}
	deps := FromHistory(h, map[string]bool{"deploy": true, "smoke": true})
	require.Len(t, deps, 2, "c3 is not deployed until smoke succeeds")
	assert.Equal(t, Deployment{Revision: "source@1", Label: "c1", At: at(150).Time, Lead: 150 * time.Second, Step: "smoke"}, deps[0])
	assert.True(t, deps[1].Failed)
	assert.Equal(t, "smoke", deps[1].Step)
}

// TestSameSecond: a success and the next revision's failure in the same
// second (status times are whole seconds) keep the revisions' order
// (History is newest first): the later success restores the failure.
func TestSameSecond(t *testing.T) {
	h := history.History{Revisions: []history.Revision{
		{Roots: []history.Root{{Key: "source@4", Label: "c4"}}, Since: at(10), Steps: []history.Cell{
			{Step: "deploy", Outcome: st.OutcomeSucceeded, EndedAt: at(12)}}},
		{Roots: []history.Root{{Key: "source@2", Label: "c2"}}, Since: at(10), Steps: []history.Cell{
			{Step: "deploy", Outcome: st.OutcomeFailed, EndedAt: at(10)}}},
		{Roots: []history.Root{{Key: "source@1", Label: "c1"}}, Since: at(9), Steps: []history.Cell{
			{Step: "deploy", Outcome: st.OutcomeSucceeded, EndedAt: at(10)}}},
	}}
	deps := FromHistory(h, map[string]bool{"deploy": true})
	require.Len(t, deps, 3)
	assert.Equal(t, []string{"c1", "c2", "c4"}, []string{deps[0].Label, deps[1].Label, deps[2].Label})
	assert.Equal(t, 2*time.Second, deps[2].Restore, "c4 restored c2")
	n := Summarize(deps, t0, t0.Add(time.Hour))
	assert.Equal(t, 1, n.Restores)
}
