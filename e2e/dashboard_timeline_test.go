package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	st "kontinue.dev/kontinue/reconciler/status"
)

// TestDashboardTimeline: an owner's page shows its revisions as rows and
// its steps as columns, each cell in the colour of how the step fared
// (TestHistory's four commits: c4 and c1 through, c2 failed at the build,
// c3 superseded), and each step's card its provenance.
func TestDashboardTimeline(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, provChain(ns))
	apply(t, ns, provWorkload(ns, "c1"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c1", "spec", "commit"))
	build(t, ns, "True", "img-c1")
	waitDeployed(t, ns, "img-c1")
	waitProvenance(t, ns, "deploy", func(p st.Provenance) string { return setIs(p.Current, "", st.OutcomeSucceeded) })

	url := startDashboard(t, "--kubeconfig", env.kubeconfig)
	b := startBrowser(t)
	b.navigate(url + "#/owner/Workload/" + ns + "/app")
	rowsJS := `Array.from(document.querySelectorAll('#timeline tr[data-revision]')).map((r) => r.dataset.revision.replace('https://git.example/app.git@', '') + ':' +
		Array.from(r.querySelectorAll('td.tl')).map((c) => c.dataset.step + '=' + (c.dataset.outcome || '-')).join(',')).join(' | ')`
	eventually(t, 20*time.Second, func() string {
		if got := b.evalString(rowsJS); got != "c1:source=Succeeded,build=Succeeded,deploy=Succeeded" {
			return "timeline " + got
		}
		return ""
	})

	// The page follows the owner: the later commits show as they happen.
	fourCommits(t, ns)
	want := "c4:source=Succeeded,build=Succeeded,deploy=Succeeded | c3:source=Succeeded,build=Superseded,deploy=- | " +
		"c2:source=Succeeded,build=Failed,deploy=- | c1:source=Succeeded,build=Succeeded,deploy=Succeeded"
	eventually(t, 20*time.Second, func() string {
		if got := b.evalString(rowsJS); got != want {
			return "timeline " + got
		}
		return ""
	})
	cell := func(rev, step string) string {
		return `document.querySelector('#timeline tr[data-revision="https://git.example/app.git@` + rev + `"] td[data-step="` + step + `"]')`
	}
	require.Equal(t, "rgb(254, 226, 226)", b.evalString(`getComputedStyle(`+cell("c2", "build")+`).backgroundColor`), "a failure in --fail-bg")
	require.Equal(t, "rgb(220, 252, 231)", b.evalString(`getComputedStyle(`+cell("c4", "deploy")+`).backgroundColor`), "a success in --ok-bg")
	require.Equal(t, "rgb(226, 232, 240)", b.evalString(`getComputedStyle(`+cell("c3", "build")+`).backgroundColor`), "superseded in grey")
	require.Regexp(t, `^Succeeded \d+s$`, b.evalString(cell("c4", "build")+`.innerText`), "with how long the step took")
	require.NotEmpty(t, b.evalString(cell("c2", "build")+`.querySelector('.tl-reason').innerText`), "the failure's reason")

	// Provenance on the cards: what the build made its image from.
	card := b.evalString(`document.querySelector('.card[data-step="build"]').innerText`)
	require.Contains(t, card, "current")
	require.Contains(t, card, "source: https://git.example/app.git@c4")
	require.Contains(t, b.evalString(`document.querySelector('.card[data-step="deploy"]').innerText`), "build: img-c4")
	shot := b.screenshot("_output/dashboard/timeline.png")
	if os.Getenv("KONTINUE_UPDATE_DOCS_IMG") == "true" {
		png, err := os.ReadFile(shot)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(env.root, "docs", "img", "timeline.png"), png, 0o644))
	}
}
