package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/history"
	"kontinue.dev/kontinue/reconciler/verify"
	"kontinue.dev/kontinue/reconciler/verify/verifytest"
)

// TestVerifyBeforeUse (issue 49): a chain's step that requires a signature
// by the build key takes an image signed so (pinned to the digest checked),
// holds an unsigned one (it keeps its object; InputNotVerified names the
// rule and the digest; a Warning), and takes a later signed one. The
// owner's other step goes on meanwhile, and so does this tenant while
// another tenant's registry answers 503 (that tenant's step waits, Unknown,
// and goes in once the registry answers) and a third's hangs (its step
// waits, Unknown; its fetches hold no reconcile: check.Runner.Wait). The
// registry is
// go-containerregistry's, in process; signatures are where cosign keeps
// them (the sha256-<hex>.sig tag).
func TestVerifyBeforeUse(t *testing.T) {
	var failing atomic.Bool
	var hungUp atomic.Int32 // fetches of the hanging registry that ended (Kontinue's timeout)
	hang := make(chan struct{})
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() && strings.HasPrefix(r.URL.Path, "/v2/flaky/") {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v2/hangs/") {
			select { // answers nothing until the test ends (Kontinue's fetch times out)
			case <-hang:
			case <-r.Context().Done():
				hungUp.Add(1)
			}
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) }) // before srv.Close, which waits for the handlers
	host := strings.TrimPrefix(srv.URL, "http://")
	key, other := verifytest.NewKey("ecdsa"), verifytest.NewKey("ecdsa")

	// push pushes an image to repo:tag, signed by signers (cosign's tag).
	push := func(repo, tag string, signers ...*verifytest.Key) string {
		t.Helper()
		d, err := verifytest.Push(repo, tag)
		require.NoError(t, err)
		for _, s := range signers {
			require.NoError(t, verifytest.Attach(repo, d, "sig", s.Sign(repo, d)))
		}
		return d
	}
	app, flaky := host+"/app", host+"/flaky/app"
	signed := push(app, "signed", key)
	unsigned := push(app, "unsigned")
	wrongKey := push(app, "wrongkey", other)
	signed2 := push(app, "signed2", key)
	flakySigned := push(flaky, "v1", key)

	k := newKit(t)
	chain, build, deploy, cfg := k.name("chain"), k.name("build"), k.name("deploy"), k.name("cfg")
	k.apply(k.templateYAML("ClusterImageTemplate", build, `
  params: [{name: image, default: none}]
  imagePath: data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-build}
    data: {image: $(params.image)$}`))
	k.apply(k.templateYAML("ClusterTemplate", deploy, `
  params: [{name: note, default: none}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-deploy}
    data: {image: $(images.app.image)$, note: $(params.note)$}`))
	k.apply(k.cmTemplate(cfg, "cfg", `{greeting: hello}`))
	pem, err := json.Marshal(key.PublicPEM())
	require.NoError(t, err)
	k.apply(k.chainYAML(chain, "",
		k.step("build", "ClusterImageTemplate", build, "")+
			k.step("deploy", "ClusterTemplate", deploy, fmt.Sprintf(`images: [{name: app, resource: build}]
    verify:
      images: [{name: app, keys: [{publicKey: %s}]}]`, pem))+
			k.step("cfg", "ClusterTemplate", cfg, "")))
	image := func(ref string) string { return fmt.Sprintf("  params: [{name: image, value: %q}]", ref) }
	setParams := func(ref, note string) {
		k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "image", "value": ref},
				map[string]any{"name": "note", "value": note}}, "spec", "params"))
		})
	}
	setImage := func(ref string) { setParams(ref, "none") }

	// Another tenant, whose registry answers 503: its step waits (Unknown,
	// not failed), nothing of it is stamped, its other step goes on.
	failing.Store(true)
	b := newKit(t)
	b.workload("app", chain, image(flaky+":v1"))
	eventually(t, 30*time.Second, func() string {
		c := b.stepCond(get(t, workloadGVR, b.ns, "app"), "deploy", "ResourceSubmitted")
		if c == nil || !strings.Contains(fmt.Sprint(c["message"]), "503") {
			return fmt.Sprintf("deploy's ResourceSubmitted does not tell the registry's 503 yet: %v", c)
		}
		return ""
	})
	u := get(t, workloadGVR, b.ns, "app")
	b.assertCond(b.stepCond(u, "deploy", "ResourceSubmitted"), "Unknown", "InputVerifying", "image [app]", "503")
	b.waitStep("app", "cfg", "Ready", "True", "Ready")
	_, err = tryGet(configMapGVR, b.ns, "app-deploy")
	require.Error(t, err, "nothing stamped before the input is verified")

	// A third tenant, whose registry hangs (a tag that resolves to
	// nothing in time), for more images than there are fetch workers
	// (8): its steps wait, verifying, its other steps go on, and so does
	// every fetch of the first tenant below (2 workers kept free).
	h := newKit(t)
	var hung []string
	for i := range 10 {
		n := fmt.Sprintf("app%d", i)
		hung = append(hung, n)
		h.workload(n, chain, image(fmt.Sprintf("%s/hangs/app%d:v1", host, i)))
	}
	h.waitStep("app9", "cfg", "Ready", "True", "Ready")
	hangStart := time.Now()

	// Signed by the build key: taken, pinned to the digest checked.
	k.workload("app", chain, image(app+":signed"))
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-deploy", k.dataIs("image", app+"@"+signed))
	// Taken while every fetch of the hanging registry still hung: none had
	// to end (30 s, Kontinue's fetch timeout) to free a worker for it.
	t.Logf("the first tenant's image went in %v after the hanging registry's tenant began", time.Since(hangStart).Round(time.Millisecond))
	assert.Zero(t, hungUp.Load(), "a fetch of the hanging registry ended before the first tenant's was done: it waited for a worker")
	u = get(t, workloadGVR, k.ns, "app")
	assert.Equal(t, "Verified", nested(stepStatus(u, "deploy"), "verification").([]any)[0].(map[string]any)["result"])

	// Unsigned, then signed by another key: held, the step keeps its object.
	for _, c := range []struct{ tag, digest string }{{"unsigned", unsigned}, {"wrongkey", wrongKey}} {
		setImage(app + ":" + c.tag)
		eventually(t, 30*time.Second, func() string {
			u = get(t, workloadGVR, k.ns, "app")
			c2 := k.stepCond(u, "deploy", "ResourceSubmitted")
			if c2 == nil || c2["reason"] != "InputNotVerified" || !strings.Contains(fmt.Sprint(c2["message"]), c.digest) {
				return fmt.Sprintf("deploy's ResourceSubmitted: %v", c2)
			}
			return ""
		})
		k.assertCond(k.stepCond(u, "deploy", "ResourceSubmitted"), "False", "InputNotVerified", "image [app]", c.digest, "rule [signature]")
		v := nested(stepStatus(u, "deploy"), "verification").([]any)[0].(map[string]any)
		assert.Equal(t, "Refused", v["result"])
		assert.Equal(t, true, v["held"])
		assert.Equal(t, c.digest, v["digest"])
		k.waitEvent("app", "InputNotVerified", "step [deploy]", c.digest, "rule [signature]")
		assert.Equal(t, app+"@"+signed, nested(get(t, configMapGVR, k.ns, "app-deploy").Object, "data", "image"), "the step holds the signed image")
		// The owner's other step is not stalled by it.
		k.assertCond(k.stepCond(u, "cfg", "Ready"), "True", "Ready")
		// `kontinue get` says what was refused, and why.
		code, out, errOut := kontinueCLI(t, "get", "workload", "app", "-n", k.ns)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "verify    Refused image app "+strings.TrimPrefix(c.digest, "sha256:")[:12]+" (signature); the step keeps its previous image", out)
	}

	// A later signed image goes in.
	setImage(app + ":signed2")
	k.waitObj(configMapGVR, "app-deploy", k.dataIs("image", app+"@"+signed2))
	k.waitOwner("app", "Ready", "True", "Ready")

	// The tag moved to the unsigned image after it was verified: the step
	// renders again (a new note) with the digest that was checked, never
	// with what the tag names now.
	require.NoError(t, verifytest.Copy(app+":unsigned", app+":signed2"))
	setParams(app+":signed2", "after-the-move")
	cm := k.waitObj(configMapGVR, "app-deploy", k.dataIs("note", "after-the-move"))
	assert.Equal(t, app+"@"+signed2, nested(cm.Object, "data", "image"))

	// All this while the other tenant's registry failed: its step still
	// waits, Unknown. Once the registry answers, its retry (with backoff)
	// lets the signed image in.
	u = get(t, workloadGVR, b.ns, "app")
	b.assertCond(b.stepCond(u, "deploy", "ResourceSubmitted"), "Unknown", "InputVerifying")
	for _, n := range hung {
		h.assertCond(h.stepCond(get(t, workloadGVR, h.ns, n), "deploy", "ResourceSubmitted"), "Unknown", "InputVerifying", "image [app]")
		_, err = tryGet(configMapGVR, h.ns, n+"-deploy")
		require.Error(t, err, "nothing stamped while the registry hangs")
	}
	failing.Store(false)
	eventually(t, 2*time.Minute, func() string {
		cm, err := tryGet(configMapGVR, b.ns, "app-deploy")
		if err != nil {
			return err.Error()
		}
		if got := nested(cm.Object, "data", "image"); got != flaky+"@"+flakySigned {
			return fmt.Sprintf("app-deploy image %v", got)
		}
		return ""
	})
	b.waitOwner("app", "Ready", "True", "Ready")
}

// TestVerifyQuickDecisionWritesNoInterimStatus (issue 49's cost): a value
// first asked about is decided off the workers; an owner whose decision
// comes within the grace (check.Options.Grace, made long here so that a
// loaded machine's slow fetch does not count) writes its status once, with
// the input taken, never first InputVerifying: when the workload is
// created, and when its image changes to another signed one. Every status
// the workload goes through is watched, in order, until the one with the
// new image.
func TestVerifyQuickDecisionWritesNoInterimStatus(t *testing.T) {
	require.False(t, env.external, "the test restarts Kontinue in this process with a long grace")
	env.kontinue.stop()
	env.kontinue = startKontinueWith(env.cfg, func(o *reconciler.Options) { o.Verify.Options.Grace = 2 * time.Minute })
	t.Cleanup(func() {
		env.kontinue.stop()
		env.kontinue = startKontinue(env.cfg)
	})
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	app := strings.TrimPrefix(srv.URL, "http://") + "/app"
	key := verifytest.NewKey("ecdsa")
	digests := map[string]string{}
	for _, tag := range []string{"v1", "v2"} {
		d, err := verifytest.Push(app, tag)
		require.NoError(t, err)
		require.NoError(t, verifytest.Attach(app, d, "sig", key.Sign(app, d)))
		digests[tag] = d
	}

	k := newKit(t)
	chain, build, deploy := k.name("chain"), k.name("build"), k.name("deploy")
	pem, err := json.Marshal(key.PublicPEM())
	require.NoError(t, err)
	k.imageChain(chain, build, deploy, fmt.Sprintf(` [{name: app, keys: [{publicKey: %s}]}]`, pem))

	w, err := env.dyn.Resource(workloadGVR).Namespace(k.ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=app"})
	require.NoError(t, err)
	defer w.Stop()
	var reasons []string
	// until reads the watch until deploy's verification shows digest
	// verified, noting each reason deploy's ResourceSubmitted goes through.
	until := func(digest string) {
		t.Helper()
		timeout := time.After(2 * time.Minute)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				require.True(t, ok, "the watch ended")
				o, isObj := ev.Object.(*unstructured.Unstructured)
				if !isObj {
					continue
				}
				if c := k.stepCond(o, "deploy", "ResourceSubmitted"); c != nil && (len(reasons) == 0 || reasons[len(reasons)-1] != c["reason"]) {
					reasons = append(reasons, fmt.Sprint(c["reason"]))
				}
				if vs, _ := nested(stepStatus(o, "deploy"), "verification").([]any); len(vs) == 1 {
					if v := vs[0].(map[string]any); v["result"] == "Verified" && v["digest"] == digest {
						return
					}
				}
			case <-timeout:
				t.Fatalf("deploy never took %s; its ResourceSubmitted went %v", digest, reasons)
			}
		}
	}
	k.workload("app", chain, fmt.Sprintf("  params: [{name: image, value: %q}]", app+":v1"))
	until(digests["v1"])
	k.waitObj(configMapGVR, "app-deploy", k.dataIs("image", app+"@"+digests["v1"]))
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "image", "value": app + ":v2"}}, "spec", "params"))
	})
	until(digests["v2"])
	k.waitObj(configMapGVR, "app-deploy", k.dataIs("image", app+"@"+digests["v2"]))
	assert.NotContains(t, reasons, "InputVerifying", "deploy's ResourceSubmitted went %v", reasons)
}

// TestVerifyReadsTheRegistryAsTheServiceAccount (issue 49): a registry
// that needs credentials is read with the imagePullSecrets of the owner's
// service account, read as that account: an account that may read its
// pull Secret verifies a signed image; one naming the same Secret without
// the right to read it reads the registry anonymously (401: the step keeps
// verifying, Unknown), never with the Secret read by Kontinue's rights.
func TestVerifyReadsTheRegistryAsTheServiceAccount(t *testing.T) {
	const user, pass = "builder", "s3cret"
	var closed atomic.Bool
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every request needs the credentials once the test pushed.
		if u, p, ok := r.BasicAuth(); closed.Load() && (!ok || u != user || p != pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	key := verifytest.NewKey("ecdsa")
	app := host + "/app"
	d, err := verifytest.Push(app, "v1")
	require.NoError(t, err)
	require.NoError(t, verifytest.Attach(app, d, "sig", key.Sign(app, d)))
	closed.Store(true)

	k := newKit(t)
	auth, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"username": user, "password": pass}}})
	require.NoError(t, err)
	cfgJSON, err := json.Marshal(string(auth))
	require.NoError(t, err)
	k.apply(fmt.Sprintf(`
apiVersion: v1
kind: Secret
metadata: {name: regcred}
type: kubernetes.io/dockerconfigjson
stringData: {.dockerconfigjson: %s}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: puller}
imagePullSecrets: [{name: regcred}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: noread}
imagePullSecrets: [{name: regcred}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: read-pull-secret}
rules:
- {apiGroups: [""], resources: [serviceaccounts], resourceNames: [puller], verbs: [get]}
- {apiGroups: [""], resources: [secrets], resourceNames: [regcred], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: puller-reads-its-pull-secret}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-pull-secret}
subjects: [{kind: ServiceAccount, name: puller}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: stamper-accounts}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %s}
subjects: [{kind: ServiceAccount, name: puller}, {kind: ServiceAccount, name: noread}]
`, cfgJSON, stamperRole))
	for _, sa := range []string{"puller", "noread"} {
		eventually(t, 30*time.Second, func() string {
			if _, err := tryGet(saGVR, k.ns, sa); err != nil {
				return err.Error()
			}
			return ""
		})
	}

	chain, build, deploy := k.name("chain"), k.name("build"), k.name("deploy")
	pem, err := json.Marshal(key.PublicPEM())
	require.NoError(t, err)
	k.imageChain(chain, build, deploy, fmt.Sprintf(` [{name: app, keys: [{publicKey: %s}]}]`, pem))
	for _, sa := range []string{"puller", "noread"} {
		k.workload(sa, chain, fmt.Sprintf("  serviceAccountName: %s\n  params: [{name: image, value: %q}]", sa, app+":v1"))
	}

	k.waitOwner("puller", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "puller-deploy", k.dataIs("image", app+"@"+d))

	eventually(t, 30*time.Second, func() string {
		c := k.stepCond(get(t, workloadGVR, k.ns, "noread"), "deploy", "ResourceSubmitted")
		if c == nil || !strings.Contains(strings.ToLower(fmt.Sprint(c["message"])), "unauthorized") {
			return fmt.Sprintf("noread's deploy does not say the registry refused it: %v", c)
		}
		return ""
	})
	k.assertCond(k.stepCond(get(t, workloadGVR, k.ns, "noread"), "deploy", "ResourceSubmitted"), "Unknown", "InputVerifying")
	_, err = tryGet(configMapGVR, k.ns, "noread-deploy")
	require.Error(t, err, "nothing stamped for the account that may not read the pull secret")
}

// TestVerifyKontinueStatements (issue 49): a step can require that its
// input was produced by this cluster's chain: the statement Kontinue signed
// (--attestation-key) of the earlier step's outputs names the image's
// digest. The deploy step takes the image once the build step's statement
// is in the owner's history, read as the owner's service account.
func TestVerifyKontinueStatements(t *testing.T) {
	require.False(t, env.external, "the test restarts Kontinue in this process with a key")
	priv, _ := keyFiles(t)
	key, err := attest.LoadKeyFile(priv, true)
	require.NoError(t, err)
	env.kontinue.stop()
	env.kontinue = startKontinueWith(env.cfg, func(o *reconciler.Options) {
		o.Attest = attest.NewSigner(key, "e2e")
		o.Verify.Key = key
	})
	t.Cleanup(func() {
		env.kontinue.stop()
		env.kontinue = startKontinue(env.cfg)
	})

	k := newKit(t)
	chain, build, deploy := k.name("chain"), k.name("build"), k.name("deploy")
	k.imageChainWith(chain, build, deploy, "\n  healthRule: {alwaysHealthy: {}}", " [{name: app, kontinue: {}}]")
	image := "registry.example/app@sha256:" + strings.Repeat("c1", 32)
	// Every status deploy goes through on the way: the statement of
	// build's output is written just after the status that publishes it,
	// and deploy, checking in between, waits for it (InputVerifying); it
	// is never refused (InputNotVerified) for a value Kontinue made.
	w, err := env.dyn.Resource(workloadGVR).Namespace(k.ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=app"})
	require.NoError(t, err)
	defer w.Stop()
	var reasons []string
	k.workload("app", chain, fmt.Sprintf("  params: [{name: image, value: %q}]", image))

	k.waitObj(configMapGVR, "app-deploy", k.dataIs("image", image))
	u := k.waitOwner("app", "Ready", "True", "Ready")
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			if o, ok := ev.Object.(*unstructured.Unstructured); ok {
				if c := k.stepCond(o, "deploy", "ResourceSubmitted"); c != nil && (len(reasons) == 0 || reasons[len(reasons)-1] != c["reason"]) {
					reasons = append(reasons, fmt.Sprint(c["reason"]))
				}
			}
		case <-time.After(time.Second):
			done = true
		}
	}
	assert.NotContains(t, reasons, "InputNotVerified", "deploy's ResourceSubmitted went %v", reasons)
	v := nested(stepStatus(u, "deploy"), "verification").([]any)[0].(map[string]any)
	assert.Equal(t, "Verified", v["result"])
	assert.Equal(t, "kontinue", v["rule"])
	assert.Equal(t, "sha256:"+strings.Repeat("c1", 32), v["digest"])
}

// A policy that can never be used and that the CRD's rules cannot see (an
// inline key that is no public key, a regular expression that does not
// compile) is said once on the chain the platform team wrote
// (VerifyPoliciesValid False, Ready False), not only on each owner's step;
// fixed, the chain is Ready again. A chain without policies carries
// Cartographer's conditions only.
func TestVerifyBadPolicyOnTheChain(t *testing.T) {
	k := newKit(t)
	chain, build, deploy := k.name("chain"), k.name("build"), k.name("deploy")
	k.apply(k.templateYAML("ClusterImageTemplate", build, `
  imagePath: data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-build}
    data: {image: registry.example/app}`))
	k.apply(k.cmTemplate(deploy, "deploy", `{image: $(images.app.image)$}`))
	withPolicy := func(policy string) string {
		steps := k.step("build", "ClusterImageTemplate", build, "")
		if policy == "" {
			return k.chainYAML(chain, "", steps+k.step("deploy", "ClusterTemplate", deploy, `images: [{name: app, resource: build}]`))
		}
		return k.chainYAML(chain, "", steps+k.step("deploy", "ClusterTemplate", deploy, `images: [{name: app, resource: build}]
    verify:
      images: [{name: app, `+policy+`}]`))
	}
	k.apply(withPolicy(`keys: [{publicKey: "not a key"}]`))
	c := k.waitChain(chain, "VerifyPoliciesValid", "False", "InvalidVerifyPolicy")
	k.assertCond(c, "False", "InvalidVerifyPolicy", "step [deploy] verify image [app]: keys[0]")
	k.waitChain(chain, "Ready", "False", "InvalidVerifyPolicy")

	k.apply(withPolicy(`kontinue: {}`))
	k.waitChain(chain, "VerifyPoliciesValid", "True", "Valid")
	k.waitChain(chain, "Ready", "True", "Ready")

	k.apply(withPolicy(""))
	k.waitChain(chain, "Ready", "True", "Ready")
	eventually(t, 20*time.Second, func() string {
		for _, c := range nested(get(t, chainGVR, "", chain).Object, "status", "conditions").([]any) {
			if c.(map[string]any)["type"] == "VerifyPoliciesValid" {
				return "a chain without policies still says VerifyPoliciesValid"
			}
		}
		return ""
	})
}

// TestVerifyDeliveryRequiresKontinueStatements (issue 49), a chain end to
// end: a Workload's chain takes a source, an image (its deliver step
// requires the build key's signature, cosign's tag in the registry) and
// stamps a Deliverable with the image it verified; the ClusterDelivery's
// deploy step requires Kontinue's own statements of that image (rule
// kontinue: a statement Kontinue signed of a step's outputs, of this
// Deliverable or of the Workload that stamped it).
//
//   - The honest path delivers: the image the Workload's chain built and
//     Kontinue signed a statement of.
//   - A Deliverable made by hand, claiming the Workload as its upstream,
//     delivers the Workload's image; its source edited to an image no
//     statement of the Workload names, and the Workload's statement of its
//     image step altered to name that image, is held: InputNotVerified
//     naming the rule and the digest, the deploy step keeps its object and
//     outputs, a Warning event. A statement Kontinue really signed, but of
//     another Workload (whose chain checks nothing), copied into the
//     history does not count either: a statement speaks only of the owner
//     it was signed for.
//   - A Deliverable no Workload stamped (its image not produced by this
//     cluster's chain for it) is refused, whatever registry signatures its
//     image has.
//   - An unsigned image stops at the Workload's first step that checks it:
//     the Deliverable keeps the verified image.
func TestVerifyDeliveryRequiresKontinueStatements(t *testing.T) {
	require.False(t, env.external, "the test restarts Kontinue in this process with a key")
	priv, _ := keyFiles(t)
	akey, err := attest.LoadKeyFile(priv, true)
	require.NoError(t, err)
	env.kontinue.stop()
	env.kontinue = startKontinueWith(env.cfg, func(o *reconciler.Options) {
		o.Attest = attest.NewSigner(akey, "e2e")
		o.Verify.Key = akey
	})
	t.Cleanup(func() {
		env.kontinue.stop()
		env.kontinue = startKontinue(env.cfg)
	})

	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	app := strings.TrimPrefix(srv.URL, "http://") + "/app"
	build := verifytest.NewKey("ecdsa")
	push := func(tag string, signers ...*verifytest.Key) string {
		t.Helper()
		d, err := verifytest.Push(app, tag)
		require.NoError(t, err)
		for _, s := range signers {
			require.NoError(t, verifytest.Attach(app, d, "sig", s.Sign(app, d)))
		}
		return d
	}
	good, unsigned, rogue := push("good", build), push("unsigned"), push("rogue")

	k := newKit(t)
	k.apply(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: stamp-deliverables}
rules:
- {apiGroups: [carto.run], resources: [deliverables], verbs: [get, list, watch, create, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: stamp-deliverables}
subjects: [{kind: ServiceAccount, name: default}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: stamp-deliverables}
`)
	chain, devChain, delivery := k.name("chain"), k.name("dev"), k.name("delivery")
	src, img, dlv, dsrc, deploy := k.name("src"), k.name("img"), k.name("dlv"), k.name("dsrc"), k.name("deploy")
	k.apply(k.templateYAML("ClusterSourceTemplate", src, `
  params: [{name: commit, default: none}]
  urlPath: .data.url
  revisionPath: .data.revision
  healthRule: {alwaysHealthy: {}}
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-src}
    data: {url: $(workload.spec.source.git.url)$, revision: $(params.commit)$}`))
	k.apply(k.templateYAML("ClusterImageTemplate", img, `
  params: [{name: image, default: none}]
  imagePath: .data.image
  healthRule: {alwaysHealthy: {}}
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-img}
    data: {image: $(params.image)$, revision: $(sources.src.revision)$}`))
	k.apply(k.templateYAML("ClusterTemplate", dlv, fmt.Sprintf(`
  template:
    apiVersion: carto.run/v1alpha1
    kind: Deliverable
    metadata: {name: $(workload.metadata.name)$, labels: {app.example.com/delivery: %s}}
    spec:
      source: {image: $(images.app.image)$}`, delivery)))
	k.apply(k.templateYAML("ClusterSourceTemplate", dsrc, `
  urlPath: .data.url
  revisionPath: .data.revision
  healthRule: {alwaysHealthy: {}}
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-dsrc}
    data: {url: $(deliverable.spec.source.image)$, revision: v1}`))
	k.apply(k.templateYAML("ClusterTemplate", deploy, `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-live}
    data: {image: $(sources.app.url)$}`))
	pem, err := json.Marshal(build.PublicPEM())
	require.NoError(t, err)
	k.apply(k.chainYAML(chain, "",
		k.step("source", "ClusterSourceTemplate", src, "")+
			k.step("image", "ClusterImageTemplate", img, "sources: [{name: src, resource: source}]")+
			k.step("deliver", "ClusterTemplate", dlv, fmt.Sprintf(`images: [{name: app, resource: image}]
    verify:
      images: [{name: app, keys: [{publicKey: %s}]}]`, pem))))
	// A chain that checks nothing: what any app team may put an image on.
	k.apply(k.chainYAML(devChain, "",
		k.step("source", "ClusterSourceTemplate", src, "")+
			k.step("image", "ClusterImageTemplate", img, "sources: [{name: src, resource: source}]")))
	k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[1]s}
spec:
  selector: {app.example.com/delivery: %[1]s}
  resources:
  - name: source
    templateRef: {kind: ClusterSourceTemplate, name: %[2]s}
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: %[3]s}
    sources: [{name: app, resource: source}]
    verify:
      sources: [{name: app, kontinue: {}}]
`, delivery, dsrc, deploy))
	params := func(image string) string {
		return fmt.Sprintf("  params: [{name: commit, value: c1}, {name: image, value: %q}]", image)
	}
	deliverable := func(name, image string, upstream *unstructured.Unstructured) {
		u := obj(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Deliverable
metadata: {name: %s, labels: {app.example.com/delivery: %s}}
spec: {source: {image: %q}}`, name, delivery, image))
		if upstream != nil {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "carto.run/v1alpha1", Kind: "Workload",
				Name: upstream.GetName(), UID: upstream.GetUID(), Controller: ptr(true)}})
		}
		_, err := env.dyn.Resource(deliverableGVR).Namespace(k.ns).Apply(context.Background(), name, u, metav1.ApplyOptions{FieldManager: "app-team", Force: true})
		require.NoError(t, err)
	}
	deployCond := func(name string) map[string]any {
		u, err := tryGet(deliverableGVR, k.ns, name)
		if err != nil {
			return nil
		}
		return stepCondition(u, "deploy", "ResourceSubmitted")
	}
	// refused waits for name's deploy step to hold digest under rule kontinue.
	refused := func(name, digest string, parts ...string) map[string]any {
		t.Helper()
		eventually(t, 90*time.Second, func() string {
			c := deployCond(name)
			if c == nil || c["reason"] != "InputNotVerified" || !strings.Contains(fmt.Sprint(c["message"]), digest) {
				return fmt.Sprintf("%s's deploy ResourceSubmitted: %v", name, c)
			}
			for _, p := range parts {
				if !strings.Contains(fmt.Sprint(c["message"]), p) {
					return fmt.Sprintf("%s's deploy ResourceSubmitted does not say %q: %v", name, p, c)
				}
			}
			return ""
		})
		c := deployCond(name)
		k.assertCond(c, "False", "InputNotVerified", "source [app]", digest, "rule [kontinue]")
		return c
	}
	ref := func(d string) string { return app + "@" + d }

	// The honest path: the Workload's chain verifies the signed image and
	// stamps the Deliverable with it; the delivery takes it on Kontinue's
	// statement of the Workload's image step.
	k.workload("app", chain, params(ref(good)))
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(deliverableGVR, "app", func(u *unstructured.Unstructured) string {
		if got := nested(u.Object, "spec", "source", "image"); got != ref(good) {
			return fmt.Sprintf("Deliverable app's image %v", got)
		}
		return ""
	})
	k.waitObj(configMapGVR, "app-live", k.dataIs("image", ref(good)))
	u := waitOwner(t, deliverableGVR, k.ns, "app", "Ready", "True", "Ready")
	v := nested(stepStatus(u, "deploy"), "verification").([]any)[0].(map[string]any)
	assert.Equal(t, "Verified", v["result"])
	assert.Equal(t, "kontinue", v["rule"])
	assert.Equal(t, good, v["digest"])

	// A Deliverable made by hand that names the Workload as its upstream
	// delivers what the Workload's chain produced ...
	wl := get(t, workloadGVR, k.ns, "app")
	deliverable("claimed", ref(good), wl)
	k.waitObj(configMapGVR, "claimed-live", k.dataIs("image", ref(good)))
	before := stepStatus(waitOwner(t, deliverableGVR, k.ns, "claimed", "Ready", "True", "Ready"), "deploy")

	// ... but not an image the Workload's statements do not name, with the
	// statement of its image step altered to name it (its signature kept).
	hist := history.Name("Workload", "app")
	dataKey := attest.DataKey("image")
	k.update(configMapGVR, k.ns, hist, func(u *unstructured.Unstructured) {
		s, _, _ := unstructured.NestedString(u.Object, "data", dataKey)
		require.NotEmpty(t, s, "the Workload's history has the statement of its image step")
		require.NoError(t, unstructured.SetNestedField(u.Object, alterStatement(t, s, good, rogue), "data", dataKey))
	})
	deliverable("claimed", ref(rogue), wl)
	c := refused("claimed", rogue, "did not verify")
	assert.NotContains(t, fmt.Sprint(c["message"]), "waiting")
	waitEventIn(t, k.ns, "claimed", "InputNotVerified", "step [deploy]", rogue, "rule [kontinue]")
	u = get(t, deliverableGVR, k.ns, "claimed")
	assert.Equal(t, ref(good), nested(get(t, configMapGVR, k.ns, "claimed-live").Object, "data", "image"), "the deploy step keeps its object")
	assert.Equal(t, before["outputs"], stepStatus(u, "deploy")["outputs"], "and its outputs")
	v = nested(stepStatus(u, "deploy"), "verification").([]any)[0].(map[string]any)
	assert.Equal(t, true, v["held"])
	assert.Equal(t, rogue, v["digest"])

	// A statement Kontinue did sign naming the image, but of another
	// Workload (on a chain that checks nothing), copied into the history
	// in place of the altered one: not this Workload's, it does not count.
	k.workload("dev", devChain, params(ref(rogue)))
	k.waitOwner("dev", "Ready", "True", "Ready")
	var devStatement string
	eventually(t, 30*time.Second, func() string {
		s, _, _ := unstructured.NestedString(get(t, configMapGVR, k.ns, history.Name("Workload", "dev")).Object, "data", dataKey)
		if s == "" {
			return "no statement of dev's image step yet"
		}
		devStatement = s
		return ""
	})
	k.update(configMapGVR, k.ns, hist, func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, devStatement, "data", dataKey))
	})
	refused("claimed", rogue, "Workload "+k.ns+"/dev")
	assert.Equal(t, ref(good), nested(get(t, configMapGVR, k.ns, "claimed-live").Object, "data", "image"), "the deploy step keeps its object")

	// A Deliverable no Workload stamped: nothing of this cluster's chain
	// vouches for its image, signed by the build key though it is.
	deliverable("stray", ref(good), nil)
	refused("stray", good, "no statement signed by Kontinue")
	_, err = tryGet(configMapGVR, k.ns, "stray-live")
	require.Error(t, err, "nothing deployed for a Deliverable whose image nothing vouches for")
	waitEventIn(t, k.ns, "stray", "InputNotVerified", "step [deploy]", good, "rule [kontinue]")

	// An unsigned image stops at the Workload's deliver step: the
	// Deliverable keeps the image that passed. (Last: the Workload's image
	// step then has a statement of the unsigned image, no longer of the
	// good one, which the Deliverables above were checked against.)
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "commit", "value": "c2"},
			map[string]any{"name": "image", "value": ref(unsigned)}}, "spec", "params"))
	})
	eventually(t, 30*time.Second, func() string {
		c := k.stepCond(get(t, workloadGVR, k.ns, "app"), "deliver", "ResourceSubmitted")
		if c == nil || c["reason"] != "InputNotVerified" || !strings.Contains(fmt.Sprint(c["message"]), unsigned) {
			return fmt.Sprintf("deliver's ResourceSubmitted: %v", c)
		}
		return ""
	})
	k.assertCond(k.stepCond(get(t, workloadGVR, k.ns, "app"), "deliver", "ResourceSubmitted"), "False", "InputNotVerified", unsigned, "rule [signature]")
	assert.Equal(t, ref(good), nested(get(t, deliverableGVR, k.ns, "app").Object, "spec", "source", "image"))
	assert.Equal(t, ref(good), nested(get(t, configMapGVR, k.ns, "app-live").Object, "data", "image"))

	// All along, the honest Deliverable kept its image.
	assert.Equal(t, ref(good), nested(get(t, configMapGVR, k.ns, "app-live").Object, "data", "image"))
}

// alterStatement rewrites the in-toto statement inside a DSSE envelope
// (from → to, the digests without their algorithm), keeping its signature:
// a history edited by hand.
func alterStatement(t *testing.T, env, from, to string) string {
	var e map[string]any
	require.NoError(t, json.Unmarshal([]byte(env), &e))
	p, err := base64.StdEncoding.DecodeString(e["payload"].(string))
	require.NoError(t, err)
	altered := strings.ReplaceAll(string(p), strings.TrimPrefix(from, "sha256:"), strings.TrimPrefix(to, "sha256:"))
	require.NotEqual(t, string(p), altered, "the statement names %s", from)
	e["payload"] = base64.StdEncoding.EncodeToString([]byte(altered))
	b, err := json.Marshal(e)
	require.NoError(t, err)
	return string(b)
}

// TestVerifyReferrerBundles (issue 49): signatures and attestations
// stored as Sigstore bundles attached to the image as OCI 1.1 referrers
// (as cosign stores them in its bundle format), read from the registry
// (go-containerregistry's, in process) by the referrers API and decided
// by sigstore-go: a signature and SLSA provenance by the build key pass,
// pinned; bundles by another key, and provenance of another digest
// attached to this one, are held. Keyless: a bundle whose Rekor entry the
// trusted root's log signed passes; one whose entry was altered is held
// (the log is not queried: the entry the bundle carries is checked
// against the root's log key).
func TestVerifyReferrerBundles(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	app := strings.TrimPrefix(srv.URL, "http://") + "/app"
	key, other := verifytest.NewKey("ecdsa"), verifytest.NewKey("ecdsa")
	sigstore := verifytest.NewSigstore()
	const builder = "https://ci.example/builder"
	push := func(tag string, bundles ...func(digest string) []byte) string {
		t.Helper()
		d, err := verifytest.Push(app, tag)
		require.NoError(t, err)
		for _, b := range bundles {
			require.NoError(t, verifytest.AttachBundle(app, d, b(d)))
		}
		return d
	}
	signed := func(k *verifytest.Key) func(string) []byte { return k.SignBundle }
	provenance := func(k *verifytest.Key, of string) func(string) []byte {
		return func(d string) []byte {
			if of != "" {
				d = of
			}
			return k.AttestBundle(d, verifytest.SLSAType, verifytest.SLSA(builder))
		}
	}
	keyless := func(alter func(b *protobundle.Bundle)) func(string) []byte {
		return func(d string) []byte {
			b := sigstore.Bundle("alice@example.com", "https://issuer.example", d, verify.CosignSignPredicate, nil)
			if alter != nil {
				alter(b)
			}
			return verifytest.BundleJSON(b)
		}
	}
	good := push("good", signed(key), provenance(key, ""))
	wrongKey := push("wrongkey", signed(other), provenance(other, ""))
	otherDigest := push("otherdigest", signed(key), provenance(key, good))
	logged := push("logged", keyless(nil))
	altered := push("altered", keyless(func(b *protobundle.Bundle) {
		b.VerificationMaterial.TlogEntries[0].IntegratedTime -= 60
	}))

	k := newKit(t)
	rootJSON, err := json.Marshal(string(sigstore.TrustedRoot(sigstore)))
	require.NoError(t, err)
	k.apply(fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: sigstore-root}
data: {trusted_root.json: %s}
`, rootJSON))
	chain, keylessChain, build, deploy := k.name("chain"), k.name("keyless"), k.name("build"), k.name("deploy")
	pem, err := json.Marshal(key.PublicPEM())
	require.NoError(t, err)
	k.imageChain(chain, build, deploy, fmt.Sprintf(`
      - name: app
        keys: [{publicKey: %s}]
        attestations: [{predicateType: %q, builderID: %q}]`, pem, verifytest.SLSAType, builder))
	k.imageChain(keylessChain, build, deploy, fmt.Sprintf(`
      - name: app
        keyless:
        - subject: alice@example.com
          issuer: https://issuer.example
          trustedRoot: {configMapRef: {namespace: %s, name: sigstore-root, key: trusted_root.json}}`, k.ns))
	image := func(tag string) string { return fmt.Sprintf("  params: [{name: image, value: %q}]", app+":"+tag) }
	for _, w := range []struct{ name, chain string }{{"good", chain}, {"wrongkey", chain}, {"otherdigest", chain}, {"logged", keylessChain}, {"altered", keylessChain}} {
		k.workload(w.name, w.chain, image(w.name))
	}

	for _, w := range []struct{ name, digest string }{{"good", good}, {"logged", logged}} {
		k.waitObj(configMapGVR, w.name+"-deploy", k.dataIs("image", app+"@"+w.digest))
		u := k.waitOwner(w.name, "Ready", "True", "Ready")
		v := nested(stepStatus(u, "deploy"), "verification").([]any)[0].(map[string]any)
		assert.Equal(t, "Verified", v["result"], w.name)
		assert.Equal(t, w.digest, v["digest"], w.name)
	}
	for _, w := range []struct{ name, digest, rule, why string }{
		{"wrongkey", wrongKey, "signature", "none of the 1 signatures"},
		{"otherdigest", otherDigest, "attestation " + verifytest.SLSAType, "does not match any digest"},
		{"altered", altered, "signature", "log inclusion"},
	} {
		eventually(t, 30*time.Second, func() string {
			c := k.stepCond(get(t, workloadGVR, k.ns, w.name), "deploy", "ResourceSubmitted")
			if c == nil || c["reason"] != "InputNotVerified" {
				return fmt.Sprintf("%s's deploy ResourceSubmitted: %v", w.name, c)
			}
			return ""
		})
		k.assertCond(k.stepCond(get(t, workloadGVR, k.ns, w.name), "deploy", "ResourceSubmitted"), "False", "InputNotVerified",
			"image [app] "+w.digest, "rule ["+w.rule+"]", w.why)
		k.waitEvent(w.name, "InputNotVerified", "step [deploy]", w.digest)
		_, err := tryGet(configMapGVR, k.ns, w.name+"-deploy")
		require.Error(t, err, "nothing stamped for %s", w.name)
	}
}

// TestVerifyCLI (issue 49, the user side): `kontinue verify` checks an
// image against the chain in the cluster, with the controller's decision
// and the key the policy reads from a Secret: signed by the build key it
// passes (exit 0, the signer named); signed by another key it is refused
// (exit 1, rule signature and the digest named). `kontinue trace` shows
// the step's verification of the image the controller refused.
func TestVerifyCLI(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // the CLI reads the registry anonymously
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	app := strings.TrimPrefix(srv.URL, "http://") + "/app"
	key, other := verifytest.NewKey("ecdsa"), verifytest.NewKey("ecdsa")
	push := func(tag string, by *verifytest.Key) string {
		t.Helper()
		d, err := verifytest.Push(app, tag)
		require.NoError(t, err)
		require.NoError(t, verifytest.Attach(app, d, "sig", by.Sign(app, d)))
		return d
	}
	signed, wrongKey := push("signed", key), push("wrongkey", other)

	k := newKit(t)
	chain, build, deploy := k.name("chain"), k.name("build"), k.name("deploy")
	pem, err := json.Marshal(key.PublicPEM())
	require.NoError(t, err)
	k.apply(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: build-key}\nstringData: {cosign.pub: %s}\n", pem))
	k.imageChain(chain, build, deploy, fmt.Sprintf(` [{name: app, keys: [{secretRef: {namespace: %s, name: build-key, key: cosign.pub}}]}]`, k.ns))

	// Signed by the build key: passes, by tag (resolved to its digest).
	code, out, errOut := kontinueCLI(t, "verify", app+":signed", "--chain", chain)
	require.Equal(t, 0, code, errOut+out)
	assert.Contains(t, out, "step [deploy] image [app]: Verified "+signed, out)
	assert.Contains(t, out, "✔ signature: signature 0 (cosign's sha256-"+strings.TrimPrefix(signed, "sha256:")+".sig tag) by keys[0]", out)

	// Signed by another key: refused, naming the rule and the digest.
	code, out, errOut = kontinueCLI(t, "verify", app+":wrongkey", "--chain", "clustersupplychain/"+chain, "--step", "deploy", "--input", "app")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "step [deploy] image [app]: Refused "+wrongKey, out)
	assert.Contains(t, out, "✗ signature: none of the 1 signatures of "+wrongKey+" is by a trusted signer", out)
	assert.Contains(t, errOut, "refused by 1 of 1 policies")

	// The controller decides alike; trace shows the step's verification.
	k.workload("app", chain, fmt.Sprintf("  params: [{name: image, value: %q}]", app+":signed"))
	k.waitObj(configMapGVR, "app-deploy", k.dataIs("image", app+"@"+signed))
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "image", "value": app + ":wrongkey"}}, "spec", "params"))
	})
	eventually(t, 30*time.Second, func() string {
		c := k.stepCond(get(t, workloadGVR, k.ns, "app"), "deploy", "ResourceSubmitted")
		if c == nil || c["reason"] != "InputNotVerified" || !strings.Contains(fmt.Sprint(c["message"]), wrongKey) {
			return fmt.Sprintf("deploy's ResourceSubmitted: %v", c)
		}
		return ""
	})
	code, out, errOut = kontinueCLI(t, "trace", "workload", "app", "-n", k.ns, "--step", "deploy")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "verify Refused image app "+strings.TrimPrefix(wrongKey, "sha256:")[:12]+" (signature); the step keeps its previous image: ", out)
}

// imageChain applies templates build (a ConfigMap holding the Workload's
// param image, published as its image) and deploy (a ConfigMap holding
// the image it takes from build), and chain: build, then deploy, whose
// input app is verified by images (the YAML after `verify: images:`).
func (k *kit) imageChain(chain, build, deploy, images string) {
	k.imageChainWith(chain, build, deploy, "", images)
}

// imageChainWith is imageChain with more of build's spec (buildSpec, YAML
// lines after its imagePath).
func (k *kit) imageChainWith(chain, build, deploy, buildSpec, images string) {
	k.apply(k.templateYAML("ClusterImageTemplate", build, `
  params: [{name: image, default: none}]
  imagePath: data.image`+buildSpec+`
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-build}
    data: {image: $(params.image)$}`))
	k.apply(k.templateYAML("ClusterTemplate", deploy, `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-deploy}
    data: {image: $(images.app.image)$}`))
	k.apply(k.chainYAML(chain, "", k.step("build", "ClusterImageTemplate", build, "")+
		k.step("deploy", "ClusterTemplate", deploy, "images: [{name: app, resource: build}]\n    verify:\n      images:"+images)))
}
