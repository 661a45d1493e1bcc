package e2ereal

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	yttcmd "carvel.dev/ytt/pkg/cmd/template"
	yttui "carvel.dev/ytt/pkg/cmd/ui"
	yttfiles "carvel.dev/ytt/pkg/files"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/hack/localcluster"
)

// Cartographer v0.8.11's own examples (examples/ in its module, read from
// the Go module cache, unchanged), rendered with ytt as their READMEs say
// and applied as `kapp deploy` would apply them, one example after the
// other (they share cluster-scoped names: every supply chain is
// "supply-chain"). Tekton, Jobs and Pods are real; Flux's GitRepository,
// kpack's Image and kapp-controller's App are played (statusPlayer). Each
// example ends as its README shows it, and `kontinue render` (offline)
// gives the objects the controller stamped.
func TestCartographerExamples(t *testing.T) {
	dir := cartographerExamples(t)
	t.Run("runnable-tekton", func(t *testing.T) { testRunnableTekton(t, dir) })
	t.Run("basic-sc", func(t *testing.T) { testBasicSC(t, dir) })
	t.Run("testing-sc", func(t *testing.T) { testTestingSC(t, dir) })
	t.Run("gitwriter-sc", func(t *testing.T) { testGitwriterSC(t, dir) })
	t.Run("basic-delivery", func(t *testing.T) { testBasicDelivery(t, dir) })
}

const exampleTimeout = time.Minute

// helloWorld is the repository every example's source points at.
const helloWorld = "https://github.com/carto-run/hello-world"

// failingCommit is the commit of carto-run/hello-world whose tests fail
// (runnable-tekton's README, 02-tests-fail).
const failingCommit = "7047568a1eaa2ffe3dc2c5c1eae6079d3de73c90"

var (
	examplesOnce sync.Once
	examplesDir  string
	examplesErr  error
)

// cartographerExamples returns the examples folder of Cartographer's
// module in the module cache, downloading the module once (its content is
// pinned by hack/cartographer/go.sum, as for the conformance suite).
func cartographerExamples(t *testing.T) string {
	t.Helper()
	examplesOnce.Do(func() {
		cmd := exec.Command("go", "mod", "download", "-json", "github.com/vmware-tanzu/cartographer")
		cmd.Dir = filepath.Join(env.root, "hack", "cartographer")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			examplesErr = fmt.Errorf("go mod download of Cartographer's module: %w", err)
			return
		}
		var m struct{ Dir, Error string }
		if err := json.Unmarshal(out, &m); err != nil || m.Error != "" || m.Dir == "" {
			examplesErr = fmt.Errorf("go mod download of Cartographer's module: %v %s", err, m.Error)
			return
		}
		examplesDir = filepath.Join(m.Dir, "examples")
	})
	require.NoError(t, examplesErr)
	return examplesDir
}

// ytt renders files and folders as `ytt --ignore-unknown-comments -f ...`
// does, with the ytt library Kontinue is built with.
func ytt(t *testing.T, paths ...string) string {
	t.Helper()
	files, err := yttfiles.NewSortedFilesFromPaths(paths, yttfiles.SymlinkAllowOpts{})
	require.NoError(t, err)
	opts := yttcmd.NewOptions()
	opts.IgnoreUnknownComments = true
	out := opts.RunWithFiles(yttcmd.Input{Files: files}, yttui.NewCustomWriterTTY(false, io.Discard, io.Discard))
	require.NoError(t, out.Err, "ytt -f %v", paths)
	b, err := out.DocSet.AsBytes()
	require.NoError(t, err)
	return string(b)
}

// readFiles concatenates YAML files as `kubectl apply -f FOLDER` reads
// them.
func readFiles(t *testing.T, paths ...string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range paths {
		matches, err := filepath.Glob(p)
		require.NoError(t, err)
		if len(matches) == 0 {
			matches = []string{p}
		}
		sort.Strings(matches)
		for _, m := range matches {
			data, err := os.ReadFile(m)
			require.NoError(t, err)
			b.WriteString("\n---\n")
			b.Write(data)
		}
	}
	return b.String()
}

// exampleNamespace is a namespace for one example, with the status
// player running in it.
func exampleNamespace(t *testing.T) (string, *statusPlayer) {
	ns := newNamespace(t)
	return ns, playStatuses(t, ns)
}

// stamped returns the object an owner's step stamped (its stampedRef).
func stamped(t *testing.T, owner *unstructured.Unstructured, stepName string) *unstructured.Unstructured {
	t.Helper()
	s := step(owner, stepName)
	require.NotNil(t, s, "%s has no step %s", owner.GetName(), stepName)
	ref, _ := s["stampedRef"].(map[string]any)
	require.NotNil(t, ref, "step %s has no stampedRef: %v", stepName, s)
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": ref["apiVersion"], "kind": ref["kind"]}}
	r := resourceFor(t, u, owner.GetNamespace())
	got, err := r.Get(context.Background(), fmt.Sprint(ref["name"]), metav1.GetOptions{})
	require.NoError(t, err)
	controller := metav1.GetControllerOf(got)
	require.NotNil(t, controller, "%s %s has no controller", got.GetKind(), got.GetName())
	assert.Equal(t, owner.GetUID(), controller.UID, "%s %s is controlled by its owner", got.GetKind(), got.GetName())
	return got
}

// waitReady waits until an owner is Ready=True with every step listed.
func waitReady(t *testing.T, gvr schema.GroupVersionResource, ns, name string, steps ...string) *unstructured.Unstructured {
	t.Helper()
	u := waitOwner(t, gvr, ns, name, "Ready", "True", "Ready", exampleTimeout)
	for _, s := range steps {
		c := stepCondition(u, s, "Ready")
		assert.Equal(t, "True", fmt.Sprint(c["status"]), "step %s: %v", s, c)
	}
	assert.Equal(t, u.GetGeneration(), nested(u.Object, "status", "observedGeneration"))
	return u
}

// renderOffline runs `kontinue render -o json` on the rendered example
// files, with the upstream outputs given.
func renderOffline(t *testing.T, ns, owner, files string, outputs map[string]string) map[string][]map[string]any {
	t.Helper()
	f := filepath.Join(t.TempDir(), "example.yaml")
	require.NoError(t, os.WriteFile(f, []byte(files), 0o644))
	args := []string{"render", "-f", f, "-n", ns, "--owner", owner, "-o", "json"}
	keys := make([]string, 0, len(outputs))
	for k := range outputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--step-output", k+"="+outputs[k])
	}
	cmd := exec.Command(env.bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent") // offline: no cluster
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "kontinue %s\n%s%s", strings.Join(args, " "), out, stderr)
	var res struct {
		Steps []struct {
			Name    string           `json:"name"`
			Waiting string           `json:"waiting"`
			Error   string           `json:"error"`
			Objects []map[string]any `json:"objects"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(out, &res))
	byStep := map[string][]map[string]any{}
	for _, s := range res.Steps {
		require.Empty(t, s.Waiting, "step %s waits", s.Name)
		require.Empty(t, s.Error, "step %s", s.Name)
		byStep[s.Name] = s.Objects
	}
	return byStep
}

// sameAsRendered checks that each step's stamped object is the object
// `kontinue render` gives: every field the render has, with the same
// value (the live object also has what the API server adds, the owner
// reference and Kontinue's annotations).
func sameAsRendered(t *testing.T, owner *unstructured.Unstructured, rendered map[string][]map[string]any) {
	t.Helper()
	res, _, _ := unstructured.NestedSlice(owner.Object, "status", "resources")
	require.Len(t, rendered, len(res), "render gives every step")
	for name, objs := range rendered {
		require.Len(t, objs, 1, "step %s renders one object", name)
		live := stamped(t, owner, name)
		want := map[string]any{}
		for k, v := range objs[0] {
			if k != "status" {
				want[k] = v
			}
		}
		if diff := subset(want, live.Object, ""); diff != "" {
			t.Errorf("step %s: the stamped %s %s is not what kontinue render gives: %s", name, live.GetKind(), live.GetName(), diff)
		}
	}
}

// subset says where want is not contained in got ("" when it is): maps
// by key, lists element by element with the same length, values equal as
// JSON numbers and strings.
func subset(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want an object, got %v", path, got)
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s.%s: missing (want %v)", path, k, w[k])
			}
			if d := subset(w[k], gv, path+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: want %v, got %v", path, w, got)
		}
		for i := range w {
			if d := subset(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	default:
		if reflect.DeepEqual(want, got) || fmt.Sprint(want) == fmt.Sprint(got) {
			return ""
		}
		return fmt.Sprintf("%s: want %v, got %v", path, want, got)
	}
}

// mergePatch applies a YAML merge patch (as kubectl patch --type merge).
func mergePatch(t *testing.T, gvr schema.GroupVersionResource, ns, name, patchYAML string) {
	t.Helper()
	patch, err := yaml.YAMLToJSON([]byte(patchYAML))
	require.NoError(t, err)
	_, err = env.dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// taskRunsOf lists the TaskRuns a Runnable owns, oldest first.
func taskRunsOf(t *testing.T, ns, runnable string) []unstructured.Unstructured {
	var out []unstructured.Unstructured
	for _, tr := range list(t, taskRunGVR, ns, "") {
		if c := metav1.GetControllerOf(&tr); c != nil && c.Kind == "Runnable" && c.Name == runnable {
			out = append(out, tr)
		}
	}
	return out
}

func succeeded(tr unstructured.Unstructured) string {
	return fmt.Sprint(condition(tr.Object, "Succeeded")["status"])
}

// failOnCommit makes every TaskRun step whose command line names commit
// fail (the played "go test" of a commit whose tests fail): Tekton's
// default pod template gives steps KWOK_FAIL_ON (kwok-stages.yaml).
func failOnCommit(t *testing.T, commit string) {
	t.Helper()
	ctx := context.Background()
	cms := env.dyn.Resource(configMapGVR).Namespace(localcluster.TektonNamespace)
	cm, err := cms.Get(ctx, "config-defaults", metav1.GetOptions{})
	require.NoError(t, err)
	before, had, _ := unstructured.NestedString(cm.Object, "data", "default-pod-template")
	set := func(v string, keep bool) error {
		cm, err := cms.Get(ctx, "config-defaults", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if keep {
			_ = unstructured.SetNestedField(cm.Object, v, "data", "default-pod-template")
		} else {
			unstructured.RemoveNestedField(cm.Object, "data", "default-pod-template")
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	}
	require.NoError(t, set("env:\n- name: KWOK_FAIL_ON\n  value: "+commit+"\n", true))
	t.Cleanup(func() { _ = set(before, had) })
}

// runnable-tekton: a Runnable whose inputs change three times: tests pass,
// fail, pass. Its outputs follow the last passing TaskRun.
func testRunnableTekton(t *testing.T, dir string) {
	failOnCommit(t, failingCommit)
	ns, _ := exampleNamespace(t)
	ex := filepath.Join(dir, "runnable-tekton")
	apply(t, ns, readFiles(t, filepath.Join(ex, "00-setup", "*.yml")))
	apply(t, ns, readFiles(t, filepath.Join(ex, "01-tests-pass", "runnable.yml")))

	outputs := func(revision, ready string) func(map[string]any) string {
		return func(m map[string]any) string {
			if got := nested(m, "status", "outputs", "revision"); got != revision {
				return fmt.Sprintf("outputs.revision %v, want %s", got, revision)
			}
			if got := nested(m, "status", "outputs", "url"); got != helloWorld {
				return fmt.Sprintf("outputs.url %v", got)
			}
			if got := condition(m, "Ready")["status"]; got != ready {
				return fmt.Sprintf("Ready is %v, want %s", got, ready)
			}
			return ""
		}
	}
	// runs waits until the Runnable's TaskRuns are one per commit, each
	// with its Succeeded status, and returns them by commit.
	runs := func(want map[string]string) map[string]unstructured.Unstructured {
		t.Helper()
		var byCommit map[string]unstructured.Unstructured
		eventually(t, exampleTimeout, func() string {
			got := map[string]string{}
			byCommit = map[string]unstructured.Unstructured{}
			for _, tr := range taskRunsOf(t, ns, "test") {
				var commit string
				for _, p := range nested(tr.Object, "spec", "params").([]any) {
					if p.(map[string]any)["name"] == "blob-revision" {
						commit = fmt.Sprint(p.(map[string]any)["value"])
					}
				}
				if _, dup := got[commit]; dup {
					return "two TaskRuns of " + commit
				}
				got[commit], byCommit[commit] = succeeded(tr), tr
			}
			if !reflect.DeepEqual(got, want) {
				return fmt.Sprintf("TaskRuns Succeeded by commit %v, want %v", got, want)
			}
			return ""
		})
		return byCommit
	}
	const pass1, pass2 = "19769456b6b229b3e78f2b90eced15a353eb4e7c", "3d42c19a618bb8fc13f72178b8b5e214a2f989c4"

	// 01: "Cartographer will use the Runnable to create a Tekton TaskRun";
	// the outputs reflect the most recent passing test.
	first := runs(map[string]string{pass1: "True"})[pass1]
	waitFor(t, runnableGVR, ns, "test", exampleTimeout, outputs(pass1, "True"))
	assert.True(t, strings.HasPrefix(first.GetName(), "test-"), "generateName test-: %s", first.GetName())
	assert.Equal(t, []any{
		map[string]any{"name": "blob-url", "value": helloWorld},
		map[string]any{"name": "blob-revision", "value": pass1},
	}, nested(first.Object, "spec", "params"))

	// 02: a new TaskRun, whose tests fail; the outputs stay on the passing
	// commit. The README shows the Runnable Ready=True here, but
	// Cartographer v0.8.11's own reconciler (pkg/controllers/
	// runnable_reconciler.go) adds StampedObjectCondition, the newest run's
	// Succeeded, as a positive condition of Ready: Ready is False, and so
	// it is with Kontinue, with Tekton's message.
	mergePatch(t, runnableGVR, ns, "test", readFiles(t, filepath.Join(ex, "02-tests-fail", "runnable-patch.yml")))
	failed := runs(map[string]string{pass1: "True", failingCommit: "False"})[failingCommit]
	assert.Equal(t, "Failed", condition(failed.Object, "Succeeded")["reason"])
	r := waitFor(t, runnableGVR, ns, "test", exampleTimeout, outputs(pass1, "False"))
	assert.Equal(t, fmt.Sprintf(`TaskRun [%s/%s]: Succeeded is False: "step-test" exited with code 1`, ns, failed.GetName()),
		condition(r.Object, "StampedObjectCondition")["message"])

	// 03: tests pass again; the outputs move to the new commit.
	mergePatch(t, runnableGVR, ns, "test", readFiles(t, filepath.Join(ex, "03-tests-pass", "runnable-patch.yml")))
	runs(map[string]string{pass1: "True", failingCommit: "False", pass2: "True"})
	waitFor(t, runnableGVR, ns, "test", exampleTimeout, outputs(pass2, "True"))
}

// basic-sc: source -> image -> app, with the developer's Workload.
func testBasicSC(t *testing.T, dir string) {
	ns, player := exampleNamespace(t)
	ex := filepath.Join(dir, "basic-sc")
	files := ytt(t, ex) + "\n---\n" + ytt(t, filepath.Join(dir, "shared"), filepath.Join(ex, "values.yaml"))
	apply(t, ns, files)

	wl := waitReady(t, workloadGVR, ns, "dev", "source-provider", "image-builder", "deployer")
	// kubectl tree workload dev: GitRepository/dev, Image/dev, App/dev.
	repo := stamped(t, wl, "source-provider")
	image := stamped(t, wl, "image-builder")
	app := stamped(t, wl, "deployer")
	assert.Equal(t, []string{"GitRepository/dev", "Image/dev", "App/dev"},
		[]string{repo.GetKind() + "/" + repo.GetName(), image.GetKind() + "/" + image.GetName(), app.GetKind() + "/" + app.GetName()})

	revision, url := player.artifact("dev", helloWorld, map[string]any{"branch": "main"})
	assert.Equal(t, helloWorld, nested(repo.Object, "spec", "url"))
	assert.Equal(t, url, nested(image.Object, "spec", "source", "blob", "url"), "the Image builds the GitRepository's artifact")
	assert.Equal(t, "a-project-id-i-own/an-image-prefix-i-like-dev", nested(image.Object, "spec", "tag"), "the supply chain's image_prefix param")
	assert.Equal(t, []any{map[string]any{"name": "CGO_ENABLED", "value": "0"}}, nested(image.Object, "spec", "build", "env"))
	built := fmt.Sprint(nested(image.Object, "status", "latestImage"))
	manifest := fmt.Sprint(nested(app.Object, "spec", "fetch").([]any)[0].(map[string]any)["inline"].(map[string]any)["paths"].(map[string]any)["manifest.yml"])
	assert.Contains(t, manifest, "image: "+built, "the App deploys the image kpack built")
	// "Once App/dev is ready (Reconciliation Succeeded)": the template has
	// no health rule, so the Workload is Ready before the App is.
	waitFor(t, kappAppGVR, ns, "dev", exampleTimeout, appReconciled)

	sameAsRendered(t, wl, renderOffline(t, ns, "dev", files, map[string]string{
		"source-provider.url": url, "source-provider.revision": revision, "image-builder.image": built,
	}))
}

// testing-sc: source -> test (a Runnable running the developer's Tekton
// Task) -> image -> app.
func testTestingSC(t *testing.T, dir string) {
	ns, player := exampleNamespace(t)
	ex := filepath.Join(dir, "testing-sc")
	files := ytt(t, ex) + "\n---\n" + ytt(t, filepath.Join(dir, "shared"), filepath.Join(ex, "values.yaml"))
	apply(t, ns, files)

	wl := waitReady(t, workloadGVR, ns, "dev", "source-provider", "source-tester", "image-builder", "deployer")
	repo := stamped(t, wl, "source-provider")
	tester := stamped(t, wl, "source-tester")
	image := stamped(t, wl, "image-builder")
	app := stamped(t, wl, "deployer")
	assert.Equal(t, []string{"GitRepository/dev", "Runnable/dev", "Image/dev", "App/dev"},
		[]string{repo.GetKind() + "/" + repo.GetName(), tester.GetKind() + "/" + tester.GetName(),
			image.GetKind() + "/" + image.GetName(), app.GetKind() + "/" + app.GetName()})

	// Runnable/dev -> TaskRun/dev-xxxxx -> Pod: the test ran, on the
	// GitRepository's artifact, and passed.
	revision, url := player.artifact("dev", helloWorld, map[string]any{"branch": "main"})
	runs := taskRunsOf(t, ns, "dev")
	require.Len(t, runs, 1)
	assert.True(t, strings.HasPrefix(runs[0].GetName(), "dev-"), runs[0].GetName())
	assert.Equal(t, "True", succeeded(runs[0]))
	assert.Equal(t, []any{map[string]any{"name": "blob-url", "value": url}, map[string]any{"name": "blob-revision", "value": revision}},
		nested(runs[0].Object, "spec", "params"))
	assert.Equal(t, map[string]any{"url": url, "revision": revision}, nested(tester.Object, "status", "outputs"))
	pods := list(t, podGVR, ns, "tekton.dev/taskRun="+runs[0].GetName())
	require.Len(t, pods, 1)
	assert.Equal(t, "Succeeded", nested(pods[0].Object, "status", "phase"))

	assert.Equal(t, url, nested(image.Object, "spec", "source", "blob", "url"), "the Image builds the tested source")
	built := fmt.Sprint(nested(image.Object, "status", "latestImage"))
	manifest := fmt.Sprint(nested(app.Object, "spec", "fetch").([]any)[0].(map[string]any)["inline"].(map[string]any)["paths"].(map[string]any)["manifest.yml"])
	assert.Contains(t, manifest, "image: "+built)
	waitFor(t, kappAppGVR, ns, "dev", exampleTimeout, appReconciled)

	sameAsRendered(t, wl, renderOffline(t, ns, "dev", files, map[string]string{
		"source-provider.url": url, "source-provider.revision": revision,
		"source-tester.url": url, "source-tester.revision": revision,
		"image-builder.image": built,
	}))

	// "Assuring that only commits with passing tests result in deployed
	// apps": a push of a commit whose tests fail runs them, and nothing
	// downstream moves; the next passing commit is built and deployed.
	const bad, good = "badbadbadbadbadbadbadbadbadbadbadbadbad0", "600d600d600d600d600d600d600d600d600d600d"
	failOnCommit(t, bad)
	player.push(helloWorld, "main", bad)
	badRevision, badURL := player.artifact("dev", helloWorld, map[string]any{"branch": "main"})
	var failed unstructured.Unstructured
	eventually(t, exampleTimeout, func() string {
		runs := taskRunsOf(t, ns, "dev")
		if len(runs) != 2 {
			return fmt.Sprintf("%d TaskRuns, want 2", len(runs))
		}
		for _, tr := range runs {
			if fmt.Sprint(nested(tr.Object, "spec", "params")) == fmt.Sprint([]any{map[string]any{"name": "blob-url", "value": badURL}, map[string]any{"name": "blob-revision", "value": badRevision}}) {
				failed = tr
			}
		}
		if failed.Object == nil || succeeded(failed) != "False" {
			return "the bad commit's TaskRun has not failed"
		}
		return ""
	})
	waitFor(t, runnableGVR, ns, "dev", exampleTimeout, func(m map[string]any) string {
		c := condition(m, "Ready")
		if c["status"] != "False" || !strings.Contains(fmt.Sprint(c["message"]), failed.GetName()+`]: Succeeded is False: "step-test" exited with code 1`) {
			return "the Runnable does not report the failed run"
		}
		return ""
	})
	// The template has no health rule: as with Cartographer, the step is
	// healthy while it has outputs, and it keeps the passing commit's.
	wl = get(t, workloadGVR, ns, "dev")
	assert.Equal(t, "True", condition(wl.Object, "Ready")["status"])
	assert.Equal(t, "OutputsAvailable", stepCondition(wl, "source-tester", "Healthy")["reason"])
	assert.Equal(t, map[string]any{"url": url, "revision": revision}, nested(get(t, runnableGVR, ns, "dev").Object, "status", "outputs"), "the Runnable keeps the passing commit")
	assert.Equal(t, url, nested(get(t, kpackImageGVR, ns, "dev").Object, "spec", "source", "blob", "url"), "the Image keeps the tested source")
	assert.Contains(t, fmt.Sprint(nested(get(t, kappAppGVR, ns, "dev").Object, "spec")), "image: "+built, "the App keeps the image")

	player.push(helloWorld, "main", good)
	goodRevision, goodURL := player.artifact("dev", helloWorld, map[string]any{"branch": "main"})
	image = waitFor(t, kpackImageGVR, ns, "dev", exampleTimeout, func(m map[string]any) string {
		if nested(m, "spec", "source", "blob", "url") != goodURL || condition(m, "Ready")["status"] != "True" ||
			nested(m, "status", "latestImage") == built {
			return "not built from the good commit"
		}
		return ""
	})
	assert.Equal(t, map[string]any{"url": goodURL, "revision": goodRevision}, nested(get(t, runnableGVR, ns, "dev").Object, "status", "outputs"))
	rebuilt := fmt.Sprint(nested(image.Object, "status", "latestImage"))
	assert.NotEqual(t, built, rebuilt)
	waitFor(t, kappAppGVR, ns, "dev", exampleTimeout, func(m map[string]any) string {
		if !strings.Contains(fmt.Sprint(nested(m, "spec")), "image: "+rebuilt) {
			return "not the rebuilt image"
		}
		return appReconciled(m)
	})
	assert.Len(t, taskRunsOf(t, ns, "dev"), 3, "one TaskRun per commit")
	waitReady(t, workloadGVR, ns, "dev", "source-provider", "source-tester", "image-builder", "deployer")
}

// gitwriter-sc: source -> image -> config (a ConfigMap rendered by a ytt
// template) -> git-writer (a Runnable running a ClusterTask that commits
// the config to git).
func testGitwriterSC(t *testing.T, dir string) {
	ns, player := exampleNamespace(t)
	ex := filepath.Join(dir, "gitwriter-sc")
	files := ytt(t, ex) + "\n---\n" + ytt(t, filepath.Join(dir, "shared"), filepath.Join(ex, "values.yaml"))
	apply(t, ns, files)

	wl := waitReady(t, workloadGVR, ns, "dev", "source-provider", "image-builder", "config-provider", "git-writer")
	config := stamped(t, wl, "config-provider")
	writer := stamped(t, wl, "git-writer")
	assert.Equal(t, "ConfigMap/dev", config.GetKind()+"/"+config.GetName())
	assert.Equal(t, "Runnable/dev-git-writer", writer.GetKind()+"/"+writer.GetName())

	// The ConfigMap holds the Knative Service of the built image, as
	// base64 of JSON {"manifest.yaml": "<YAML>"}.
	image := stamped(t, wl, "image-builder")
	built := fmt.Sprint(nested(image.Object, "status", "latestImage"))
	encoded := fmt.Sprint(nested(config.Object, "data", "manifest"))
	var files2 map[string]string
	require.NoError(t, json.Unmarshal(base64Decode(t, encoded), &files2))
	var svc map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(files2["manifest.yaml"]), &svc))
	assert.Equal(t, "serving.knative.dev/v1", svc["apiVersion"])
	assert.Equal(t, map[string]any{"app.kubernetes.io/part-of": "hello-world", "carto.run/workload-name": "dev", "app.kubernetes.io/component": "run"},
		nested(svc, "metadata", "labels"))
	assert.Equal(t, built, nested(svc, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["image"])

	// The git-writer TaskRun ran the ClusterTask with the config and the
	// values' git settings, as the workload's service account.
	var runs []unstructured.Unstructured
	eventually(t, exampleTimeout, func() string {
		runs = taskRunsOf(t, ns, "dev-git-writer")
		if len(runs) != 1 || succeeded(runs[0]) != "True" {
			return fmt.Sprintf("%d TaskRuns of dev-git-writer, want one that succeeded", len(runs))
		}
		return ""
	})
	assert.Equal(t, map[string]any{"kind": "ClusterTask", "name": "git-writer"}, nested(runs[0].Object, "spec", "taskRef"))
	assert.Equal(t, "cartographer-example-basic-sc-sa", nested(runs[0].Object, "spec", "serviceAccountName"))
	params := map[string]any{}
	for _, p := range nested(runs[0].Object, "spec", "params").([]any) {
		params[fmt.Sprint(p.(map[string]any)["name"])] = p.(map[string]any)["value"]
	}
	assert.Equal(t, map[string]any{
		"git_repository": "https://github.com/example/example.git", "git_branch": "main",
		"git_user_name": "example", "git_user_email": "example@example.com",
		"git_commit_message": "Update app configuration", "git_files": encoded,
	}, params)

	revision, url := player.artifact("dev", "https://github.com/example/example.git", map[string]any{"branch": "main"})
	sameAsRendered(t, wl, renderOffline(t, ns, "dev", files, map[string]string{
		"source-provider.url": url, "source-provider.revision": revision,
		"image-builder.image": built, "config-provider.config": encoded,
	}))

	assertIdle(t, ns)
}

// assertIdle checks that Kontinue writes nothing to the API server while
// nothing changes: once the namespaces of earlier tests are gone (their
// teardown is a change), and the last status writes have landed.
func assertIdle(t *testing.T, ns string) {
	t.Helper()
	eventually(t, time.Minute, func() string {
		l, err := env.dyn.Resource(nsGVR).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, n := range l.Items {
			if strings.HasPrefix(n.GetName(), "real-") && n.GetName() != ns {
				return "namespace " + n.GetName() + " is still there"
			}
		}
		return ""
	})
	time.Sleep(2 * time.Second)
	before, err := env.kontinue.writes()
	require.NoError(t, err)
	time.Sleep(5 * time.Second)
	after, err := env.kontinue.writes()
	require.NoError(t, err)
	assert.Equal(t, before, after, "API writes by Kontinue while idle")
}

// basic-delivery: a Deliverable whose GitRepository holds the app's
// configuration and whose App deploys it, gated on kapp's
// ReconcileSucceeded.
func testBasicDelivery(t *testing.T, dir string) {
	ns, player := exampleNamespace(t)
	ex := filepath.Join(dir, "basic-delivery")
	shared := filepath.Join(dir, "shared", "cluster")
	values := filepath.Join(ex, "values.yaml")
	// "Further update values.yaml with information about the registry ...
	// (e.g. the values in gitwriter-sc/values.yaml)": that update, as a
	// data values overlay instead of an edit of the file.
	registry := filepath.Join(t.TempDir(), "registry-values.yaml")
	require.NoError(t, os.WriteFile(registry, []byte(`#@data/values
---
#@overlay/match missing_ok=True
registry:
  server: https://index.docker.io/v1/
  username: a-username-of-mine
  password: a-very-hard-to-guess-password
`), 0o644))
	files := ytt(t, ex) + "\n---\n" + ytt(t, filepath.Join(shared, "rbac.yaml"), values, registry) +
		"\n---\n" + ytt(t, filepath.Join(shared, "secret.yaml"), values, registry) +
		"\n---\n" + ytt(t, filepath.Join(shared, "serviceaccount.yaml"), values, registry)
	// The Deliverable stamps as the namespace's default service account,
	// which the example's Role does not let create Apps: Cartographer's own
	// run of this example (hack/setup.sh, install_kapp_controller) binds
	// cluster-admin to it, for kapp-controller to deploy as it too. The
	// same here, in the example's namespace only.
	apply(t, ns, `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: default-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: default, namespace: `+ns+`}]
`)
	apply(t, ns, files)

	d := waitReady(t, deliverableGVR, ns, "gitops", "source-provider", "deployer")
	repo := stamped(t, d, "source-provider")
	app := stamped(t, d, "deployer")
	assert.Equal(t, []string{"GitRepository/gitops", "App/gitops"},
		[]string{repo.GetKind() + "/" + repo.GetName(), app.GetKind() + "/" + app.GetName()})
	revision, url := player.artifact("gitops", "github.com/example/example.git", map[string]any{"branch": "main"})
	assert.Equal(t, url, nested(app.Object, "spec", "fetch").([]any)[0].(map[string]any)["http"].(map[string]any)["url"])
	assert.Equal(t, "True", condition(app.Object, "ReconcileSucceeded")["status"])

	sameAsRendered(t, d, renderOffline(t, ns, "gitops", files, map[string]string{
		"source-provider.url": url, "source-provider.revision": revision,
	}))
}

func base64Decode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

// appReconciled is the played kapp-controller's App status once deployed.
func appReconciled(m map[string]any) string {
	if condition(m, "ReconcileSucceeded")["status"] != "True" || nested(m, "status", "friendlyDescription") != "Reconcile succeeded" {
		return "not reconciled"
	}
	return ""
}
