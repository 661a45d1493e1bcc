package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/dashboard"
	"kontinue.dev/kontinue/reconciler/rollout"
)

// TestDashboardRollout: a chain with a roll-out policy (a canary wave, 50%,
// the implied 100%) and four Workloads; a template edit that fails on the
// canary halts the roll-out, and the chain's page says Halted, names the
// failing owner, shows each wave with its owners and each owner's
// revision. Pause, resume and undo pressed on the page change the chain's
// annotations and the template as `kontinue rollout` does (asserted on the
// API objects), with the dashboard caller's identity.
func TestDashboardRollout(t *testing.T) {
	k := newKit(t)
	chain, tmpl := k.name("web"), k.name("cfg")
	template := func(data string) string {
		return k.templateYAML("ClusterTemplate", tmpl, `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-cfg}
    data: `+data)
	}
	k.apply(template(`{v: "1"}`))
	k.apply(k.chainYAML(chain, `
  rollout:
    waves:
    - selector: {matchLabels: {rollout.example.com/canary: "true"}}
    - percent: 50`, k.step("cfg", "ClusterTemplate", tmpl, "")))
	owners := []string{"canary", "app-1", "app-2", "app-3"}
	for _, n := range owners {
		k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: %s
  labels: {app.example.com/chain: %s, rollout.example.com/canary: "%t"}
spec: {}
`, n, chain, n == "canary"))
	}
	for _, n := range owners {
		k.waitOwner(n, "Ready", "True", "Ready")
	}
	k.waitChain(chain, rollout.ConditionRolledOut, "True", rollout.PhaseComplete)
	stable := k.rollout(chain).Stable

	url := startDashboard(t, "--kubeconfig", env.kubeconfig)
	b := startBrowser(t)
	b.navigate(url + "#/chain/ClusterSupplyChain/" + chain)
	phase := func() string {
		return b.evalString(`(document.getElementById('rollout') || {dataset: {}}).dataset.phase || ''`)
	}
	eventually(t, 20*time.Second, func() string {
		if got := phase(); got != rollout.PhaseComplete {
			return "roll-out section " + got
		}
		return ""
	})
	require.Contains(t, b.evalString(`document.getElementById('rollout').innerText`), stable)

	// A failing edit: the canary fails on it, the roll-out halts there.
	k.apply(template(`{v: "2", x: $(workload.metadata.annotations.missing)$}`))
	k.waitChain(chain, rollout.ConditionRolledOut, "False", rollout.PhaseHalted)
	target := k.rollout(chain).Target
	eventually(t, 20*time.Second, func() string {
		if got := phase(); got != rollout.PhaseHalted {
			return "roll-out section " + got
		}
		if got := b.evalString(`Array.from(document.querySelectorAll('#rollout-failing a[data-failing]')).map((a) => a.dataset.failing).join(',')`); got != k.ns+"/canary" {
			return "failing owners named " + got
		}
		return ""
	})
	waves := `Array.from(document.querySelectorAll('#rollout table.waves tr[data-wave]')).map((r) => r.dataset.state + ':' +
		Array.from(r.querySelectorAll('a[data-member]')).map((a) => a.dataset.member.split('/')[1] + '=' + a.dataset.state).sort().join(',')).join(' | ')`
	got := b.evalString(waves)
	require.True(t, strings.HasPrefix(got, "halted:canary=failed | waiting:"), got)
	for _, n := range owners[1:] {
		require.Contains(t, got, n+"=waiting", "a later wave's owner keeps its revision")
	}
	require.Contains(t, b.evalString(`document.getElementById('rollout-message').innerText`), "halted")
	// Each owner's revision: the canary's the target, the others' the
	// stable one, or none recorded (an owner walked before the chain
	// adopted its policy renders with the stable definitions and records
	// nothing until it is walked again).
	revs := b.evalString(`Array.from(document.querySelectorAll('#chain-owners tr')).filter((r) => r.querySelector('[data-revision], td .muted')).map((r) =>
		r.querySelector('a').textContent + '=' + (r.querySelector('[data-revision]') || r.querySelector('td .muted')).innerText).join(',')`)
	byOwner := map[string]string{}
	for _, kv := range strings.Split(revs, ",") {
		if n, v, ok := strings.Cut(kv, "="); ok {
			byOwner[n] = v
		}
	}
	require.Equal(t, target+" target", byOwner["canary"], revs)
	for _, n := range owners[1:] {
		require.Contains(t, []string{stable + " stable", "none recorded"}, byOwner[n], revs)
	}
	shot := b.screenshot("_output/dashboard/rollout.png")
	if os.Getenv("KONTINUE_UPDATE_DOCS_IMG") == "true" {
		png, err := os.ReadFile(shot)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(env.root, "docs", "img", "rollout.png"), png, 0o644))
	}

	// The owner's page says which revision it renders with.
	b.navigate(url + "#/owner/Workload/" + k.ns + "/canary")
	eventually(t, 20*time.Second, func() string {
		if got := b.evalString(`(document.getElementById('owner-revision') || {}).innerText || ''`); !strings.Contains(got, target+" target") || !strings.Contains(got, "Halted") {
			return "owner's revision " + got
		}
		return ""
	})
	b.navigate(url + "#/chain/ClusterSupplyChain/" + chain)
	eventually(t, 20*time.Second, func() string {
		if got := phase(); got != rollout.PhaseHalted {
			return "roll-out section " + got
		}
		return ""
	})

	// Pause: the annotation `kontinue rollout pause` sets.
	click := func(id string) { b.eval(`document.getElementById('` + id + `').click()`) }
	result := func(want string) {
		t.Helper()
		eventually(t, 20*time.Second, func() string {
			if got := b.evalString(`document.getElementById('rollout-result').innerText`); !strings.Contains(got, want) {
				return "result " + got
			}
			return ""
		})
	}
	click("rollout-pause")
	result("roll-out paused")
	require.Equal(t, "true", get(t, chainGVR, "", chain).GetAnnotations()[rollout.AnnotationPaused])
	eventually(t, 20*time.Second, func() string {
		if got := b.evalString(`document.getElementById('rollout').dataset.paused`); got != "true" {
			return "paused " + got
		}
		return ""
	})

	// Resume: the pause goes, a resume token comes (as the CLI's).
	click("rollout-resume")
	result("roll-out resumed")
	ann := get(t, chainGVR, "", chain).GetAnnotations()
	require.NotContains(t, ann, rollout.AnnotationPaused)
	_, err := time.Parse(time.RFC3339Nano, ann[rollout.AnnotationResume])
	require.NoError(t, err, "a resume token: %q", ann[rollout.AnnotationResume])

	// Undo asks twice, then writes the stable revision's template back:
	// the roll-out ends, the canary is Ready on the stable definitions.
	st := k.rollout(chain)
	want := st.Find(stable)
	require.NotNil(t, want)
	click("rollout-undo")
	require.Contains(t, b.evalString(`document.getElementById('rollout-undo').innerText`), "Click again to undo to "+stable)
	require.Equal(t, "2", nested(get(t, k.tmplGVR("clustertemplates"), "", tmpl).Object, "spec", "template", "data", "v"), "one click writes nothing")
	click("rollout-undo")
	result("restored revision " + stable)
	require.Equal(t, want.Templates[0].Spec, get(t, k.tmplGVR("clustertemplates"), "", tmpl).Object["spec"], "the stable revision's spec, as undo writes it")
	k.waitChain(chain, rollout.ConditionRolledOut, "True", rollout.PhaseComplete)
	k.waitOwner("canary", "Ready", "True", "Ready")
	eventually(t, 20*time.Second, func() string {
		if got := phase(); got != rollout.PhaseComplete {
			return "roll-out section " + got
		}
		return ""
	})
}

// TestDashboardRolloutRefusals: the POST behind the buttons needs the
// dashboard's header and its own origin, and a chain without a policy is
// refused with the CLI's words; nothing is written.
func TestDashboardRolloutRefusals(t *testing.T) {
	k := newKit(t)
	chain := k.name("plain")
	k.apply(k.cmTemplate(k.name("cfg"), "cfg", `{v: "1"}`))
	k.apply(k.chainYAML(chain, "", k.step("cfg", "ClusterTemplate", k.name("cfg"), "")))
	url := startDashboard(t, "--kubeconfig", env.kubeconfig)
	post := func(header, origin, name string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, url+"api/rollout", strings.NewReader(`{"verb":"pause","kind":"ClusterSupplyChain","name":"`+name+`"}`))
		require.NoError(t, err)
		if header != "" {
			req.Header.Set(dashboard.CSRFHeader, header)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, msg := post("", "", chain)
	require.Equal(t, http.StatusForbidden, code, msg)
	code, msg = post("1", "http://evil.example.com", chain)
	require.Equal(t, http.StatusForbidden, code, msg)
	code, msg = post("1", "", chain)
	require.Equal(t, http.StatusBadGateway, code, msg)
	require.Contains(t, msg, "has no spec.rollout")
	code, msg = post("1", "", k.name("nope"))
	require.Equal(t, http.StatusNotFound, code, msg)
	require.Empty(t, get(t, chainGVR, "", chain).GetAnnotations(), "nothing written")
	require.True(t, dashboardState(t, url).Identity.Rollout, "kontinue dashboard offers the buttons")
}
