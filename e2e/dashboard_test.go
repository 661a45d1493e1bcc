package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/cli"
	"kontinue.dev/kontinue/dashboard"
)

func runCLI(ctx context.Context, args []string, out, errb io.Writer) int {
	return cli.MainContext(ctx, args, strings.NewReader(""), out, errb)
}

// dashboardChain is a four-step chain: a source, an image step choosing
// between two options (a branch), a config and a deployment step. The image
// step's Test object reports health through its Ready condition.
func dashboardChain(k *kit, chain string) {
	k.apply(k.templateYAML("ClusterSourceTemplate", k.name("source"), `
  urlPath: .status.artifact.url
  revisionPath: .status.artifact.revision
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-source}
    spec: {git: $(workload.spec.source.git)$}`))
	for _, name := range []string{"kpack", "builder"} {
		k.apply(k.templateYAML("ClusterImageTemplate", k.name(name), `
  imagePath: .status.image
  healthRule: {singleConditionType: Ready}
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-image}
    spec: {source: $(source.url)$, builder: `+name+`}`))
	}
	k.apply(k.templateYAML("ClusterConfigTemplate", k.name("config"), `
  configPath: .data
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-config}
    data: {image: $(images.image.image)$}`))
	k.apply(k.cmTemplate(k.name("deploy"), "deploy", `{image: $(config.image)$}`))
	k.apply(k.chainYAML(chain, "", `
  - name: source
    templateRef: {kind: ClusterSourceTemplate, name: `+k.name("source")+`}
  - name: image
    templateRef:
      kind: ClusterImageTemplate
      options:
      - {name: `+k.name("kpack")+`, selector: {matchLabels: {builder: kpack}}}
      - {name: `+k.name("builder")+`, selector: {}}
    sources: [{name: source, resource: source}]
  - name: config
    templateRef: {kind: ClusterConfigTemplate, name: `+k.name("config")+`}
    images: [{name: image, resource: image}]
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: `+k.name("deploy")+`}
    configs: [{name: config, resource: config}]`))
}

// TestDashboardInBrowser: the dashboard in headless chromium shows a
// Workload's failing step in the failing colour with its condition
// message, follows the workload's recovery without a reload (server-sent
// events), draws the chain with its options, and its "reconcile now"
// button sets the reconcile request annotation. Screenshots go to
// _output/dashboard/.
func TestDashboardInBrowser(t *testing.T) {
	k := newKit(t)
	chain := k.name("dash")
	dashboardChain(k, chain)
	k.workload("app", chain, "")
	setStatus(t, testGVR, k.ns, "app-source", map[string]any{"artifact": map[string]any{"url": "https://artifacts/app.tgz", "revision": "abc123"}})
	waitFor(t, testGVR, k.ns, "app-image", nil)
	const failure = "build failed: no space left on device"
	setStatus(t, testGVR, k.ns, "app-image", map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "BuildFailed", "message": failure}}})
	k.waitStep("app", "image", "Healthy", "False", "ReadyCondition")

	url := startDashboard(t, "--kubeconfig", env.kubeconfig)
	b := startBrowser(t)
	b.navigate(url + "#/owner/Workload/" + k.ns + "/app")

	// The failing step: red in the graph and on its card, with its message.
	eventually(t, 20*time.Second, func() string {
		if got := b.evalString(`(document.querySelector('.card[data-step="image"]') || {}).dataset?.state || ''`); got != "false" {
			return "image card state " + got + "; page: " + b.evalString(`document.getElementById('main').innerText`)
		}
		return ""
	})
	failing := "rgb(220, 38, 38)" // --fail in style.css
	require.Equal(t, failing, b.evalString(`getComputedStyle(document.querySelector('g.node[data-step="image"] rect.box')).stroke`), "the image step is drawn in the failing colour")
	require.Equal(t, failing, b.evalString(`getComputedStyle(document.querySelector('.card[data-step="image"]')).borderLeftColor`))
	require.Contains(t, b.evalString(`document.querySelector('.card[data-step="image"]').innerText`), failure)
	require.Contains(t, b.evalString(`document.getElementById('owner-message').innerText`), failure, "the owner's Ready message names the failure")
	require.NotEqual(t, failing, b.evalString(`getComputedStyle(document.querySelector('g.node[data-step="source"] rect.box')).stroke`), "a healthy step is not red")
	cardText := b.evalString(`document.querySelector('.card[data-step="image"]').innerText`)
	for _, want := range []string{"ClusterImageTemplate " + k.name("builder"), "Test " + k.ns + "/app-image", k.name("builder") + " (empty selector: matches all)", "source"} {
		require.Contains(t, cardText, want, "the template, the option used, the stamped object and the inputs")
	}
	require.Contains(t, b.evalString(`document.querySelector('.card[data-step="source"]').innerText`), "https://artifacts/app.tgz", "outputs")
	require.Equal(t, "live", b.evalString(`document.getElementById('live').innerText`))
	b.screenshot("_output/dashboard/workload-failing.png")

	// The workload recovers: the page follows without a reload.
	b.eval(`window.__sameDocument = 42`)
	updates := b.evalString(`document.body.dataset.updates`)
	setStatus(t, testGVR, k.ns, "app-image", map[string]any{"image": "registry.example.com/app@sha256:1f2e",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Built"}}})
	k.waitOwner("app", "Ready", "True", "Ready")
	eventually(t, 20*time.Second, func() string {
		for _, step := range []string{"source", "image", "config", "deploy"} {
			if got := b.evalString(`(document.querySelector('g.node[data-step="` + step + `"]') || {}).dataset?.state || ''`); got != "true" {
				return "step " + step + " is drawn " + got
			}
		}
		return ""
	})
	require.Equal(t, float64(42), b.eval(`window.__sameDocument`), "updated in place, not reloaded")
	require.NotEqual(t, updates, b.evalString(`document.body.dataset.updates`))
	require.Equal(t, "rgb(22, 163, 74)", b.evalString(`getComputedStyle(document.querySelector('g.node[data-step="image"] rect.box')).stroke`), "--ok in style.css")
	require.Contains(t, b.evalString(`document.querySelector('.card[data-step="config"]').innerText`), "registry.example.com/app@sha256:1f2e")
	require.NotContains(t, b.evalString(`document.getElementById('main').innerText`), failure)
	b.screenshot("_output/dashboard/workload.png")

	// Reconcile now: the button sets the request annotation.
	before := time.Now().Add(-time.Second)
	b.eval(`document.getElementById('reconcile').click()`)
	w := waitFor(t, workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) string {
		if u.GetAnnotations()[annotations.ReconcileRequest] == "" {
			return "no reconcile request yet"
		}
		return ""
	})
	at, err := time.Parse(time.RFC3339Nano, w.GetAnnotations()[annotations.ReconcileRequest])
	require.NoError(t, err)
	require.True(t, at.After(before))
	eventually(t, 20*time.Second, func() string {
		if got := b.evalString(`(document.getElementById('reconcile-requested') || {}).innerText || ''`); !strings.Contains(got, w.GetAnnotations()[annotations.ReconcileRequest]) {
			return "page shows " + got
		}
		return ""
	})

	// The button's feedback lasts until the controller has handled the
	// request, through the owner's updates (it used to be redrawn away).
	eventually(t, 20*time.Second, func() string {
		if got := b.evalString(`document.getElementById('reconcile').innerText`); got != "Reconciled" {
			return "button says " + got
		}
		return ""
	})

	// A step's stamped object: its YAML and its events, read on demand,
	// kept open while the owner changes.
	_, err = env.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"}).Namespace(k.ns).Create(context.Background(), obj(`{
		"apiVersion": "v1", "kind": "Event", "metadata": {"name": "app-image.dash"},
		"involvedObject": {"apiVersion": "test.run/v1alpha1", "kind": "Test", "namespace": "`+k.ns+`", "name": "app-image"},
		"type": "Normal", "reason": "Pushed", "message": "pushed registry.example.com/app@sha256:1f2e", "count": 1,
		"firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "source": {"component": "builder"}}`), metav1.CreateOptions{})
	require.NoError(t, err)
	detail := func(what string) string {
		return b.evalString(`(document.querySelector('.card[data-step="image"] .detail[data-detail="` + what + `"] .detail-body') || {}).textContent || ''`)
	}
	b.eval(`document.querySelector('.card[data-step="image"] a[data-show="yaml"]').click()`)
	eventually(t, 20*time.Second, func() string {
		if got := detail("yaml"); !strings.Contains(got, "name: app-image") || !strings.Contains(got, "registry.example.com/app@sha256:1f2e") {
			return "YAML panel: " + got
		}
		return ""
	})
	require.NotContains(t, detail("yaml"), "managedFields")
	b.eval(`document.querySelector('.card[data-step="image"] a[data-show="events"]').click()`)
	eventually(t, 20*time.Second, func() string {
		if got := detail("events"); !strings.Contains(got, "Pushed") || !strings.Contains(got, "pushed registry.example.com/app@sha256:1f2e") {
			return "events panel: " + got
		}
		return ""
	})
	updates = b.evalString(`document.body.dataset.updates`)
	setStatus(t, testGVR, k.ns, "app-image", map[string]any{"image": "registry.example.com/app@sha256:3c4d",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Built"}}})
	eventually(t, 20*time.Second, func() string {
		if got := b.evalString(`document.querySelector('.card[data-step="config"]').innerText`); !strings.Contains(got, "sha256:3c4d") {
			return "config card: " + got
		}
		return ""
	})
	require.NotEqual(t, updates, b.evalString(`document.body.dataset.updates`))
	require.Contains(t, detail("events"), "Pushed", "the open panel stays through the owner's updates")
	b.screenshot("_output/dashboard/events.png")

	// The chain: its steps, the options as branches, its owner counts.
	b.navigate(url + "#/chain/ClusterSupplyChain/" + chain)
	eventually(t, 20*time.Second, func() string {
		side := b.evalString(`(document.querySelector('nav a[data-chain="` + chain + `"]') || {}).innerText || ''`)
		if !strings.Contains(side, "1 owner · 1 Ready") {
			return "chain entry: " + side
		}
		return ""
	})
	svg := b.evalString(`document.querySelector('.graph svg').textContent`)
	for _, want := range []string{"source", "image", "config", "deploy", k.name("kpack"), "builder=kpack", k.name("builder")} {
		require.Contains(t, svg, want)
	}
	require.Equal(t, float64(3), b.eval(`document.querySelectorAll('.graph path.edge').length`), "one arrow per input")
	b.screenshot("_output/dashboard/chain.png")
	b.navigate(url + "#/")
	b.screenshot("_output/dashboard/home.png")

	// Held inputs (gating_test.go's chain): while the build works on c2,
	// c3 waits, and the step's card says so.
	gated := newNamespace(t)
	apply(t, gated, gatedChain(gated, readyRule))
	apply(t, gated, gatedWorkload(gated, "c1"))
	waitFor(t, testGVR, gated, "app-build", nil)
	build(t, gated, "True", "img-c1")
	waitDeployed(t, gated, "img-c1")
	apply(t, gated, gatedWorkload(gated, "c2"))
	waitFor(t, testGVR, gated, "app-build", fieldIs("c2", "spec", "commit"))
	apply(t, gated, gatedWorkload(gated, "c3"))
	waitOwner(t, workloadGVR, gated, "app", "ResourcesSubmitted", "Unknown", "InputsHeld")
	b.navigate(url + "#/owner/Workload/" + gated + "/app")
	eventually(t, 20*time.Second, func() string {
		card := b.evalString(`(document.querySelector('.card[data-step="build"]') || {}).innerText || ''`)
		if !strings.Contains(card, "held") || !strings.Contains(card, "wait until the object finishes with") {
			return "build card: " + card
		}
		return ""
	})
	// A shadow (shadow_test.go's first steps): the primary fails on a bad
	// commit, the shadow of the last good inputs serves the outputs.
	shadowed := newNamespace(t)
	apply(t, shadowed, gatedChain(shadowed, readyRule))
	apply(t, shadowed, gatedWorkload(shadowed, "good-1"))
	waitFor(t, testGVR, shadowed, "app-build", nil)
	buildObj(t, shadowed, "app-build", "True", "img-good-1")
	waitDeployed(t, shadowed, "img-good-1")
	apply(t, shadowed, gatedWorkload(shadowed, "bad-2"))
	waitFor(t, testGVR, shadowed, "app-build", fieldIs("bad-2", "spec", "commit"))
	buildObj(t, shadowed, "app-build", "False", "img-good-1")
	waitFor(t, testGVR, shadowed, shadowOfBuild, nil)
	buildObj(t, shadowed, shadowOfBuild, "True", "img-good-1-rebased")
	b.navigate(url + "#/owner/Workload/" + shadowed + "/app")
	eventually(t, 30*time.Second, func() string {
		card := b.evalString(`(document.querySelector('.card[data-step="build"]') || {}).innerText || ''`)
		if !strings.Contains(card, "outputs served by the shadow; last good copy Test "+shadowed+"/"+shadowOfBuild) {
			return "build card: " + card
		}
		return ""
	})
	b.screenshot("_output/dashboard/shadow.png")
}

// TestDashboardReconcileNeedsTheHeader: the only write refuses a request
// without the dashboard's header (what a cross-site form sends) or from
// another origin, and says what is missing; a request naming another host
// is refused altogether.
func TestDashboardReconcileNeedsTheHeader(t *testing.T) {
	k := newKit(t)
	chain := k.name("dash")
	dashboardChain(k, chain)
	k.workload("app", chain, "")
	url := startDashboard(t, "--kubeconfig", env.kubeconfig)
	body := `{"kind":"Workload","namespace":"` + k.ns + `","name":"app"}`
	post := func(header, origin string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, url+"api/reconcile", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
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
	code, msg := post("", "")
	require.Equal(t, http.StatusForbidden, code, msg)
	require.Contains(t, msg, dashboard.CSRFHeader)
	code, msg = post("1", "http://evil.example.com")
	require.Equal(t, http.StatusForbidden, code, msg)
	require.Empty(t, get(t, workloadGVR, k.ns, "app").GetAnnotations()[annotations.ReconcileRequest], "nothing written")

	code, msg = post("1", strings.TrimSuffix(url, "/"))
	require.Equal(t, http.StatusOK, code, msg)
	require.NotEmpty(t, get(t, workloadGVR, k.ns, "app").GetAnnotations()[annotations.ReconcileRequest])

	body = `{"kind":"Workload","namespace":"` + k.ns + `","name":"nope"}`
	code, msg = post("1", "")
	require.Equal(t, http.StatusNotFound, code, msg)

	// A site that points its own name at the dashboard's address (DNS
	// rebinding) sends its own Host: refused, nothing read.
	req, err := http.NewRequest(http.MethodGet, url+"api/state", nil)
	require.NoError(t, err)
	req.Host = "rebound.example.com"
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusMisdirectedRequest, res.StatusCode)
	require.NotContains(t, string(b), k.ns)
}

// state reads the dashboard's snapshot.
func dashboardState(t testing.TB, url string) dashboard.Snapshot {
	t.Helper()
	res, err := http.Get(url + "api/state")
	require.NoError(t, err)
	defer res.Body.Close()
	var s dashboard.Snapshot
	require.NoError(t, json.NewDecoder(res.Body).Decode(&s))
	return s
}

func ownerNames(s dashboard.Snapshot) []string {
	var out []string
	for _, o := range s.Owners {
		out = append(out, o.Namespace+"/"+o.Name)
	}
	return out
}

func kindState(s dashboard.Snapshot, resource string) dashboard.KindState {
	for _, k := range s.Kinds {
		if k.Resource == resource {
			return k
		}
	}
	return dashboard.KindState{}
}

// TestDashboardReadsWithCallersIdentity: the dashboard reads with the
// kubeconfig's user, so a user who may read the Workloads of one namespace
// only sees them there, sees none of another namespace, and is told
// plainly which kinds it may not list. The controller's endpoint reads as
// its configured ServiceAccount the same way.
func TestDashboardReadsWithCallersIdentity(t *testing.T) {
	k := newKit(t)
	other := newNamespace(t)
	chain := k.name("dash")
	dashboardChain(k, chain)
	k.workload("mine", chain, "")
	apply(t, other, workloadYAML(other, "theirs", chain, ""))
	role := k.name("dashboard-reader")
	k.apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: viewer}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ` + role + `}
rules:
- apiGroups: [carto.run]
  resources: [workloads, deliverables, runnables, clustersupplychains, clusterdeliveries]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ` + role + `}
subjects: [{kind: ServiceAccount, name: viewer, namespace: ` + k.ns + `}]
`)
	user := "system:serviceaccount:" + k.ns + ":viewer"

	// A kubeconfig whose user is the viewer (the suite's admin impersonates it).
	cfg, err := clientcmd.LoadFromFile(env.kubeconfig)
	require.NoError(t, err)
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	kubeconfig := filepath.Join(t.TempDir(), "viewer")
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))

	// Its own namespace: its workload, nothing of the other namespace.
	url := startDashboard(t, "--kubeconfig", kubeconfig, "-n", k.ns)
	var s dashboard.Snapshot
	eventually(t, 20*time.Second, func() string {
		s = dashboardState(t, url)
		if len(s.Owners) == 0 || s.Identity.User == "" || !kindState(s, "clustersupplychains").Forbidden || !kindState(s, "workloads").Synced {
			return fmt.Sprintf("owners %v, user %q, kinds %+v", ownerNames(s), s.Identity.User, s.Kinds)
		}
		// Kontinue may not have written the owner's status yet (run
		// alone, this test used to read it before the first reconcile).
		if len(s.Owners[0].Steps) == 0 {
			return "no steps in the owner's status yet"
		}
		return ""
	})
	require.Equal(t, []string{k.ns + "/mine"}, ownerNames(s))
	require.Equal(t, user, s.Identity.User)
	require.True(t, kindState(s, "workloads").Synced)
	cs := kindState(s, "clustersupplychains")
	require.Contains(t, cs.Error, "forbidden", "a RoleBinding grants no cluster-scoped read: said plainly")
	require.Empty(t, s.Chains)
	require.NotEmpty(t, s.Owners[0].Graph.Steps, "the owner's steps drawn without its chain")

	// The other namespace, and all namespaces: forbidden, nothing shown.
	var otherURL string
	for _, args := range [][]string{{"-n", other}, {}} {
		url := startDashboard(t, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		if otherURL == "" {
			otherURL = url
		}
		eventually(t, 20*time.Second, func() string {
			s = dashboardState(t, url)
			if !kindState(s, "workloads").Forbidden {
				return fmt.Sprintf("kinds %+v", s.Kinds)
			}
			return ""
		})
		require.Empty(t, s.Owners, "%v", args)
	}
	// The page says so plainly.
	b := startBrowser(t)
	b.navigate(otherURL)
	eventually(t, 20*time.Second, func() string {
		warn := b.evalString(`(document.querySelector('#warnings [data-kind="workloads"]') || {}).innerText || ''`)
		if !strings.Contains(warn, "Not allowed to list workloads") || !strings.Contains(warn, "forbidden") {
			return "warning: " + warn
		}
		return ""
	})
	require.Contains(t, b.evalString(`document.getElementById('identity').innerText`), user)
	require.NotContains(t, b.evalString(`document.body.innerText`), "theirs")
	b.screenshot("_output/dashboard/forbidden.png")

	// Granted in the other namespace: the page drops the warning and shows
	// its workload, without a reload (the informer's list is retried with
	// backoff, up to 30 s apart).
	b.eval(`window.__sameDocument = 7`)
	apply(t, other, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: `+role+`}
subjects: [{kind: ServiceAccount, name: viewer, namespace: `+k.ns+`}]
`)
	eventually(t, 60*time.Second, func() string {
		if warn := b.evalString(`(document.querySelector('#warnings [data-kind="workloads"]') || {}).innerText || ''`); warn != "" {
			return "warning still shown: " + warn
		}
		if !strings.Contains(b.evalString(`document.body.innerText`), "theirs") {
			return "their workload not shown"
		}
		return ""
	})
	require.Equal(t, float64(7), b.eval(`window.__sameDocument`), "updated in place, not reloaded")

	// The same as the admin: both.
	url = startDashboard(t, "--kubeconfig", env.kubeconfig)
	eventually(t, 20*time.Second, func() string {
		names := strings.Join(ownerNames(dashboardState(t, url)), " ")
		if !strings.Contains(names, k.ns+"/mine") || !strings.Contains(names, other+"/theirs") {
			return "owners " + names
		}
		return ""
	})

	// The controller's endpoint: the controller's rest config impersonating
	// the configured ServiceAccount, read-only.
	saCfg, err := dashboard.ServiceAccountConfig(env.cfg, k.ns+"/viewer")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := dashboard.NewForConfig(saCfg, dashboard.Options{Identity: "ServiceAccount " + k.ns + "/viewer"})
	require.NoError(t, err)
	go srv.Run(ctx)
	eventually(t, 20*time.Second, func() string {
		s = srv.Snapshot()
		if !kindState(s, "workloads").Forbidden || s.Identity.User == "" {
			return fmt.Sprintf("kinds %+v", s.Kinds)
		}
		return ""
	})
	require.Equal(t, user, s.Identity.User)
	require.True(t, s.Identity.ReadOnly)
	require.Empty(t, s.Owners)
	_, err = dashboard.ServiceAccountConfig(env.cfg, "no-slash")
	require.Error(t, err)

	// Rights revoked after the first list, then granted again: the kind is
	// flagged, then the flag goes although no workload changed. The
	// API server keeps a watch open after its RBAC changes, so the test
	// cuts the dashboard's watches to make it ask again.
	cutter := &watchCutter{}
	saCfg.WrapTransport = cutter.wrap
	srv, err = dashboard.NewForConfig(saCfg, dashboard.Options{Namespace: k.ns})
	require.NoError(t, err)
	go srv.Run(ctx)
	eventually(t, 20*time.Second, func() string {
		s = srv.Snapshot()
		if !kindState(s, "workloads").Synced || len(s.Owners) != 1 {
			return fmt.Sprintf("owners %v, kinds %+v", ownerNames(s), s.Kinds)
		}
		return ""
	})
	bindings := env.dyn.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}).Namespace(k.ns)
	binding, err := bindings.Get(context.Background(), "viewer", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, bindings.Delete(context.Background(), "viewer", metav1.DeleteOptions{}))
	eventually(t, 60*time.Second, func() string {
		cutter.cut()
		if s = srv.Snapshot(); !kindState(s, "workloads").Forbidden {
			return fmt.Sprintf("kinds %+v", s.Kinds)
		}
		return ""
	})
	binding.SetResourceVersion("")
	binding.SetUID("")
	_, err = bindings.Create(context.Background(), binding, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, func() string {
		if ks := kindState(srv.Snapshot(), "workloads"); ks.Forbidden || ks.Error != "" {
			return fmt.Sprintf("workloads still flagged: %+v", ks)
		}
		return ""
	})
	require.Equal(t, []string{k.ns + "/mine"}, ownerNames(srv.Snapshot()))
	_ = os.Remove(kubeconfig)
}

// watchCutter ends the watches made through it on cut(), as an API
// server restart or a watch timeout would.
type watchCutter struct {
	mu      sync.Mutex
	cancels []context.CancelFunc
}

func (c *watchCutter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if q := req.URL.Query().Get("watch"); q != "true" && q != "1" {
			return rt.RoundTrip(req)
		}
		ctx, cancel := context.WithCancel(req.Context())
		c.mu.Lock()
		c.cancels = append(c.cancels, cancel)
		c.mu.Unlock()
		return rt.RoundTrip(req.WithContext(ctx))
	})
}

func (c *watchCutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.cancels {
		cancel()
	}
	c.cancels = nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestControllerDashboard: the controller's dashboard endpoint (off by
// default) reads as the configured ServiceAccount, never with the
// controller's own rights, and refuses the reconcile POST (read-only).
func TestControllerDashboard(t *testing.T) {
	k := newKit(t)
	k.workload("app", k.name("none"), "")
	k.apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: viewer}
`)
	user := "system:serviceaccount:" + k.ns + ":viewer"

	// Without the ServiceAccount the controller refuses to start.
	p := startKontinueProc(t, "no-sa", "--dashboard-bind-address="+freeAddr(t))
	select {
	case <-p.done:
		require.Error(t, p.err)
		require.Contains(t, tail(p.logPath, 5), "--dashboard-bind-address needs --dashboard-service-account")
	case <-time.After(30 * time.Second):
		t.Fatal("the controller started a dashboard without a ServiceAccount")
	}

	addr := freeAddr(t)
	startKontinueProc(t, "dash", "--dashboard-bind-address="+addr, "--dashboard-service-account="+k.ns+"/viewer")
	url := "http://" + addr + "/"
	var s dashboard.Snapshot
	eventually(t, 30*time.Second, func() string {
		if code, _, err := httpGet(url + "api/state"); err != nil || code != http.StatusOK {
			return fmt.Sprintf("GET api/state: %d %v", code, err)
		}
		s = dashboardState(t, url)
		if s.Identity.User == "" || !kindState(s, "workloads").Forbidden {
			return fmt.Sprintf("identity %+v, kinds %+v", s.Identity, s.Kinds)
		}
		return ""
	})
	require.Equal(t, user, s.Identity.User, "impersonated")
	require.True(t, s.Identity.ReadOnly)
	require.Empty(t, s.Owners, "the controller may list every Workload; the ServiceAccount may not")
	code, page, err := httpGet(url)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, "app.js")

	req, err := http.NewRequest(http.MethodPost, url+"api/reconcile", strings.NewReader(`{"kind":"Workload","namespace":"`+k.ns+`","name":"app"}`))
	require.NoError(t, err)
	req.Header.Set(dashboard.CSRFHeader, "1")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	require.Empty(t, get(t, workloadGVR, k.ns, "app").GetAnnotations()[annotations.ReconcileRequest])

	// Nor does it steer roll-outs: no buttons offered, the POST refused.
	require.False(t, s.Identity.Rollout)
	req, err = http.NewRequest(http.MethodPost, url+"api/rollout", strings.NewReader(`{"verb":"pause","kind":"ClusterSupplyChain","name":"any"}`))
	require.NoError(t, err)
	req.Header.Set(dashboard.CSRFHeader, "1")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
}
