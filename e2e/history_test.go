package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// historyOf runs `kontinue history workload app -o json`.
func historyOf(t *testing.T, ns string) (steps []string, rows map[string]map[string]history.Cell, order []string) {
	t.Helper()
	code, out, errOut := kontinueCLI(t, "history", "workload", "app", "-n", ns, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var h struct {
		Kind      string
		Steps     []string
		Revisions []history.Revision
		Notes     []string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &h), out)
	require.Equal(t, "History", h.Kind)
	require.Empty(t, h.Notes)
	rows = map[string]map[string]history.Cell{}
	for _, r := range h.Revisions {
		label := strings.TrimPrefix(r.Label(), "https://git.example/app.git@")
		order = append(order, label)
		rows[label] = map[string]history.Cell{}
		for _, c := range r.Steps {
			rows[label][c.Step] = c
		}
	}
	return h.Steps, rows, order
}

// TestHistory: TestProvenance's four commits (c1 through, c2 failed at the
// build, c3 held then superseded by c4, c4 through) as the owner's
// history: each revision and how each step fared, read with the caller's
// identity; written only as sets leave the status (nothing for the first
// revision), and nothing more when Kontinue restarts.
func TestHistory(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, provChain(ns))
	apply(t, ns, provWorkload(ns, "c1"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c1", "spec", "commit"))
	build(t, ns, "True", "img-c1")
	waitDeployed(t, ns, "img-c1")
	waitProvenance(t, ns, "deploy", func(p st.Provenance) string { return setIs(p.Current, "", st.OutcomeSucceeded) })
	_, err := tryGet(configMapGVR, ns, history.Name("Workload", "app"))
	assert.True(t, err != nil && strings.Contains(err.Error(), "not found"), "the first revision is all in the status: no history written (%v)", err)
	steps, rows, order := historyOf(t, ns)
	assert.Equal(t, []string{"source", "build", "deploy"}, steps)
	assert.Equal(t, []string{"c1"}, order, "read from the status")

	fourCommits(t, ns)

	eventually(t, 20*time.Second, func() string {
		_, rows, order = historyOf(t, ns)
		if strings.Join(order, ",") != "c4,c3,c2,c1" {
			return fmt.Sprintf("revisions %v, want c4,c3,c2,c1", order)
		}
		if rows["c1"]["deploy"].Outcome != st.OutcomeSucceeded {
			return fmt.Sprintf("c1 %+v: its deploy not recorded yet", rows["c1"])
		}
		return ""
	})
	outcomes := func(rev string) string {
		var out []string
		for _, s := range steps {
			c, ok := rows[rev][s]
			if !ok {
				out = append(out, s+"=-")
				continue
			}
			out = append(out, s+"="+c.Outcome)
		}
		return strings.Join(out, " ")
	}
	assert.Equal(t, "source=Succeeded build=Succeeded deploy=Succeeded", outcomes("c4"))
	assert.Equal(t, "source=Succeeded build=Superseded deploy=-", outcomes("c3"))
	assert.Equal(t, "source=Succeeded build=Failed deploy=-", outcomes("c2"))
	assert.Equal(t, "source=Succeeded build=Succeeded deploy=Succeeded", outcomes("c1"))
	c2 := rows["c2"]["build"]
	assert.NotEmpty(t, c2.Reason, "a failure keeps the step's reason")
	require.NotNil(t, c2.TakenAt)
	require.NotNil(t, c2.EndedAt)
	c4 := rows["c4"]["build"]
	require.NotNil(t, c4.TakenAt)
	require.NotNil(t, c4.EndedAt)
	assert.GreaterOrEqual(t, c4.EndedAt.Sub(c4.TakenAt.Time), time.Second, "c4's build took the second the test waited")

	// The history object: beside the owner, owned by it, bounded, and
	// holding only what left the status (c4 is all still there).
	cm := get(t, configMapGVR, ns, history.Name("Workload", "app"))
	w := get(t, workloadGVR, ns, "app")
	require.Len(t, cm.GetOwnerReferences(), 1)
	assert.Equal(t, w.GetUID(), cm.GetOwnerReferences()[0].UID)
	assert.Equal(t, "workload", cm.GetLabels()[history.LabelHistory])
	stored, err := history.Decode(cm)
	require.NoError(t, err)
	var labels []string
	for _, r := range stored.Revisions {
		labels = append(labels, strings.TrimPrefix(r.Label(), "https://git.example/app.git@"))
	}
	assert.Equal(t, []string{"c3", "c2", "c1"}, labels)
	t.Logf("history: %d bytes for %d revisions of 3 steps, resourceVersion %s", len(nested(cm.Object, "data", history.DataKey).(string)), len(labels), cm.GetResourceVersion())

	// A restart writes nothing: not the history, not the owner.
	require.False(t, env.external, "the restart needs Kontinue in this process")
	key := reconciler.Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: ns, Name: "app"}}
	env.kontinue.stop()
	restarted := time.Now()
	env.kontinue = startKontinue(env.cfg)
	eventually(t, 30*time.Second, func() string {
		if len(reconciles.since(key, restarted)) == 0 {
			return "the restarted Kontinue has not reconciled the workload"
		}
		return ""
	})
	time.Sleep(2 * time.Second)
	assert.Equal(t, cm.GetResourceVersion(), get(t, configMapGVR, ns, history.Name("Workload", "app")).GetResourceVersion(), "history written on restart")
	assert.Equal(t, w.GetResourceVersion(), get(t, workloadGVR, ns, "app").GetResourceVersion(), "owner written on restart")
}

// fourCommits takes provChain's workload, deployed at c1, through c2
// (fails at the build), c3 (held, then superseded) and c4 (deployed).
func fourCommits(t *testing.T, ns string) {
	t.Helper()
	apply(t, ns, provWorkload(ns, "c2"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c2", "spec", "commit"))
	apply(t, ns, provWorkload(ns, "c3"))
	waitProvenance(t, ns, "build", func(p st.Provenance) string { return setIs(p.Held, "c3", st.OutcomeHeld) })
	apply(t, ns, provWorkload(ns, "c4"))
	waitProvenance(t, ns, "build", func(p st.Provenance) string { return setIs(p.Held, "c4", st.OutcomeHeld) })
	build(t, ns, "False", "img-broken")
	waitFor(t, testGVR, ns, "app-build", fieldIs("c4", "spec", "commit"))
	time.Sleep(time.Second) // whole seconds: c4's build takes at least one
	build(t, ns, "True", "img-c4")
	waitDeployed(t, ns, "img-c4")
	waitProvenance(t, ns, "deploy", func(p st.Provenance) string {
		if p.Current == nil || len(p.Current.Images) == 0 || p.Current.Images[0].Image != "img-c4" {
			return "deploy has not taken img-c4"
		}
		return ""
	})

}
