package e2e

import (
	"context"
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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/verify/verifytest"
)

// TestVerifyBeforeUse (issue 49): a chain's step that requires a signature
// by the build key takes an image signed so (pinned to the digest checked),
// holds an unsigned one (it keeps its object; InputNotVerified names the
// rule and the digest; a Warning), and takes a later signed one. The
// owner's other step goes on meanwhile, and so does this tenant while
// another tenant's registry answers 503 (that tenant's step waits, Unknown,
// and goes in once the registry answers). The registry is
// go-containerregistry's, in process; signatures are where cosign keeps
// them (the sha256-<hex>.sig tag).
func TestVerifyBeforeUse(t *testing.T) {
	var failing atomic.Bool
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() && strings.HasPrefix(r.URL.Path, "/v2/flaky/") {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
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

	// Signed by the build key: taken, pinned to the digest checked.
	k.workload("app", chain, image(app+":signed"))
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-deploy", k.dataIs("image", app+"@"+signed))
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
	k.apply(k.templateYAML("ClusterImageTemplate", build, `
  params: [{name: image, default: none}]
  imagePath: data.image
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
	pem, err := json.Marshal(key.PublicPEM())
	require.NoError(t, err)
	k.apply(k.chainYAML(chain, "",
		k.step("build", "ClusterImageTemplate", build, "")+
			k.step("deploy", "ClusterTemplate", deploy, fmt.Sprintf(`images: [{name: app, resource: build}]
    verify:
      images: [{name: app, keys: [{publicKey: %s}]}]`, pem))))

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
	k.apply(k.templateYAML("ClusterImageTemplate", build, `
  params: [{name: image, default: none}]
  imagePath: data.image
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
	pem, err := json.Marshal(key.PublicPEM())
	require.NoError(t, err)
	k.apply(k.chainYAML(chain, "",
		k.step("build", "ClusterImageTemplate", build, "")+
			k.step("deploy", "ClusterTemplate", deploy, fmt.Sprintf(`images: [{name: app, resource: build}]
    verify:
      images: [{name: app, keys: [{publicKey: %s}]}]`, pem))))
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
		o.Attest = attest.NewSigner(key, "e2e").Extra
		o.Verify.Key = key
	})
	t.Cleanup(func() {
		env.kontinue.stop()
		env.kontinue = startKontinue(env.cfg)
	})

	k := newKit(t)
	chain, build, deploy := k.name("chain"), k.name("build"), k.name("deploy")
	k.apply(k.templateYAML("ClusterImageTemplate", build, `
  params: [{name: image, default: none}]
  imagePath: data.image
  healthRule: {alwaysHealthy: {}}
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
	k.apply(k.chainYAML(chain, "",
		k.step("build", "ClusterImageTemplate", build, "")+
			k.step("deploy", "ClusterTemplate", deploy, `images: [{name: app, resource: build}]
    verify:
      images: [{name: app, kontinue: {}}]`)))
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
