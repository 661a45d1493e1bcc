package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/history"
)

// cmWrites records every write of one ConfigMap, from a watch: what each
// version held.
type cmWrites struct {
	mu       sync.Mutex
	versions []map[string]any // data of each ADDED or MODIFIED
}

func (w *cmWrites) since(n int) []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]map[string]any(nil), w.versions[n:]...)
}

func (w *cmWrites) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.versions)
}

func watchConfigMap(t *testing.T, ns, name string) *cmWrites {
	t.Helper()
	wi, err := env.dyn.Resource(configMapGVR).Namespace(ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	require.NoError(t, err)
	t.Cleanup(wi.Stop)
	w := &cmWrites{}
	go func() {
		for ev := range wi.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			u := ev.Object.(*unstructured.Unstructured)
			data, _ := u.Object["data"].(map[string]any)
			w.mu.Lock()
			w.versions = append(w.versions, data)
			w.mu.Unlock()
		}
	}()
	return w
}

// keyFiles writes a fresh ECDSA P-256 key pair as PEM.
func keyFiles(t *testing.T) (priv, pub string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	pk, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	pb, err := x509.MarshalPKIXPublicKey(k.Public())
	require.NoError(t, err)
	dir := t.TempDir()
	priv, pub = filepath.Join(dir, "key.pem"), filepath.Join(dir, "key.pub")
	require.NoError(t, os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), 0o600))
	require.NoError(t, os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pb}), 0o600))
	return priv, pub
}

// verified runs `kontinue attest --verify` until it passes (the controller
// writes the envelope after the status), and returns the signed statement.
func verified(t *testing.T, ns, step, pub string, check func(j gjson.Result) string) gjson.Result {
	t.Helper()
	var j gjson.Result
	eventually(t, 30*time.Second, func() string {
		code, out, errOut := kontinueCLI(t, "attest", "workload", "app", "-n", ns, "--step", step, "--verify", "--key", pub, "-o", "json")
		if code != 0 {
			return fmt.Sprintf("attest --verify [%s]: exit %d: %s", step, code, errOut)
		}
		j = gjson.Parse(out)
		return check(j)
	})
	return j
}

func inputSetOf(t *testing.T, gvr string, ns, name string) string {
	t.Helper()
	g := configMapGVR
	if gvr == "test" {
		g = testGVR
	}
	return get(t, g, ns, name).GetAnnotations()["kontinue.dev/input-set"]
}

// TestAttest: with a signing key, the controller signs each step's
// statement as its input set succeeds and keeps it in the owner's history
// ConfigMap; `kontinue attest --verify` checks the signature with the
// public key and that it states what the status records, over two
// revisions. Subjects are what was stamped (the image by its pinned
// digest, the objects by the applied digest they carry), dependencies
// what made them (the commit, the image). The envelopes share the
// history's writes after the first revision; an envelope put back from an
// older revision, or tampered with, fails; a restart writes nothing.
func TestAttest(t *testing.T) {
	require.False(t, env.external, "the test restarts Kontinue in this process with a key")
	priv, pub := keyFiles(t)
	key, err := attest.LoadKeyFile(priv, true)
	require.NoError(t, err)
	withKey := func(o *reconciler.Options) { o.Attest = attest.NewSigner(key, "e2e") }
	env.kontinue.stop()
	env.kontinue = startKontinueWith(env.cfg, withKey)
	t.Cleanup(func() {
		env.kontinue.stop()
		env.kontinue = startKontinue(env.cfg)
	})
	pubKey, err := attest.LoadKeyFile(pub, false)
	require.NoError(t, err)

	ns := newNamespace(t)
	cmName := history.Name("Workload", "app")
	writes := watchConfigMap(t, ns, cmName)
	commits := []string{strings.Repeat("1a", 20), strings.Repeat("2b", 20)}
	images := []string{"registry.example/app@sha256:" + strings.Repeat("c1", 32), "registry.example/app@sha256:" + strings.Repeat("c2", 32)}
	apply(t, ns, provChain(ns))

	var firstDeploy string // revision 1's deploy envelope
	perRevision := []int{}
	for i := range commits {
		before := writes.len()
		apply(t, ns, provWorkload(ns, commits[i]))
		waitFor(t, testGVR, ns, "app-build", fieldIs(commits[i], "spec", "commit"))
		build(t, ns, "True", images[i])
		waitDeployed(t, ns, images[i])
		imgHex := strings.TrimPrefix(images[i], "registry.example/app@sha256:")

		// The deploy step: what it applied, from the image.
		d := verified(t, ns, "deploy", pub, func(j gjson.Result) string {
			if got := j.Get("predicate.buildDefinition.resolvedDependencies.0.uri").String(); got != images[i] {
				return "deploy's signed statement is of image " + got
			}
			return ""
		})
		assert.Equal(t, "ConfigMap/"+ns+"/app-deploy", d.Get("subject.0.name").String())
		assert.Equal(t, inputSetOf(t, "cm", ns, "app-deploy"), d.Get(`subject.0.digest.kontinue\.dev/input-set`).String(),
			"the subject is the object as stamped: its applied digest")
		assert.Equal(t, imgHex, d.Get("predicate.buildDefinition.resolvedDependencies.0.digest.sha256").String())
		assert.Equal(t, "build", d.Get("predicate.buildDefinition.resolvedDependencies.0.annotations.step").String())
		assert.Equal(t, attest.BuilderID, d.Get("predicate.runDetails.builder.id").String())
		assert.Equal(t, "e2e", d.Get("predicate.runDetails.builder.version.kontinue").String())

		// The build step: the image by its digest, from the commit.
		b := verified(t, ns, "build", pub, func(j gjson.Result) string {
			if got := j.Get("subject.0.digest.sha256").String(); got != imgHex {
				return "build's signed image digest is " + got
			}
			return ""
		})
		assert.Equal(t, "image", b.Get("subject.0.name").String())
		assert.Equal(t, images[i], b.Get("subject.0.annotations.value").String())
		assert.Equal(t, nested(get(t, testGVR, ns, "app-build").Object, "status", "latestImage"), images[i])
		assert.Equal(t, "Test/"+ns+"/app-build", b.Get("subject.1.name").String())
		assert.Equal(t, inputSetOf(t, "test", ns, "app-build"), b.Get(`subject.1.digest.kontinue\.dev/input-set`).String())
		dep := b.Get("predicate.buildDefinition.resolvedDependencies.0")
		assert.Equal(t, "https://git.example/app.git", dep.Get("uri").String())
		assert.Equal(t, commits[i], dep.Get("digest.gitCommit").String(), "the commit the source published")

		// The source step: its outputs by the digests the status shows.
		w := get(t, workloadGVR, ns, "app")
		s := verified(t, ns, "source", pub, func(j gjson.Result) string {
			if got := j.Get("subject.1.annotations.value").String(); got != commits[i] {
				return "source's signed revision is " + got
			}
			return ""
		})
		outs := stepStatus(w, "source")["outputs"].([]any)
		for k, o := range outs {
			name, digest := o.(map[string]any)["name"], o.(map[string]any)["digest"].(string)
			assert.Equal(t, name, s.Get(fmt.Sprintf("subject.%d.name", k)).String())
			assert.Equal(t, strings.TrimPrefix(digest, "sha256:"), s.Get(fmt.Sprintf("subject.%d.digest.sha256", k)).String())
		}
		assert.Equal(t, inputSetOf(t, "cm", ns, "app-src"), s.Get(`subject.2.digest.kontinue\.dev/input-set`).String())
		assert.Empty(t, s.Get("predicate.buildDefinition.resolvedDependencies").Array(), "a first step's input is the owner's spec")

		// The envelopes as stored verify with the public key alone: the
		// step's statement of each revision so far, the newest last.
		cm := get(t, configMapGVR, ns, cmName)
		envs := attest.Envelopes(nested(cm.Object, "data", attest.DataKey("deploy")).(string))
		require.Len(t, envs, i+1, "the deploy step's statements of revisions 1..%d", i+1)
		for _, e := range envs {
			_, err := attest.Verify(context.Background(), pubKey, []byte(e))
			require.NoError(t, err)
		}
		stored := envs[len(envs)-1]
		if i == 0 {
			firstDeploy = stored
		}

		// Writes of the ConfigMap in this revision: one per status write
		// that had something for it. After the first revision every one
		// carried the history too: the envelopes added no write of their
		// own.
		time.Sleep(time.Second) // let the watch deliver the last write
		got := writes.since(before)
		perRevision = append(perRevision, len(got))
		assert.LessOrEqual(t, len(got), 3, "at most one write per step and revision")
		prevHistory := ""
		if before > 0 {
			prevHistory = fmt.Sprint(writes.since(before - 1)[0][history.DataKey])
		}
		alone := 0
		for _, v := range got {
			if fmt.Sprint(v[history.DataKey]) == prevHistory {
				alone++
			}
			prevHistory = fmt.Sprint(v[history.DataKey])
		}
		if i > 0 {
			assert.Zero(t, alone, "revision %d: a write for the envelopes alone", i+1)
		}
		t.Logf("revision %d: %d writes of the history ConfigMap (%d for envelopes alone); the deploy envelope takes %d bytes", i+1, len(got), alone, len(stored))
	}

	// An older envelope put back (as anyone who may write the ConfigMap
	// could) has a good signature, but is not what the status records.
	cm := get(t, configMapGVR, ns, cmName)
	deployEnvs := attest.Envelopes(nested(cm.Object, "data", attest.DataKey("deploy")).(string))
	current := deployEnvs[len(deployEnvs)-1]
	require.NoError(t, unstructured.SetNestedField(cm.Object, firstDeploy, "data", attest.DataKey("deploy")))
	_, err = env.dyn.Resource(configMapGVR).Namespace(ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	code, _, errOut := kontinueCLI(t, "attest", "workload", "app", "-n", ns, "--step", "deploy", "--verify", "--key", pub)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "the signature is good, but the signed statement is about input set")

	// A tampered one fails its signature.
	var e map[string]any
	require.NoError(t, json.Unmarshal([]byte(current), &e))
	e["payload"] = strings.Replace(e["payload"].(string), "A", "B", 1)
	b, _ := json.Marshal(e)
	cm = get(t, configMapGVR, ns, cmName)
	require.NoError(t, unstructured.SetNestedField(cm.Object, string(b), "data", attest.DataKey("deploy")))
	_, err = env.dyn.Resource(configMapGVR).Namespace(ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	code, _, errOut = kontinueCLI(t, "attest", "workload", "app", "-n", ns, "--step", "deploy", "--verify", "--key", pub)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "does not verify")

	// Another key does not verify the controller's.
	_, otherPub := keyFiles(t)
	code, _, errOut = kontinueCLI(t, "attest", "workload", "app", "-n", ns, "--step", "build", "--verify", "--key", otherPub)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "does not verify")

	// The unsigned statement needs no key; -o envelope is the stored one.
	code, out, errOut := kontinueCLI(t, "attest", "workload", "app", "-n", ns, "--step", "build")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "gitCommit:"+commits[1])
	code, out, _ = kontinueCLI(t, "attest", "workload", "app", "-n", ns, "--step", "build", "-o", "envelope")
	require.Equal(t, 0, code)
	_, err = attest.Verify(context.Background(), pubKey, []byte(strings.TrimSpace(out)))
	require.NoError(t, err)

	// A restart signs and writes nothing.
	rv := get(t, configMapGVR, ns, cmName).GetResourceVersion()
	n := writes.len()
	wkey := reconciler.Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: ns, Name: "app"}}
	env.kontinue.stop()
	restarted := time.Now()
	env.kontinue = startKontinueWith(env.cfg, withKey)
	eventually(t, 30*time.Second, func() string {
		if len(reconciles.since(wkey, restarted)) == 0 {
			return "the restarted Kontinue has not reconciled the workload"
		}
		return ""
	})
	time.Sleep(2 * time.Second)
	assert.Equal(t, rv, get(t, configMapGVR, ns, cmName).GetResourceVersion(), "written on restart")
	assert.Equal(t, n, writes.len())
	t.Logf("history ConfigMap writes per revision with a key: %v", perRevision)
}
