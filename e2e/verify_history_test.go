package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	"kontinue.dev/kontinue/reconciler/verify/verifytest"
)

// TestVerifyDeliveryKeepsAnEarlierImage (issue 49): a Deliverable runs
// image A, which its Workload's chain built and Kontinue signed a statement
// of; the Workload then makes image B, which its own deliver step holds
// back (unsigned). The Workload's image step has moved on to B, but the
// Deliverable still has A: when its decision is made again (here after a
// restart, which empties the verification cache; in a running controller
// after the cache's hour), the statement naming A must still be in the
// Workload's history, or the delivery refuses the image it already runs.
//
// Kontinue runs here for a shard of the test's own (the Workload is
// labelled, and what it stamps carries the label): the decisions it counts
// are the test's owners' alone, whatever other tests left in the cluster.
// Of them only the Deliverable's, about A, can pass (B is unsigned).
func TestVerifyDeliveryKeepsAnEarlierImage(t *testing.T) {
	require.False(t, env.external, "the test restarts Kontinue in this process with a key")
	priv, _ := keyFiles(t)
	akey, err := attest.LoadKeyFile(priv, true)
	require.NoError(t, err)
	var verified atomic.Int64
	k := newKit(t)
	shard := k.ns
	start := func(count bool) {
		env.kontinue = startKontinueWith(env.cfg, func(o *reconciler.Options) {
			o.Shard = shard
			o.Leases.ID = "kontinue-leader-" + shard
			o.Attest = attest.NewSigner(akey, "e2e")
			o.Verify.Key = akey
			if count {
				o.Verify.OnDecision = func(outcome string, _ time.Duration) {
					if outcome == "Verified" {
						verified.Add(1)
					}
				}
			}
		})
	}
	env.kontinue.stop()
	start(false)
	t.Cleanup(func() {
		env.kontinue.stop()
		env.kontinue = startKontinue(env.cfg)
	})

	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	app := strings.TrimPrefix(srv.URL, "http://") + "/app"
	build := verifytest.NewKey("ecdsa")
	a, err := verifytest.Push(app, "a")
	require.NoError(t, err)
	require.NoError(t, verifytest.Attach(app, a, "sig", build.Sign(app, a)))
	b, err := verifytest.Push(app, "b")
	require.NoError(t, err)
	ref := func(d string) string { return app + "@" + d }

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
	chain, delivery := k.name("chain"), k.name("delivery")
	img, dlv, dsrc, deploy := k.name("img"), k.name("dlv"), k.name("dsrc"), k.name("deploy")
	k.apply(k.templateYAML("ClusterImageTemplate", img, `
  params: [{name: image, default: none}]
  imagePath: .data.image
  healthRule: {alwaysHealthy: {}}
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-img}
    data: {image: $(params.image)$}`))
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
		k.step("image", "ClusterImageTemplate", img, "")+
			k.step("deliver", "ClusterTemplate", dlv, fmt.Sprintf(`images: [{name: app, resource: image}]
    verify:
      images: [{name: app, keys: [{publicKey: %s}]}]`, pem))))
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
	// A: built, signed, delivered on Kontinue's statement of it.
	k.apply(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: app
  labels: {app.example.com/chain: %s, %s: %s}
spec:
  params: [{name: image, value: %q}]`, chain, api.ShardLabel, shard, ref(a)))
	k.waitOwner("app", "Ready", "True", "Ready")
	k.waitObj(configMapGVR, "app-live", k.dataIs("image", ref(a)))
	waitOwner(t, deliverableGVR, k.ns, "app", "Ready", "True", "Ready")

	// B: the Workload's image step moves on to it (its statement now names
	// B), and its deliver step holds it back: the Deliverable keeps A.
	k.update(workloadGVR, k.ns, "app", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "image", "value": ref(b)}}, "spec", "params"))
	})
	eventually(t, 30*time.Second, func() string {
		c := k.stepCond(get(t, workloadGVR, k.ns, "app"), "deliver", "ResourceSubmitted")
		if c == nil || c["reason"] != "InputNotVerified" || !strings.Contains(fmt.Sprint(c["message"]), b) {
			return fmt.Sprintf("deliver's ResourceSubmitted: %v", c)
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		s, _, _ := unstructured.NestedString(get(t, configMapGVR, k.ns, history.Name("Workload", "app")).Object, "data", attest.DataKey("image"))
		envs := attest.Envelopes(s)
		if len(envs) == 0 || !strings.Contains(payload(t, envs[len(envs)-1]), strings.TrimPrefix(b, "sha256:")) {
			return "the newest statement of the Workload's image step does not name B yet"
		}
		return ""
	})
	assert.Equal(t, ref(a), nested(get(t, deliverableGVR, k.ns, "app").Object, "spec", "source", "image"))

	// A restart empties the verification cache: the Deliverable's decision
	// about A is made again, and must find the statement naming A.
	env.kontinue.stop()
	start(true)
	eventually(t, 2*time.Minute, func() string {
		c := deployCondOf(t, k.ns, "app")
		if verified.Load() == 0 || c == nil || c["status"] != "True" {
			return fmt.Sprintf("after the restart, %d verified decisions; the Deliverable's deploy ResourceSubmitted: %v", verified.Load(), c)
		}
		return ""
	})
	u := get(t, deliverableGVR, k.ns, "app")
	v := nested(stepStatus(u, "deploy"), "verification").([]any)[0].(map[string]any)
	assert.Equal(t, "Verified", v["result"])
	assert.Equal(t, "kontinue", v["rule"])
	assert.Equal(t, a, v["digest"])
	assert.Equal(t, ref(a), nested(get(t, configMapGVR, k.ns, "app-live").Object, "data", "image"))
}

func deployCondOf(t *testing.T, ns, name string) map[string]any {
	u, err := tryGet(deliverableGVR, ns, name)
	if err != nil {
		return nil
	}
	return stepCondition(u, "deploy", "ResourceSubmitted")
}

// payload is the statement a DSSE envelope carries, unverified.
func payload(t *testing.T, env string) string {
	var e struct {
		Payload string `json:"payload"`
	}
	require.NoError(t, json.Unmarshal([]byte(env), &e))
	p, err := base64.StdEncoding.DecodeString(e.Payload)
	require.NoError(t, err)
	return string(p)
}
