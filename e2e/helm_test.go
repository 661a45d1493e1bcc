package e2e

// Helm templates as a tenant's attack surface and as releases: runaway
// charts are bounded, random values survive restarts, renders after the
// first are upgrades, `lookup` reads as the service account, hooks are
// refused, and charts on private addresses are refused unless allowed.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/render"
)

// helmChain applies a ClusterTemplate for chart@1.0.0 of repo with values,
// and a chain with one step "deploy" using it; it returns the chain's name.
func (k *kit) helmChain(repo *chartRepo, chart, values string) string {
	tmpl, chain := k.name(chart), k.name(chart+"-chain")
	k.apply(helmTemplate(tmpl, repo.srv.URL, chart, "1.0.0", values, ""))
	k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
	return chain
}

// A Workload feeding a huge count into a chart's repeat, or a loop that
// never ends, gets a stamp failure that says so; the controller's memory
// does not grow with it, and other namespaces' charts render meanwhile.
func TestHelmRunawayChartsAreBounded(t *testing.T) {
	repo := newChartRepo(t)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}}\ndata: {count: %s}\n"
	repo.add(t, "bomb", "1.0.0", map[string]string{"templates/x.yaml": fmt.Sprintf(cm, `{{ repeat (int .Values.count) "x" | len | quote }}`)})
	repo.add(t, "loop", "1.0.0", map[string]string{"templates/x.yaml": `{{ range until (int .Values.count) }}{{ range until (int $.Values.count) }}{{ end }}{{ end }}` + fmt.Sprintf(cm, `"done"`)})
	repo.add(t, "fine", "1.0.0", map[string]string{"templates/x.yaml": fmt.Sprintf(cm, `{{ .Values.count | quote }}`)})

	k := newKit(t)
	bomb, loop, fine := k.helmChain(repo, "bomb", "{count: $(params.count)$}"), k.helmChain(repo, "loop", "{count: $(params.count)$}"), k.helmChain(repo, "fine", "{count: $(params.count)$}")
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	k.workload("bomb", bomb, "  params: [{name: count, value: 4000000000}]\n")
	loops := []string{"loop0", "loop1", "loop2"}
	for _, name := range loops {
		k.workload(name, loop, "  params: [{name: count, value: 200000}]\n")
	}
	// Another namespace's chart renders while this one's loops run.
	other := newKit(t)
	other.workload("fine", fine, "  params: [{name: count, value: \"7\"}]\n")
	other.waitObj(configMapGVR, "fine", other.dataIs("count", "7"))
	running := 0
	for _, name := range loops {
		if c := k.stepCond(get(t, workloadGVR, k.ns, name), "deploy", "ResourceSubmitted"); c == nil || c["reason"] != "TemplateStampFailure" {
			running++
		}
	}
	assert.Positive(t, running, "the other namespace's chart rendered while loops were still running")

	w := k.waitStep("bomb", "deploy", "ResourceSubmitted", "False", "TemplateStampFailure")
	k.assertCond(k.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateStampFailure",
		"its templates need more than 256 MiB of memory")
	k.assertCond(ownerCondition(w, "Ready"), "False", "TemplateStampFailure")
	for _, name := range loops {
		var msg string
		eventually(t, 90*time.Second, func() string {
			c := k.stepCond(get(t, workloadGVR, k.ns, name), "deploy", "ResourceSubmitted")
			msg, _ = c["message"].(string)
			if !strings.Contains(msg, "helm rendering did not finish within 10s") {
				return fmt.Sprintf("%s: %v", name, c)
			}
			return ""
		})
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// The bomb asks for 4 GB; the controller (this process) did not get it.
	assert.Less(t, int64(after.HeapSys)-int64(before.HeapSys), int64(256<<20), "heap grew by %d MiB", (int64(after.HeapSys)-int64(before.HeapSys))>>20)
	assert.Empty(t, k.objects(k.ns), "nothing stamped")
}

// Random values drawn by a chart stay the same across a restart of
// Kontinue (the release is kept in an owned Secret); a change of the
// step's inputs is an upgrade: the revision goes up, .Release.IsUpgrade is
// true, random values are drawn again, and what the chart keeps with
// `lookup` stays.
func TestHelmReleaseSurvivesRestartAndUpgrades(t *testing.T) {
	fk := newFaultKit(t)
	k := &kit{t: t, ns: fk.ns}
	repo := newChartRepo(t)
	repo.add(t, "rel", "1.0.0", map[string]string{
		"templates/secret.yaml": `{{- $old := lookup "v1" "Secret" .Release.Namespace (printf "%s-pw" .Release.Name) }}
apiVersion: v1
kind: Secret
metadata: {name: {{ .Release.Name }}-pw}
data:
  random: {{ randAlphaNum 20 | b64enc }}
  kept: {{ if $old }}{{ index $old.data "kept" }}{{ else }}{{ randAlphaNum 20 | b64enc }}{{ end }}
`,
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-rel}
data:
  revision: {{ .Release.Revision | quote }}
  upgrade: {{ .Release.IsUpgrade | quote }}
  color: {{ .Values.color | quote }}
`,
	})
	chain := k.helmChain(repo, "rel", "{color: $(params.color)$}")
	p1 := fk.start()
	k.workload("app", chain, "  params: [{name: color, value: red}, {name: unused, value: a}]\n")
	k.waitStep("app", "deploy", "ResourceSubmitted", "True", "ResourceSubmissionComplete")
	cfg := k.waitObj(configMapGVR, "app-rel", k.dataIs("revision", "1"))
	assert.Equal(t, "false", nested(cfg.Object, "data", "upgrade"))
	pw := get(t, secretGVR, k.ns, "app-pw")
	rel := get(t, secretGVR, k.ns, render.ReleaseSecretName("Workload", "app", "deploy"))
	assert.Equal(t, "true", rel.GetLabels()[render.ReleaseLabel])
	assert.Equal(t, render.ReleaseSecretType, nested(rel.Object, "type"))
	require.Len(t, rel.GetOwnerReferences(), 1)
	assert.Equal(t, "app", rel.GetOwnerReferences()[0].Name)
	assert.Equal(t, get(t, workloadGVR, k.ns, "app").GetUID(), rel.GetOwnerReferences()[0].UID)

	// A crash and a new process: it reconciles the workload (a new
	// generation) and leaves the chart's objects as they were.
	p1.kill()
	fk.start()
	setParams(t, k, "app", "red", "b")
	k.waitObjStatus("app", observed)
	k.waitStep("app", "deploy", "ResourceSubmitted", "True", "ResourceSubmissionComplete")
	assert.Equal(t, pw.GetResourceVersion(), get(t, secretGVR, k.ns, "app-pw").GetResourceVersion(), "the random values were not drawn again")
	assert.Equal(t, rel.GetResourceVersion(), get(t, secretGVR, k.ns, rel.GetName()).GetResourceVersion(), "nothing new to keep")
	assert.Equal(t, "1", nested(get(t, configMapGVR, k.ns, "app-rel").Object, "data", "revision"))

	// New inputs: an upgrade.
	setParams(t, k, "app", "blue", "b")
	cfg = k.waitObj(configMapGVR, "app-rel", k.dataIs("color", "blue"))
	assert.Equal(t, "2", nested(cfg.Object, "data", "revision"))
	assert.Equal(t, "true", nested(cfg.Object, "data", "upgrade"))
	up := get(t, secretGVR, k.ns, "app-pw")
	assert.NotEqual(t, nested(pw.Object, "data", "random"), nested(up.Object, "data", "random"), "random values are drawn again on an upgrade")
	assert.Equal(t, nested(pw.Object, "data", "kept"), nested(up.Object, "data", "kept"), "what the chart keeps with lookup stays")
	k.assertQuiet(k.wl("app"), k.cm("app-rel"), objRef{secretGVR, k.ns, "app-pw"})
}

func setParams(t *testing.T, k *kit, name, color, unused string) {
	t.Helper()
	k.update(workloadGVR, k.ns, name, func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{
			map[string]any{"name": "color", "value": color}, map[string]any{"name": "unused", "value": unused}}, "spec", "params"))
	})
}

// observed accepts a workload whose status is of its generation.
func observed(u *unstructured.Unstructured) string {
	if g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); g != u.GetGeneration() {
		return fmt.Sprintf("observedGeneration %d, generation %d", g, u.GetGeneration())
	}
	return ""
}

// Hooks are refused; `lookup` reads as the workload's service account, in
// its namespace only.
func TestHelmHooksAndLookupBounds(t *testing.T) {
	repo := newChartRepo(t)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}}\n"
	repo.add(t, "hooked", "1.0.0", map[string]string{
		"templates/cm.yaml":  cm,
		"templates/job.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-migrate\n  annotations: {helm.sh/hook: pre-upgrade}\n",
	})
	repo.add(t, "pods", "1.0.0", map[string]string{"templates/cm.yaml": `{{ lookup "v1" "Pod" .Release.Namespace "" }}` + cm})
	repo.add(t, "elsewhere", "1.0.0", map[string]string{"templates/cm.yaml": `{{ lookup "v1" "ConfigMap" "kube-system" "" }}` + cm})
	repo.add(t, "nodes", "1.0.0", map[string]string{"templates/cm.yaml": `{{ lookup "v1" "Node" "" "" }}` + cm})
	for _, c := range []struct{ chart, part string }{
		{"hooked", "renders Helm hooks, which Kontinue does not run: hooked/templates/job.yaml (pre-upgrade)"},
		{"pods", "lookup of all Pod in namespace [%s]: service account [%s/default] may not read it"},
		{"elsewhere", "lookup of all ConfigMap in namespace [kube-system]: lookup is answered only in the owner's namespace [%s]"},
		{"nodes", "kind [Node] is cluster-scoped: lookup reads only the owner's namespace"},
	} {
		t.Run(c.chart, func(t *testing.T) {
			k := newKit(t)
			k.workload("app", k.helmChain(repo, c.chart, "{}"), "")
			w := k.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateStampFailure")
			part := c.part
			if strings.Contains(part, "%s") {
				part = strings.ReplaceAll(part, "%s", k.ns)
			}
			k.assertCond(k.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateStampFailure", part)
			assert.Empty(t, k.objects(k.ns), "nothing stamped")
			k.assertQuiet(k.wl("app"))
		})
	}
}

// A chart URL on a private address is refused unless Kontinue runs with
// --helm-allow-private-networks.
func TestHelmPrivateAddressRefused(t *testing.T) {
	fk := newFaultKit(t)
	k := &kit{t: t, ns: fk.ns}
	repo := newChartRepo(t)
	repo.add(t, "app", "1.0.0", map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}}\n"})
	chain := k.helmChain(repo, "app", "{}")
	fk.start("--helm-allow-private-networks=false")
	k.workload("app", chain, "")
	w := k.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateStampFailure")
	k.assertCond(k.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateStampFailure",
		"cannot fetch chart [app] from ["+repo.srv.URL+"]",
		"is at 127.0.0.1, a loopback, private or link-local address: charts are fetched only from public addresses unless Kontinue runs with --helm-allow-private-networks")
	assert.Empty(t, k.objects(k.ns), "nothing stamped")
}

// A private chart repository: its credentials come from a Secret in the
// owner's namespace, read as the owner's service account; an owner whose
// namespace lacks the Secret gets a condition that names it, not the chart
// another owner fetched.
func TestHelmPrivateRepositoryCredentials(t *testing.T) {
	repo := newChartRepo(t)
	repo.add(t, "private", "1.0.0", map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-private}\n"})
	priv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "bot" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		repo.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(priv.Close)
	k := newKit(t)
	tmpl, chain := k.name("private"), k.name("private-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, fmt.Sprintf(`
  helm:
    chart: {repository: %q, name: private, version: 1.0.0, secretRef: {name: repo-creds}}`, priv.URL)))
	k.apply(k.chainYAML(chain, "", k.step("deploy", "ClusterTemplate", tmpl, "")))
	k.apply("\napiVersion: v1\nkind: Secret\nmetadata: {name: repo-creds}\ntype: kubernetes.io/basic-auth\nstringData: {username: bot, password: s3cret}\n")
	k.workload("app", chain, "")
	k.waitStep("app", "deploy", "ResourceSubmitted", "True", "ResourceSubmissionComplete")
	k.waitObj(configMapGVR, "app-private", nil)

	other := newKit(t)
	other.workload("app", chain, "")
	w := other.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateStampFailure")
	other.assertCond(other.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateStampFailure",
		"Secret [repo-creds] of helm.chart.secretRef not found in namespace ["+other.ns+"]")
	assert.Empty(t, other.objects(other.ns), "nothing stamped")
}

// The release is kept through the owner's service account: one that may
// not write Secrets gets a condition that says what it needs, and the step
// recovers when RBAC grants it.
func TestHelmReleaseNeedsSecretRights(t *testing.T) {
	repo := newChartRepo(t)
	repo.add(t, "cms", "1.0.0", map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-cms}\n"})
	k := newKit(t)
	chain := k.helmChain(repo, "cms", "{}")
	k.apply(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: cm-only}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-only}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: cm-only}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-only}
subjects: [{kind: ServiceAccount, name: cm-only}]
`)
	k.workload("app", chain, "  serviceAccountName: cm-only\n")
	w := k.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateStampFailure")
	k.assertCond(k.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateStampFailure",
		"service account ["+k.ns+"/cm-only] may not write the Secret [kontinue-helm-", "it needs get, create and patch on secrets in its namespace")
	assert.Empty(t, k.objects(k.ns), "no object applied before its release is kept")
	k.assertQuiet(k.wl("app"))

	k.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: cm-only-secrets}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ` + stamperRole + `}
subjects: [{kind: ServiceAccount, name: cm-only}]
`)
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-cms", nil)
}

// A Secret of the release's name that Kontinue did not write for this
// owner (with or without Kontinue's label) is left as it is, and the step
// says so.
func TestHelmReleaseSecretNotTakenOver(t *testing.T) {
	repo := newChartRepo(t)
	repo.add(t, "taken", "1.0.0", map[string]string{"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-taken}\n"})
	for _, c := range []struct{ name, labels, part string }{
		// Found in the cache or by the create: either way it is named.
		{"unlabelled", "{}", "it is left as it is; delete or rename it"},
		{"labelled", "{kontinue.dev/helm-release: \"true\"}", "is not this Workload's (its ownerReferences do not name it): it is left as it is"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKit(t)
			secret := render.ReleaseSecretName("Workload", "app", "deploy")
			k.apply(fmt.Sprintf("\napiVersion: v1\nkind: Secret\nmetadata: {name: %s, labels: %s}\nstringData: {mine: \"yes\"}\n", secret, c.labels))
			before := get(t, secretGVR, k.ns, secret)
			k.workload("app", k.helmChain(repo, "taken", "{}"), "")
			w := k.waitStep("app", "deploy", "ResourceSubmitted", "False", "TemplateStampFailure")
			k.assertCond(k.stepCond(w, "deploy", "ResourceSubmitted"), "False", "TemplateStampFailure", "the Secret ["+secret+"]", c.part)
			k.assertQuiet(k.wl("app"), objRef{secretGVR, k.ns, secret})
			assert.Equal(t, before.GetResourceVersion(), get(t, secretGVR, k.ns, secret).GetResourceVersion(), "left as it was")
			assert.Empty(t, k.objects(k.ns), "nothing stamped")
		})
	}
}
