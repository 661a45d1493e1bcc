package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/annotations"
)

// TestDashboardManyOwners opens the dashboard on 1,000 Workloads in four
// namespaces and changes 100 of them a second: the page shows them all,
// draws only what changed (a row of an owner that did not change is the
// same DOM node afterwards, and a text selection in it survives), and its
// search, namespace switcher and state filter narrow the lists. It logs
// the time to first paint and the page's main-thread time under the load
// (measurements, not assertions: the machine is shared).
func TestDashboardManyOwners(t *testing.T) {
	const nsCount, perNS = 4, 250
	var nss []string
	for i := 0; i < nsCount; i++ {
		nss = append(nss, newNamespace(t))
	}
	name := func(i int) string { return fmt.Sprintf("w-%04d", i) }
	ctx := context.Background()
	start := time.Now()
	parallel(t, nsCount*perNS, func(i int) error {
		w := obj(`{"apiVersion": "carto.run/v1alpha1", "kind": "Workload", "metadata": {"name": "` + name(i%perNS) + `",
			"labels": {"apps.tanzu.vmware.com/workload-type": "no-such-chain"}}, "spec": {}}`)
		_, err := env.dyn.Resource(workloadGVR).Namespace(nss[i/perNS]).Create(ctx, w, metav1.CreateOptions{})
		return err
	})
	t.Logf("created %d Workloads in %v", nsCount*perNS, time.Since(start).Round(time.Millisecond))

	url := startDashboard(t, "--kubeconfig", env.kubeconfig)
	b := startBrowser(t)
	b.call("Performance.enable", nil)
	opened := time.Now()
	b.navigate(url + "#/")
	ours := func(sel string) int {
		n := 0
		for _, ns := range nss {
			n += int(b.eval(`document.querySelectorAll('` + sel + `[data-key^="Workload/` + ns + `/"]:not([hidden])').length`).(float64))
		}
		return n
	}
	eventually(t, 60*time.Second, func() string {
		if n := ours("#side-owners a"); n != nsCount*perNS {
			return fmt.Sprintf("%d of our owners in the side bar", n)
		}
		return ""
	})
	t.Logf("1,000 owners on the page %v after navigating; first paint at %s ms of the page's life, %v frames in %.0f ms",
		time.Since(opened).Round(time.Millisecond), b.evalString(`document.body.dataset.firstPaint`),
		b.eval(`kontinueStats.frames`), b.eval(`kontinueStats.frameMs`))
	require.Equal(t, nsCount*perNS, ours("#owners-table tr"), "the home table lists them too")

	// A row nobody changes: mark its nodes and select its text.
	still := "Workload/" + nss[0] + "/" + name(7)
	b.eval(`(() => { for (const el of document.querySelectorAll('[data-key="` + still + `"]')) el.__mark = 1;
		window.getSelection().selectAllChildren(document.querySelector('#owners-table tr[data-key="` + still + `"]')); })()`)
	selection := b.evalString(`window.getSelection().toString()`)
	require.Contains(t, selection, name(7))

	// 100 owners a second for 5 seconds (namespaces 1 to 3), each a new
	// Ready message: status patches, which Kontinue does not react to.
	tick := func(i int) string { return fmt.Sprintf("tick %d of %s", i/100, name(i%perNS)) }
	metric := func() map[string]float64 {
		var out struct {
			Metrics []struct {
				Name  string
				Value float64
			}
		}
		require.NoError(t, json.Unmarshal(b.call("Performance.getMetrics", nil), &out))
		m := map[string]float64{}
		for _, x := range out.Metrics {
			m[x.Name] = x.Value
		}
		return m
	}
	before := metric()
	framesBefore, frameMsBefore := b.eval(`kontinueStats.frames`).(float64), b.eval(`kontinueStats.frameMs`).(float64)
	loadStart := time.Now()
	sent := 0
	for sec := 0; sec < 5; sec++ {
		next := loadStart.Add(time.Duration(sec+1) * time.Second)
		parallel(t, 100, func(j int) error {
			i := sec*100 + j
			ns := nss[1+i%(nsCount-1)]
			patch := fmt.Sprintf(`{"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Tick", "message": %q,
				"lastTransitionTime": "2026-01-01T00:00:00Z"}]}}`, tick(i))
			_, err := env.dyn.Resource(workloadGVR).Namespace(ns).Patch(ctx, name(i%perNS), types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
			return err
		})
		sent += 100
		time.Sleep(time.Until(next))
	}
	elapsed := time.Since(loadStart)
	last := 499 // the last owner changed: its row shows its message
	lastKey := "Workload/" + nss[1+last%(nsCount-1)] + "/" + name(last%perNS)
	eventually(t, 30*time.Second, func() string {
		got := b.evalString(`(document.querySelector('#owners-table tr[data-key="` + lastKey + `"]') || {}).textContent || ''`)
		if !strings.Contains(got, tick(last)) {
			return "last changed row: " + got
		}
		return ""
	})
	after := metric()
	frames, frameMs := b.eval(`kontinueStats.frames`).(float64)-framesBefore, b.eval(`kontinueStats.frameMs`).(float64)-frameMsBefore
	t.Logf("%d status changes in %v: page main thread busy %.0f ms (script %.0f ms, layout %.0f ms, style %.0f ms; %.0f layouts), %.0f frames drawing for %.0f ms",
		sent, elapsed.Round(time.Millisecond), 1000*(after["TaskDuration"]-before["TaskDuration"]), 1000*(after["ScriptDuration"]-before["ScriptDuration"]),
		1000*(after["LayoutDuration"]-before["LayoutDuration"]), 1000*(after["RecalcStyleDuration"]-before["RecalcStyleDuration"]),
		after["LayoutCount"]-before["LayoutCount"], frames, frameMs)

	var durations []string
	for k, v := range after {
		if strings.HasSuffix(k, "Duration") && v-before[k] > 0.001 {
			durations = append(durations, fmt.Sprintf("%s %.0f ms", k, 1000*(v-before[k])))
		}
	}
	sort.Strings(durations)
	t.Logf("main-thread time by kind: %s", strings.Join(durations, ", "))
	require.Equal(t, float64(2), b.eval(`[...document.querySelectorAll('[data-key="`+still+`"]')].filter((el) => el.__mark === 1).length`),
		"the unchanged owner's side entry and table row are the same nodes: not redrawn")
	require.Equal(t, selection, b.evalString(`window.getSelection().toString()`), "a text selection in an unchanged row survives the updates")
	require.Contains(t, b.evalString(`document.querySelector('#side-owners a[data-key="`+lastKey+`"]').textContent`), "Tick", "a changed owner's entry shows its new reason")
	require.Equal(t, nsCount*perNS, ours("#side-owners a"))

	// Search: one name, one owner per namespace.
	setFilter := func(id, value string) {
		b.eval(`(() => { const el = document.getElementById('` + id + `'); el.value = '` + value + `';
			el.dispatchEvent(new Event(el.tagName === 'INPUT' ? 'input' : 'change')); })()`)
	}
	setFilter("filter-q", name(142))
	require.Equal(t, nsCount, ours("#side-owners a"))
	require.Equal(t, nsCount, ours("#owners-table tr"))
	require.Contains(t, b.evalString(`document.getElementById('owner-count').innerText`), " of ")
	// The switcher lists our namespaces; one chosen, only its owners.
	options := b.evalString(`[...document.getElementById('filter-ns').options].map((o) => o.value).join(' ')`)
	for _, ns := range nss {
		require.Contains(t, options, ns)
	}
	setFilter("filter-q", "")
	setFilter("filter-ns", nss[2])
	require.Equal(t, perNS, ours("#side-owners a"))
	require.Equal(t, float64(0), b.eval(`[...document.querySelectorAll('#side-owners a:not([hidden])')].filter((a) => !a.dataset.key.startsWith('Workload/`+nss[2]+`/')).length`))
	// State: in that namespace, the owners changed above have reason Tick,
	// all are failing (Ready False), none is Ready.
	setFilter("filter-status", "ready")
	require.Equal(t, 0, ours("#side-owners a"))
	setFilter("filter-status", "failing")
	require.Positive(t, ours("#side-owners a"))
	setFilter("filter-q", "Tick")
	tickedHere := 0
	for i := 0; i < 500; i++ {
		if nss[1+i%(nsCount-1)] == nss[2] {
			tickedHere++
		}
	}
	require.Equal(t, tickedHere, ours("#side-owners a"), "search covers the reason")
	setFilter("filter-q", "")
	setFilter("filter-ns", "")
	setFilter("filter-status", "")
	require.Equal(t, nsCount*perNS, ours("#side-owners a"))

	// "Reconcile now" on one of them: the button's feedback stays through
	// the owner's updates (the request annotation, then Kontinue's
	// lastHandledReconcileAt) until the controller has handled it.
	owner := nss[0] + "/" + name(3)
	b.navigate(url + "#/owner/Workload/" + owner)
	eventually(t, 20*time.Second, func() string {
		if b.evalString(`(document.getElementById('reconcile') || {}).innerText || ''`) != "Reconcile now" {
			return "no button yet"
		}
		return ""
	})
	b.eval(`document.getElementById('reconcile').click()`)
	eventually(t, 30*time.Second, func() string {
		got := b.evalString(`document.getElementById('reconcile').innerText`)
		if got != "Reconciled" {
			return "button says " + got + "; page: " + b.evalString(`(document.getElementById('reconcile-requested') || {}).innerText || ''`)
		}
		return ""
	})
	w := get(t, workloadGVR, nss[0], name(3))
	require.NotEmpty(t, w.GetAnnotations()[annotations.ReconcileRequest])
}

// parallel runs f(0..n-1) on eight workers and fails the test on the
// first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var mu sync.Mutex
	var first error
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	require.NoError(t, first)
}
