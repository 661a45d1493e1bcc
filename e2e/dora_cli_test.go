package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/cli"
	st "kontinue.dev/kontinue/reconciler/status"
)

// doraOf runs `kontinue dora workload app -o json`.
func doraOf(t *testing.T, ns string) cli.DoraOutput {
	t.Helper()
	code, out, errOut := kontinueCLI(t, "dora", "workload", "app", "-n", ns, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var d cli.DoraOutput
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	require.Equal(t, "DORA", d.Kind)
	require.Empty(t, d.Notes)
	return d
}

// TestDoraCLI: `kontinue dora` over TestHistory's four commits (c1
// through, c2 failed at the build, c3 superseded, c4 through). With the
// chain's default deployment step (its last, deploy) there are two
// deployments and no failure; once the chain names build a deployment
// step too (deploymentSteps), c2 is a failed deployment that c4 restored.
func TestDoraCLI(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, provChain(ns))
	apply(t, ns, provWorkload(ns, "c1"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c1", "spec", "commit"))
	build(t, ns, "True", "img-c1")
	waitDeployed(t, ns, "img-c1")
	waitProvenance(t, ns, "deploy", func(p st.Provenance) string { return setIs(p.Current, "", st.OutcomeSucceeded) })
	fourCommits(t, ns)

	var d cli.DoraOutput
	eventually(t, 30*time.Second, func() string {
		d = doraOf(t, ns)
		if len(d.Rows) != 1 || d.Rows[0].Deployments != 2 {
			return fmt.Sprintf("rows %+v: want c1's and c4's deployments", d.Rows)
		}
		return ""
	})
	r := d.Rows[0]
	assert.Equal(t, ns, r.Namespace)
	assert.Equal(t, uniq(ns, "prov"), r.Chain)
	assert.Equal(t, 1, r.Owners)
	assert.Equal(t, 0, r.Failed, "c2 failed at the build, not at a deployment step")
	assert.Equal(t, 0.0, r.ChangeFailureRate)
	assert.Equal(t, 2, r.LeadTimes, "both deployments' revisions were seen from their source step")
	assert.Equal(t, 0, r.Restores)
	assert.InDelta(t, 2.0/30, r.PerDay, 1e-9, "two deployments over the default 30 days")

	// The build counts as a deployment step too: c2 failed, c4 restored.
	chain := get(t, chainGVR, "", uniq(ns, "prov"))
	require.NoError(t, unstructured.SetNestedStringSlice(chain.Object, []string{"build", "deploy"}, "spec", "deploymentSteps"))
	_, err := env.dyn.Resource(chainGVR).Update(t.Context(), chain, metav1.UpdateOptions{})
	require.NoError(t, err)
	d = doraOf(t, ns)
	r = d.Rows[0]
	assert.Equal(t, 2, r.Deployments)
	assert.Equal(t, 1, r.Failed, "c2's build failed")
	assert.InDelta(t, 1.0/3, r.ChangeFailureRate, 1e-9)
	assert.Equal(t, 1, r.Restores, "c4 ended c2's failure (c1's deployment and c2's failure are often in the same second)")
	assert.Positive(t, r.RestoreMedian)

	// The text form names the chain and the four numbers.
	code, out, errOut := kontinueCLI(t, "dora", "-n", ns, "--chain", uniq(ns, "prov"))
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "CHANGE FAILURE RATE")
	assert.Contains(t, out, uniq(ns, "prov"))
	assert.Contains(t, out, "33%")

	// The dashboard's chain page shows the same four numbers (api/dora).
	url := startDashboard(t, "--kubeconfig", env.kubeconfig)
	var api cli.DoraOutput
	eventually(t, 20*time.Second, func() string {
		resp, err := http.Get(url + "api/dora?kind=ClusterSupplyChain&name=" + uniq(ns, "prov"))
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&api); err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("%d %v", resp.StatusCode, err)
		}
		if len(api.Rows) != 1 {
			return fmt.Sprintf("rows %+v: the dashboard's caches have not synced", api.Rows)
		}
		return ""
	})
	want := doraOf(t, ns).Rows[0]
	assert.Equal(t, want, api.Rows[0], "the dashboard's numbers are the CLI's")
	assert.Empty(t, api.Notes)

	b := startBrowser(t)
	b.navigate(url + "#/chain/ClusterSupplyChain/" + uniq(ns, "prov"))
	cell := func(what string) string {
		return `(document.querySelector('#dora tr[data-namespace="` + ns + `"] td[data-dora="` + what + `"]') || {}).innerText || ''`
	}
	eventually(t, 20*time.Second, func() string {
		if got := b.evalString(cell("failure")); got != "33% (1 failed)" {
			return "change failure rate shown: " + got
		}
		return ""
	})
	assert.Equal(t, fmt.Sprintf("%.2f / day (2)", want.PerDay), b.evalString(cell("frequency")))
	assert.Regexp(t, `^\d+(m\d+)?s$|^\d+m$`, b.evalString(cell("lead")), "a lead time")
	assert.Regexp(t, `^\d+(m\d+)?s$|^\d+m$`, b.evalString(cell("restore")), "a time to restore")
}
