package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/api"
)

// A template that stamps an object someone else made (a name from a
// param): Kontinue never writes to it, says so on the step, and the object
// survives the owner's deletion. An annotation on the object, which only
// someone who may write it can set, hands it over explicitly.
func TestNeverAdoptsAnObjectItDidNotStamp(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("named"), k.name("named-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, `
  params: [{name: cm, default: x}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(params.cm)$}
    data: {owner: $(workload.metadata.name)$}`))
	k.apply(k.chainYAML(chain, "", k.step("config", "ClusterTemplate", tmpl, "")))
	k.apply(`
apiVersion: v1
kind: ConfigMap
metadata: {name: app-settings}
data: {mine: "yes"}
`)
	before := get(t, configMapGVR, k.ns, "app-settings")

	k.workload("app", chain, "\n  params: [{name: cm, value: app-settings}]")
	w := k.waitStep("app", "config", "ResourceSubmitted", "False", "StampedObjectNotOwned")
	k.assertCond(k.stepCond(w, "config", "ResourceSubmitted"), "False", "StampedObjectNotOwned",
		"ConfigMap ["+k.ns+"/app-settings]", "was not stamped by this Workload", "kontinue.dev/adopt-by=Workload/app")
	assert.Equal(t, "False", ownerCondition(w, "Ready")["status"])
	assert.Nil(t, stepStatus(w, "config")["stampedRef"], "the person's object is not recorded as stamped")
	k.assertQuiet(k.cm("app-settings"), k.wl("app"))
	after := get(t, configMapGVR, k.ns, "app-settings")
	assert.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "not written")
	assert.Empty(t, after.GetOwnerReferences())

	// The owner goes: the person's object stays, exactly as it was.
	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(k.ns).Delete(context.Background(), "app", metav1.DeleteOptions{}))
	waitGone(t, workloadGVR, k.ns, "app")
	time.Sleep(2 * time.Second) // the garbage collector acts within ~0.2 s on ConfigMaps
	assert.Equal(t, before.GetResourceVersion(), get(t, configMapGVR, k.ns, "app-settings").GetResourceVersion())

	// Explicit adoption: the object's writer hands it to a new owner.
	k.apply(`
apiVersion: v1
kind: ConfigMap
metadata: {name: app-settings, annotations: {kontinue.dev/adopt-by: Workload/adopter}}
data: {mine: "yes"}
`)
	k.workload("adopter", chain, "\n  params: [{name: cm, value: app-settings}]")
	k.waitOwner("adopter", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-settings", k.dataIs("owner", "adopter"))
}

// Two owners whose templates stamp the same object: the first keeps it, the
// second reports a conflict naming the first, nobody flips it back and
// forth, and deleting the second never deletes the first one's object.
func TestTwoOwnersOneName(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("shared"), k.name("shared-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: shared}
    data: {owner: $(workload.metadata.name)$}`))
	k.apply(k.chainYAML(chain, "", k.step("config", "ClusterTemplate", tmpl, "")))
	k.workload("first", chain, "")
	k.waitOwner("first", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "shared", k.dataIs("owner", "first"))

	k.workload("second", chain, "")
	w := k.waitStep("second", "config", "ResourceSubmitted", "False", "StampedObjectNotOwned")
	k.assertCond(k.stepCond(w, "config", "ResourceSubmitted"), "False", "StampedObjectNotOwned",
		"ConfigMap ["+k.ns+"/shared]", "controlled by Workload [first]")
	k.assertQuiet(k.cm("shared"), k.wl("first"), k.wl("second"))
	assert.Equal(t, "first", nested(get(t, configMapGVR, k.ns, "shared").Object, "data", "owner"))

	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(k.ns).Delete(context.Background(), "second", metav1.DeleteOptions{}))
	waitGone(t, workloadGVR, k.ns, "second")
	time.Sleep(2 * time.Second)
	assert.Equal(t, "first", nested(get(t, configMapGVR, k.ns, "shared").Object, "data", "owner"), "the first owner's object survives the second's deletion")

	require.NoError(t, env.dyn.Resource(workloadGVR).Namespace(k.ns).Delete(context.Background(), "first", metav1.DeleteOptions{}))
	eventually(t, 60*time.Second, func() string {
		if u, err := tryGet(configMapGVR, k.ns, "shared"); err == nil {
			return fmt.Sprintf("shared still exists, owners %v", u.GetOwnerReferences())
		}
		return ""
	})
}

// reconciles counts, per key, the reconciles of the in-process Kontinue
// (which events wake which owner).
var reconciles = &keyCounter{n: map[reconciler.Key]int{}}

type keyCounter struct {
	mu   sync.Mutex
	n    map[reconciler.Key]int
	last map[reconciler.Key][]time.Time // the latest reconciles' times
}

func (c *keyCounter) add(k reconciler.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[k]++
	if c.last == nil {
		c.last = map[reconciler.Key][]time.Time{}
	}
	if l := append(c.last[k], time.Now()); len(l) > 64 {
		c.last[k] = l[1:]
	} else {
		c.last[k] = l
	}
}

// since returns the times of k's reconciles after t.
func (c *keyCounter) since(k reconciler.Key, t time.Time) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, at := range c.last[k] {
		if at.After(t) {
			out = append(out, at)
		}
	}
	return out
}

func (c *keyCounter) get(k reconciler.Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// An object carrying Kontinue's labels that Kontinue did not stamp for the
// owner they name: in another namespace it never wakes that owner (a
// tenant cannot keep someone else's owner busy), and in the owner's own
// namespace it is not taken for a stamped object: never deleted as an
// orphan of the owner.
func TestForeignObjectWithOurLabels(t *testing.T) {
	if env.external {
		t.Skip("counts the in-process Kontinue's reconciles")
	}
	k, other := newKit(t), newKit(t)
	tmpl, chain := k.name("labelled"), k.name("labelled-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-cfg}
    data: {owner: $(workload.metadata.name)$}`))
	k.apply(k.chainYAML(chain, "", k.step("config", "ClusterTemplate", tmpl, "")))
	k.workload("app", chain, "")
	k.waitOwner("app", "Ready", "True", "Ready")
	key := reconciler.Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: k.ns, Name: "app"}}
	foreignLabels := fmt.Sprintf("{kontinue.dev/stamped: \"true\", carto.run/workload-name: app, carto.run/workload-namespace: %s, carto.run/resource-name: config}", k.ns)

	// Another namespace: updates of the decoy do not reconcile the owner.
	k.assertQuiet(k.wl("app"))
	before := reconciles.get(key)
	for i := 0; i < 10; i++ {
		other.apply(fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: decoy, labels: %s}
data: {n: "%d"}
`, foreignLabels, i))
	}
	time.Sleep(2 * time.Second)
	assert.Equal(t, before, reconciles.get(key), "an object in another namespace carrying the owner's labels woke it")

	// The control: a hand edit of the owner's own object does wake it (and
	// is undone), so the counter counts.
	k.update(configMapGVR, k.ns, "app-cfg", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, "edited", "data", "owner"))
	})
	k.waitObj(configMapGVR, "app-cfg", k.dataIs("owner", "app"))
	assert.Greater(t, reconciles.get(key), before)

	// The owner's namespace: a person's object with the owner's labels,
	// which the owner's status names as an orphan, is not deleted: it
	// was not stamped by this owner (no controller reference to it).
	k.apply(fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: precious, labels: %s}
data: {mine: "yes"}
`, foreignLabels))
	precious := get(t, configMapGVR, k.ns, "precious")
	w := get(t, workloadGVR, k.ns, "app")
	status, _ := w.Object["status"].(map[string]any)
	status["orphans"] = []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": k.ns, "name": "precious", "resource": "configmaps"}}
	setStatus(t, workloadGVR, k.ns, "app", status)
	k.poke("app")
	k.waitObjStatus("app", func(u *unstructured.Unstructured) string {
		if o := nested(u.Object, "status", "orphans"); o != nil {
			return fmt.Sprintf("orphans still %v", o)
		}
		return ""
	})
	got, err := tryGet(configMapGVR, k.ns, "precious")
	require.NoError(t, err, "the person's object carrying the owner's labels was deleted as an orphan")
	assert.Equal(t, precious.GetResourceVersion(), got.GetResourceVersion())
	k.waitOwner("app", "Ready", "True", "Ready")
}

// A Runnable's spec.selector sees only what the Runnable's service account
// may list in the Runnable's namespace: cluster-scoped kinds are refused,
// an account without RBAC sees nothing (and the status names nothing it
// cannot read), and no cluster-wide watch is started for it.
func TestRunnableSelectorStaysInItsRights(t *testing.T) {
	if env.external {
		t.Skip("reads the in-process Kontinue's watches")
	}
	k := newRunKit(t)
	other := newNamespace(t)
	tmpl := uniq(k.ns, "selects")
	apply(t, k.ns, fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata: {name: %s}
spec:
  template:
    apiVersion: tekton.dev/v1beta1
    kind: PipelineRun
    metadata: %s
    spec:
      pipelineRef: {name: $(selected.metadata.name)$}
      params: [{name: revision, value: $(runnable.spec.inputs.revision)$}]
`, tmpl, genName))

	t.Run("a cluster-scoped kind is refused", func(t *testing.T) {
		k := k.with(t)
		k.runnable("namespaces", tmpl, "r1", fmt.Sprintf(`  selector:
    resource: {apiVersion: v1, kind: Namespace}
    matchingLabels: {kubernetes.io/metadata.name: %s}`, other))
		r := k.waitRunnable("namespaces", "RunTemplateReady", "False", "InvalidSpec")
		msg := fmt.Sprint(condition(r.Object, "RunTemplateReady", "status")["message"])
		assert.Contains(t, msg, "kind [Namespace], which is cluster-scoped")
		assert.NotContains(t, msg, other)
		assert.Empty(t, k.runs("namespaces"))
	})

	t.Run("secrets the service account may not list", func(t *testing.T) {
		k := k.with(t)
		secret := `
apiVersion: v1
kind: Secret
metadata: {name: %s, labels: {e2e/selected: "yes"}}
stringData: {token: t}
`
		apply(t, other, fmt.Sprintf(secret, "other-secret"))
		apply(t, k.ns, fmt.Sprintf(secret, "own-secret"))
		// The account may create runs, not read Secrets.
		apply(t, k.ns, `
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: runs}
rules: [{apiGroups: [tekton.dev], resources: ["*"], verbs: [get, list, watch, create, delete]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: runner-runs}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: runs}
subjects: [{kind: ServiceAccount, name: runner, namespace: `+k.ns+`}]
`)
		k.runnable("secrets", tmpl, "r1", `  serviceAccountName: runner
  selector:
    resource: {apiVersion: v1, kind: Secret}
    matchingLabels: {e2e/selected: "yes"}`)
		r := k.waitRunnable("secrets", "RunTemplateReady", "False", "SelectorMatchError")
		msg := fmt.Sprint(condition(r.Object, "RunTemplateReady", "status")["message"])
		assert.Contains(t, msg, "service account ["+k.ns+"/runner] may not list secrets")
		assert.NotContains(t, msg, "own-secret")
		assert.NotContains(t, msg, "other-secret")
		assert.Empty(t, k.runs("secrets"))
		assertNoClusterWideSecretWatch(t)

		// RBAC for Secrets in its namespace: it selects its own Secret,
		// never the other namespace's.
		apply(t, k.ns, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-secrets}
rules: [{apiGroups: [""], resources: [secrets], verbs: [list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: runner-secrets}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-secrets}
subjects: [{kind: ServiceAccount, name: runner, namespace: `+k.ns+`}]
`)
		runs := k.waitRevisions("secrets", "r1")
		assert.Equal(t, "own-secret", nested(runs[0].Object, "spec", "pipelineRef", "name"))
		assertNoClusterWideSecretWatch(t)
	})
}

// assertNoClusterWideSecretWatch: every Secret watch Kontinue runs for a
// selector is limited to a namespace and a service account.
func assertNoClusterWideSecretWatch(t *testing.T) {
	t.Helper()
	for key := range env.kontinue.m.Tracker().Active() {
		if key.GVR.Resource == "secrets" && key.Selector != api.StampedSelector {
			assert.True(t, key.Namespace != "" && key.As != "", "a Secret watch reaching beyond one namespace and account: %s", key)
		}
	}
}

// A render that runs out of time is retried with backoff (not left failed
// until something unrelated changes), and the step recovers by itself when
// the template is fixed. Kontinue runs with a short render bound so that
// the time-out is cheap; the template writes a byte now and then, so its
// abandoned render stops at the engine's own bound.
func TestSlowRenderIsRetriedWithBackoff(t *testing.T) {
	if env.external {
		t.Skip("restarts the in-process Kontinue with a short render bound")
	}
	env.kontinue.stop()
	env.kontinue = startKontinueWith(env.cfg, func(o *reconciler.Options) { o.RenderTimeout = 200 * time.Millisecond })
	t.Cleanup(func() {
		env.kontinue.stop()
		env.kontinue = startKontinue(env.cfg)
	})
	k := newKit(t)
	tmpl, chain := k.name("slow"), k.name("slow-chain")
	slow := `
  goTemplate: |
    {{ range until 60000 }}{{ range until 60000 }}{{ end }}x{{ end }}
    {apiVersion: v1, kind: ConfigMap, metadata: {name: slow}}`
	k.apply(k.templateYAML("ClusterTemplate", tmpl, slow))
	k.apply(k.chainYAML(chain, "", k.step("config", "ClusterTemplate", tmpl, "")))
	start := time.Now()
	k.workload("app", chain, "")
	w := k.waitStep("app", "config", "ResourceSubmitted", "False", "TemplateStampFailure")
	k.assertCond(k.stepCond(w, "config", "ResourceSubmitted"), "False", "TemplateStampFailure", "did not finish within")

	key := reconciler.Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: k.ns, Name: "app"}}
	time.Sleep(5 * time.Second)
	at := reconciles.since(key, start)
	require.GreaterOrEqual(t, len(at), 4, "a timed-out render is retried: reconciles at %v", at)
	first, last := at[1].Sub(at[0]), at[len(at)-1].Sub(at[len(at)-2])
	assert.Greater(t, last, 2*first, "the retries back off: gaps %s then %s", first, last)

	k.apply(k.templateYAML("ClusterTemplate", tmpl, `
  goTemplate: |
    {apiVersion: v1, kind: ConfigMap, metadata: {name: fast}}`))
	k.waitOwner("app", "Ready", "True", "Ready")
}

// A step whose outputs and last good object are too large for the API
// server to take in the owner's status (about 1 MiB each, twice): the
// status is still written, without them, and says so; it follows later
// changes instead of staying stale.
func TestHugeOutputsDoNotStickTheStatus(t *testing.T) {
	k := newKit(t)
	chain := k.name("huge-chain")
	var steps string
	for _, n := range []string{"a", "b"} {
		tmpl := k.name("huge-" + n)
		k.apply(k.templateYAML("ClusterConfigTemplate", tmpl, `
  configPath: .data
  alwaysSuccessful: true
  params: [{name: rev, default: "1"}]
  goTemplate: |
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: {{ .workload.metadata.name }}-huge-`+n+`}
    data:
      blob: {{ repeat 60000 "0123456789abcdef" }}
      rev: "{{ .params.rev }}"`))
		steps += k.step("config-"+n, "ClusterConfigTemplate", tmpl, "")
	}
	k.apply(k.chainYAML(chain, "", steps))
	k.workload("app", chain, "")
	w := k.waitOwner("app", "Ready", "True", "Ready")
	c := ownerCondition(w, "StatusTruncated")
	require.NotNil(t, c, "the owner says its status was cut")
	k.assertCond(c, "True", "StatusTooLarge", "outputValues", "not kept in status")
	k.waitEvent("app", "StatusTooLarge", "outputValues")
	k.assertQuiet(k.wl("app"))
	assert.Len(t, nested(w.Object, "status", "resources").([]any), 2)
	for _, n := range []string{"config-a", "config-b"} {
		assert.NotEmpty(t, outputsOf(stepStatus(w, n)), "outputs keep their preview and digest")
	}

	// A change reaches the status: it is not stuck on a write that fails.
	k.workload("app", chain, "\n  params: [{name: rev, value: \"2\"}]")
	k.waitObjStatus("app", func(u *unstructured.Unstructured) string {
		if g, og := u.GetGeneration(), nested(u.Object, "status", "observedGeneration"); fmt.Sprint(g) != fmt.Sprint(og) {
			return fmt.Sprintf("observedGeneration %v, generation %d", og, g)
		}
		return ""
	})
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-huge-b", k.dataIs("rev", "2"))
}

// Kontinue keeps a bounded number of impersonating clients: owners of more
// service accounts than that still converge (a dropped client is made
// again on demand), and the pool never grows past its bound.
func TestImpersonatingClientsAreBounded(t *testing.T) {
	if env.external {
		t.Skip("restarts the in-process Kontinue with a small client pool")
	}
	env.kontinue.stop()
	env.kontinue = startKontinueWith(env.cfg, func(o *reconciler.Options) { o.MaxClients = 2 })
	t.Cleanup(func() {
		env.kontinue.stop()
		env.kontinue = startKontinue(env.cfg)
	})
	kits := []*kit{newKit(t), newKit(t), newKit(t), newKit(t)}
	tmpl, chain := kits[0].name("pooled"), kits[0].name("pooled-chain")
	kits[0].apply(kits[0].cmTemplate(tmpl, "cfg", `{v: "1"}`))
	kits[0].apply(kits[0].chainYAML(chain, "", kits[0].step("config", "ClusterTemplate", tmpl, "")))
	for _, k := range kits {
		k.workload("app", chain, "")
	}
	for _, k := range kits {
		k.waitOwner("app", "Ready", "True", "Ready")
		assert.LessOrEqual(t, env.kontinue.m.Clients(), 2)
	}
	// The first namespace's client was dropped: a hand edit is still undone.
	k := kits[0]
	k.update(configMapGVR, k.ns, "app-cfg", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, "edited", "data", "v"))
	})
	k.waitObj(configMapGVR, "app-cfg", k.dataIs("v", "1"))
	assert.LessOrEqual(t, env.kontinue.m.Clients(), 2)
}

// A run whose outputs are too large for the Runnable's status: the status
// is still written, without them, and says why; smaller outputs later are
// written again.
func TestHugeRunOutputsDoNotStickTheRunnable(t *testing.T) {
	k := newRunKit(t)
	tmpl := uniq(k.ns, "bigout")
	apply(t, k.ns, k.runTemplate(tmpl, genName, "    a: status.report\n    b: status.report"))
	k.runnable("big", tmpl, "r1", "")
	runs := k.waitRevisions("big", "r1")
	k.finish(runs[0].GetName(), "True", map[string]any{"report": strings.Repeat("0123456789abcdef", 60000)})
	r := k.waitRunnable("big", "RunTemplateReady", "False", "OutputsTooLarge")
	k.assertRunnableMessage(r, "outputs of run ["+runs[0].GetName()+"]", "more than the")
	assert.Nil(t, nested(r.Object, "status", "outputs"))

	k.finish(runs[0].GetName(), "True", map[string]any{"report": "small"})
	k.waitRunnable("big", "Ready", "True", "Ready")
	assert.Equal(t, map[string]any{"a": "small", "b": "small"}, k.outputs("big"))
}

func (k *runKit) assertRunnableMessage(r *unstructured.Unstructured, parts ...string) {
	k.t.Helper()
	msg := fmt.Sprint(condition(r.Object, "RunTemplateReady", "status")["message"])
	for _, p := range parts {
		assert.Contains(k.t, msg, p)
	}
}

// A Runnable whose runs are of a kind whose list always fails (a CRD whose
// conversion webhook does not answer): its watch never syncs, and the
// Runnable, which waits for it, is looked at again less and less often
// instead of five times a second forever.
func TestWaitForAWatchThatNeverSyncsBacksOff(t *testing.T) {
	if env.external {
		t.Skip("counts the in-process Kontinue's reconciles")
	}
	k := newRunKit(t)
	suffix := strings.TrimPrefix(k.ns, "e2e-")
	kind, plural := "Stuck"+suffix, "stucks"+suffix
	apply(t, "", fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s.test.run}
spec:
  group: test.run
  scope: Namespaced
  names: {plural: %[2]s, singular: %[3]s, kind: %[1]s, listKind: %[1]sList}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {url: "https://127.0.0.1:1/convert"}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v2, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`, kind, plural, strings.ToLower(kind)))
	// One object stored as v1: listing v2 needs the webhook, which fails.
	v1 := schema.GroupVersionResource{Group: "test.run", Version: "v1", Resource: plural}
	eventually(t, 30*time.Second, func() string {
		_, err := env.dyn.Resource(v1).Namespace(k.ns).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "test.run/v1", "kind": kind, "metadata": map[string]any{"name": "stored",
				"labels": map[string]any{"kontinue.dev/stamped": "true"}}}}, metav1.CreateOptions{})
		if err != nil {
			return err.Error()
		}
		return ""
	})
	tmpl := uniq(k.ns, "stuck")
	apply(t, "", fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterRunTemplate
metadata: {name: %s}
spec:
  template:
    apiVersion: test.run/v2
    kind: %s
    metadata: {generateName: run-}
    spec: {revision: $(runnable.spec.inputs.revision)$}
`, tmpl, kind))
	start := time.Now()
	k.runnable("stuck", tmpl, "r1", "")
	key := reconciler.Key{Kind: "Runnable", NamespacedName: types.NamespacedName{Namespace: k.ns, Name: "stuck"}}
	time.Sleep(8 * time.Second)
	at := reconciles.since(key, start)
	t.Logf("%d reconciles in 8 s: %v", len(at), at)
	require.GreaterOrEqual(t, len(at), 3, "the Runnable waits for the watch and looks again")
	assert.LessOrEqual(t, len(at), 10, "a fixed 200 ms wait would be ~40 reconciles")
	first, last := at[1].Sub(at[0]), at[len(at)-1].Sub(at[len(at)-2])
	assert.Greater(t, last, 4*first, "the waits grow: %s then %s", first, last)
}

// A gated step whose object name is taken by someone else's object that
// carries Kontinue's labels and an input-set annotation, and reports no
// outcome: the step does not hold its inputs for that object (its health
// is not the step's), it reports the object as not its own.
func TestGatedStepIgnoresAForeignObject(t *testing.T) {
	k := newKit(t)
	tmpl, chain := k.name("gated"), k.name("gated-chain")
	k.apply(k.templateYAML("ClusterTemplate", tmpl, readyRule+`
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: taken}
    spec: {owner: $(workload.metadata.name)$}`))
	k.apply(k.chainYAML(chain, "", k.step("build", "ClusterTemplate", tmpl, "")))
	k.apply(fmt.Sprintf(`
apiVersion: test.run/v1alpha1
kind: Test
metadata:
  name: taken
  labels: {kontinue.dev/stamped: "true", carto.run/workload-name: app, carto.run/workload-namespace: %s, carto.run/resource-name: build}
  annotations: {kontinue.dev/applied-digest: forged}
spec: {mine: "yes"}
`, k.ns))
	before := get(t, testGVR, k.ns, "taken").GetResourceVersion()
	k.workload("app", chain, "")
	w := k.waitStep("app", "build", "ResourceSubmitted", "False", "StampedObjectNotOwned")
	k.assertCond(k.stepCond(w, "build", "ResourceSubmitted"), "False", "StampedObjectNotOwned", "Test ["+k.ns+"/taken]")
	assert.Nil(t, stepStatus(w, "build")["stampedRef"], "the person's object is not the step's")
	k.assertQuiet(k.wl("app"))
	assert.Equal(t, before, get(t, testGVR, k.ns, "taken").GetResourceVersion())
}
