//go:build linux

package e2erelease

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/hack/localcluster"
	"kontinue.dev/kontinue/version"
)

const (
	namespace = "kontinue-system" // the release's namespace, as docs/install.md installs it
	release   = "kontinue"
)

var (
	workloadGVR   = schema.GroupVersionResource{Group: "carto.run", Version: "v1alpha1", Resource: "workloads"}
	deploymentGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	podGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nsGVR         = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	saGVR         = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	leaseGVR      = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	crGVR         = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

// TestInstallFromRelease installs Kontinue from its release and runs it as
// the release's Deployment would, which proves the chart's least-privilege
// RBAC is enough and the image works:
//
//   - `make release`'s recipe (hack/release, for linux/amd64) builds the
//     release; its SHA256SUMS check;
//   - the packaged chart (kontinue-X.Y.Z.tgz) is installed with Helm's
//     engine into a local cluster with the workload controllers and kwok's
//     fake nodes, which play the Deployment's Pods;
//   - the binary of the release image's layer runs as a container of one of
//     those Pods (container_test.go): the image's entrypoint and user, the
//     installed Deployment's args and env, a token of the chart's
//     ServiceAccount bound to the Pod (TokenRequest), the cluster's CA and
//     in-cluster configuration, a read-only root with the chart's /tmp;
//   - the chain `make run-local` runs (examples/real-chain.yaml: a Job per
//     commit, then a Deployment) converges to Ready, and the controller
//     logs no request refused to its own identity; it leads, as the Lease's
//     holder, under the Pod's name (what docs/operations.md tells users).
//
// The negative control: the same check, after removing one verb the
// chart grants (watch, from the rule Kontinue reads stamped objects with),
// must fail, naming the refusal.
func TestInstallFromRelease(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs the image's binary as a container (mount namespace, chroot, a user of its own): it needs root")
	}
	ctx := context.Background()
	root, err := localcluster.RepoRoot(".")
	require.NoError(t, err)
	v := version.Next()

	// The release, as `make release` builds it: no REGISTRY, no
	// RELEASE_URL, one platform (this machine's image).
	out := filepath.Join(t.TempDir(), "release")
	cmd := exec.Command("go", "run", "./hack/release", "-platforms", "linux/amd64", "-out", out)
	cmd.Dir = root
	said, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", said)
	require.Contains(t, string(said), "Nothing was pushed. Publishing would push the image")
	files := checkSums(t, out)
	chartFile := "kontinue-" + strings.TrimPrefix(v, "v") + ".tgz"
	for _, f := range []string{chartFile, "install.yaml", "crds.yaml", "kontinue_" + v + "_linux_amd64.tar.gz", "kontinue_" + v + "_linux_amd64.spdx.json"} {
		require.Contains(t, files, f)
	}

	k := startCluster(t, root)

	// The packaged chart, installed with Helm's engine, as `helm install
	// kontinue kontinue-X.Y.Z.tgz -n kontinue-system --create-namespace`
	// would. The controller shares this machine's network: its two ports
	// are free ones (the metrics port is a value, the probes' a flag).
	metricsPort, probePort := freePort(t), freePort(t)
	k.installChart(t, filepath.Join(out, chartFile), map[string]any{
		"metrics":   map[string]any{"port": metricsPort},
		"extraArgs": []any{"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probePort)},
	})

	dep := k.get(t, deploymentGVR, namespace, "kontinue")
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	image := fmt.Sprint(containers[0].(map[string]any)["image"])

	// The image: the OCI layout's index is the one the chart pins.
	img := readImage(t, filepath.Join(out, "image"), image)
	pod := k.waitPod(t)

	c := &controller{k: k, root: root, dep: dep, pod: pod, img: img, probe: "http://127.0.0.1:" + strconv.Itoa(probePort)}
	run := c.start(t)
	run.isContained(t)
	require.NoError(t, run.ready(ctx), "the controller's /readyz")
	require.NoError(t, k.verify(ctx, run, "release-a"), "the example chain, run by the release's controller")

	// It leads, under the Pod's name: docs/operations.md tells users to
	// find the leader's Pod in the Lease's holderIdentity.
	lease := k.get(t, leaseGVR, namespace, "kontinue-leader")
	holder, _, _ := unstructured.NestedString(lease.Object, "spec", "holderIdentity")
	podName, _, _ := strings.Cut(holder, "_")
	require.Equal(t, pod.GetName(), podName, "the Lease's holderIdentity is POD_suffix")
	run.stop(t)

	// The negative control: one verb fewer than the chart grants, and the
	// same check fails, saying why.
	reader := k.get(t, crGVR, "", "kontinue-stamped-reader")
	rules, _, _ := unstructured.NestedSlice(reader.Object, "rules")
	require.NotEmpty(t, rules)
	rule := rules[0].(map[string]any)
	require.Equal(t, []any{"get", "list", "watch"}, rule["verbs"], "the chart's rule for stamped objects")
	rule["verbs"] = []any{"get", "list"}
	require.NoError(t, unstructured.SetNestedSlice(reader.Object, rules, "rules"))
	_, err = k.dyn.Resource(crGVR).Update(ctx, reader, metav1.UpdateOptions{})
	require.NoError(t, err)
	run = c.start(t)
	require.NoError(t, run.ready(ctx))
	err = k.verify(ctx, run, "release-b")
	require.Error(t, err, "without watch on stamped objects, the check must fail")
	require.Contains(t, err.Error(), "forbidden")
	require.Contains(t, err.Error(), "watch")
	run.stop(t)
}

// checkSums checks every file SHA256SUMS lists, as `sha256sum --check`
// does, and returns their names.
func checkSums(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	require.NoError(t, err)
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(l, "  ")
		require.True(t, ok, l)
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		s := sha256.Sum256(data)
		require.Equal(t, sum, hex.EncodeToString(s[:]), name)
		names = append(names, name)
	}
	return names
}

// --- the cluster -------------------------------------------------------------

type cluster struct {
	c      *localcluster.Cluster
	cfg    *rest.Config
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// startCluster starts the local control plane with the workload
// controllers, kube-scheduler and kwok's fake nodes (no Tekton).
func startCluster(t *testing.T, root string) *cluster {
	t.Helper()
	ctx := context.Background()
	in, err := localcluster.Install(ctx, root, false, os.Stderr)
	require.NoError(t, err)
	var kwok bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "hack", "install-kwok.sh"))
	cmd.Stdout, cmd.Stderr = &kwok, os.Stderr
	require.NoError(t, cmd.Run(), "hack/install-kwok.sh")
	lines := strings.Split(strings.TrimSpace(kwok.String()), "\n")
	c, err := localcluster.Start(ctx, localcluster.Options{
		BinDir:    in.BinDir,
		Dir:       t.TempDir(),
		Log:       os.Stderr,
		Workloads: &localcluster.Workloads{KwokBinary: lines[len(lines)-1], Nodes: 2},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	require.NoError(t, err)
	return &cluster{c: c, cfg: cfg, dyn: dynamic.NewForConfigOrDie(cfg),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))}
}

func (k *cluster) get(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := k.dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err, "%s %s/%s", gvr.Resource, ns, name)
	return u
}

// apply server-side applies every object of a YAML stream, namespaced ones
// into ns when they name none; unknown fields are refused, as `helm
// install` refuses them.
func (k *cluster) apply(ctx context.Context, ns string, y []byte) error {
	for _, doc := range releaseutil.SplitManifests(string(y)) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		gvk := u.GroupVersionKind()
		m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			k.mapper.Reset()
			m, err = k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return err
		}
		var r dynamic.ResourceInterface = k.dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(ns)
			}
			r = k.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := r.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "e2e-release", Force: true}); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// installChart installs a chart package as Helm does: its values checked
// against its schema, the namespace created, the CRDs of crds/ first and
// established, then the templates rendered by Helm's engine, in Helm's
// install order.
func (k *cluster) installChart(t *testing.T, tgz string, values map[string]any) {
	t.Helper()
	ctx := context.Background()
	ch, err := loader.Load(tgz)
	require.NoError(t, err)
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	require.NoError(t, err)
	_, err = k.dyn.Resource(nsGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NotEmpty(t, ch.CRDObjects())
	for _, crd := range ch.CRDObjects() {
		require.NoError(t, k.apply(ctx, "", crd.File.Data), crd.Filename)
	}
	k.eventually(t, time.Minute, func() string {
		l, err := k.dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range l.Items {
			if !conditionTrue(c.Object, "Established") {
				return c.GetName() + " not established"
			}
		}
		return ""
	})
	k.mapper.Reset()

	rendered, err := engine.Render(ch, vals)
	require.NoError(t, err)
	for name := range rendered {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(path.Base(name), "_") {
			delete(rendered, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(rendered, chartutil.DefaultCapabilities.APIVersions, releaseutil.InstallOrder)
	require.NoError(t, err)
	require.Empty(t, hooks, "the chart has no hooks (this install would not run them)")
	require.NotEmpty(t, manifests)
	for _, m := range manifests {
		require.NoError(t, k.apply(ctx, namespace, []byte(m.Content)), m.Name)
	}
}

// waitPod waits for a Pod of the Deployment kontinue, scheduled on a fake
// node: the container this test runs is that Pod's.
func (k *cluster) waitPod(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var pod *unstructured.Unstructured
	k.eventually(t, 2*time.Minute, func() string {
		l, err := k.dyn.Resource(podGVR).Namespace(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=kontinue"})
		if err != nil {
			return err.Error()
		}
		sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].GetName() < l.Items[j].GetName() })
		for _, p := range l.Items {
			if node, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName"); node != "" {
				pod = &p
				return ""
			}
		}
		return fmt.Sprintf("no scheduled Pod of the Deployment among %d", len(l.Items))
	})
	return pod
}

func (k *cluster) eventually(t *testing.T, timeout time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// verify is the test's check: in a new namespace, the example chain of
// `make run-local` converges (its Workload Ready, for its generation) and
// the controller logs no refusal of its own identity's requests. It
// returns what went wrong, or nil.
func (k *cluster) verify(ctx context.Context, run *running, ns string) error {
	if _, err := k.dyn.Resource(nsGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	chain, err := os.ReadFile(filepath.Join(run.c.root, "examples", "real-chain.yaml"))
	if err != nil {
		return err
	}
	if err := k.apply(ctx, ns, chain); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if refused := run.refused(); len(refused) > 0 {
			return fmt.Errorf("the controller was refused (forbidden) %d time(s), first: %s (log: %s)", len(refused), refused[0], run.log)
		}
		if run.exited() {
			return fmt.Errorf("the controller exited: %v (log: %s)", run.err, run.log)
		}
		w, err := k.dyn.Resource(workloadGVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		observed, _, _ := unstructured.NestedInt64(w.Object, "status", "observedGeneration")
		if conditionTrue(w.Object, "Ready") && observed == w.GetGeneration() {
			return nil
		}
		if time.Now().After(deadline) {
			ready, _ := condition(w.Object, "Ready")
			return fmt.Errorf("workload %s/web is not Ready after 3m: %v (log: %s)", ns, ready, run.log)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func condition(obj map[string]any, typ string) (map[string]any, bool) {
	conds, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m, true
		}
	}
	return nil, false
}

func conditionTrue(obj map[string]any, typ string) bool {
	c, ok := condition(obj, typ)
	return ok && c["status"] == "True"
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// --- the image ---------------------------------------------------------------

type image struct {
	entrypoint, cmd []string
	env             []string
	user, workdir   string
	rootfs          []byte // the flattened layers, a tar stream
}

// readImage reads the linux/amd64 image of the OCI layout whose index
// digest ref pins (REGISTRY/kontinue:TAG@sha256:...).
func readImage(t *testing.T, dir, ref string) *image {
	t.Helper()
	_, digest, ok := strings.Cut(ref, "@")
	require.True(t, ok, "the chart pins the image by digest: %s", ref)
	p, err := layout.FromPath(dir)
	require.NoError(t, err)
	top, err := p.ImageIndex()
	require.NoError(t, err)
	m, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, m.Manifests, 1)
	require.Equal(t, digest, m.Manifests[0].Digest.String(), "the layout holds the index the chart pins")
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	require.NoError(t, err)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != "amd64" {
			continue
		}
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		rc := mutate.Extract(img)
		defer rc.Close()
		fs, err := io.ReadAll(rc)
		require.NoError(t, err)
		return &image{entrypoint: cf.Config.Entrypoint, cmd: cf.Config.Cmd, env: cf.Config.Env,
			user: cf.Config.User, workdir: cf.Config.WorkingDir, rootfs: fs}
	}
	t.Fatal("no linux/amd64 image in the index")
	return nil
}

// extract writes the image's filesystem under dir: regular files and
// folders, which is all a scratch image of one binary holds (anything else
// fails the test rather than being skipped).
func (img *image) extract(t *testing.T, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(img.rootfs))
	files := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, os.FileMode(h.Mode)&os.ModePerm))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&os.ModePerm)
			require.NoError(t, err)
			_, err = io.Copy(f, tr)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			files++
		default:
			t.Fatalf("image entry %s of type %c: not handled", h.Name, h.Typeflag)
		}
	}
	require.Positive(t, files)
}

// --- the controller, as a container of the Deployment's Pod -----------------

type controller struct {
	k     *cluster
	root  string
	dep   *unstructured.Unstructured
	pod   *unstructured.Unstructured
	img   *image
	probe string // base URL of the probes
	n     int
}

type running struct {
	c    *controller
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start runs the image's entrypoint as the Deployment's container would
// run in its Pod.
func (c *controller) start(t *testing.T) *running {
	t.Helper()
	c.n++
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	require.NoError(t, os.Mkdir(rootfs, 0o755))
	c.img.extract(t, rootfs)

	podSpec, _, _ := unstructured.NestedMap(c.dep.Object, "spec", "template", "spec")
	containers, _, _ := unstructured.NestedSlice(podSpec, "containers")
	ctr := containers[0].(map[string]any)

	// The command: the image's entrypoint, the container's args (a
	// runtime's rules: command replaces the entrypoint, args the cmd).
	args := c.img.entrypoint
	if cmd, ok := ctr["command"].([]any); ok {
		args = strs(cmd)
	}
	if a, ok := ctr["args"].([]any); ok {
		args = append(append([]string{}, args...), strs(a)...)
	} else {
		args = append(append([]string{}, args...), c.img.cmd...)
	}
	require.NotEmpty(t, args)

	// The user: the Pod's, then the container's, over the image's.
	uid, gid := imageUser(t, c.img.user)
	for _, sc := range []any{podSpec["securityContext"], ctr["securityContext"]} {
		m, _ := sc.(map[string]any)
		if u, ok := m["runAsUser"]; ok {
			uid = toInt(t, u)
		}
		if g, ok := m["runAsGroup"]; ok {
			gid = toInt(t, g)
		}
	}
	csc, _ := ctr["securityContext"].(map[string]any)

	// Volumes: the chart's are emptyDirs.
	volumes := map[string]map[string]any{}
	vs, _ := podSpec["volumes"].([]any)
	for _, v := range vs {
		m := v.(map[string]any)
		volumes[fmt.Sprint(m["name"])] = m
	}
	tmpfs := map[string]int64{}
	mounts, _ := ctr["volumeMounts"].([]any)
	for _, vm := range mounts {
		m := vm.(map[string]any)
		vol := volumes[fmt.Sprint(m["name"])]
		ed, ok := vol["emptyDir"].(map[string]any)
		require.True(t, ok, "volume %v: only emptyDir is played", vol)
		var size int64
		if s, ok := ed["sizeLimit"].(string); ok {
			q := resource.MustParse(s)
			size = q.Value()
		}
		tmpfs[fmt.Sprint(m["mountPath"])] = size
	}

	// The ServiceAccount's volume: a token bound to the Pod, the cluster's
	// CA, the namespace.
	sa := fmt.Sprint(podSpec["serviceAccountName"])
	secrets := filepath.Join(dir, "serviceaccount")
	require.NoError(t, os.Mkdir(secrets, 0o755))
	token := c.k.token(t, sa, c.pod)
	ca, err := os.ReadFile(c.k.c.CAFile)
	require.NoError(t, err)
	for name, data := range map[string][]byte{"token": []byte(token), "ca.crt": ca, "namespace": []byte(namespace)} {
		require.NoError(t, os.WriteFile(filepath.Join(secrets, name), data, 0o644))
	}

	// The env: the image's, the kubelet's (the API server's Service and
	// the hostname), the container's with valueFrom resolved.
	u, err := url.Parse(c.k.c.Host)
	require.NoError(t, err)
	env := append([]string{}, c.img.env...)
	if !hasKey(env, "PATH") {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	env = append(env, "HOSTNAME="+c.pod.GetName(), "KUBERNETES_SERVICE_HOST="+u.Hostname(), "KUBERNETES_SERVICE_PORT="+u.Port())
	envs, _ := ctr["env"].([]any)
	for _, e := range envs {
		m := e.(map[string]any)
		env = append(env, fmt.Sprint(m["name"])+"="+envValue(t, ctr, m))
	}

	spec := containerSpec{
		Rootfs: rootfs, Hostname: c.pod.GetName(), Args: args, Env: env, WorkingDir: c.img.workdir,
		UID: uid, GID: gid,
		ReadOnlyRoot: csc["readOnlyRootFilesystem"] == true,
		NoNewPrivs:   csc["allowPrivilegeEscalation"] == false,
		Tmpfs:        tmpfs, Secrets: secrets,
	}
	require.NotZero(t, spec.UID, "the chart runs as non-root")
	cmd, err := spec.command(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(c.root, "_output"), 0o755))
	logPath := filepath.Join(c.root, "_output", fmt.Sprintf("e2e-release-kontinue-%d-%d.log", os.Getpid(), c.n))
	f, err := os.Create(logPath)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	r := &running{c: c, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { r.err = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		if !r.exited() {
			_ = cmd.Process.Kill()
			<-r.done
		}
	})
	t.Logf("the release's controller runs as Pod %s (log: %s)", c.pod.GetName(), logPath)
	return r
}

// token is what the kubelet mounts: a TokenRequest of the ServiceAccount,
// bound to the Pod.
func (k *cluster) token(t *testing.T, sa string, pod *unstructured.Unstructured) string {
	t.Helper()
	req := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"metadata": map[string]any{"name": sa},
		"spec": map[string]any{"expirationSeconds": int64(3607),
			"boundObjectRef": map[string]any{"apiVersion": "v1", "kind": "Pod", "name": pod.GetName(), "uid": string(pod.GetUID())}},
	}}
	got, err := k.dyn.Resource(saGVR).Namespace(namespace).Create(context.Background(), req, metav1.CreateOptions{}, "token")
	require.NoError(t, err)
	token, _, _ := unstructured.NestedString(got.Object, "status", "token")
	require.NotEmpty(t, token)
	return token
}

// envValue resolves an env entry as the kubelet does, for what the chart
// uses: a value, or a resource field of the container.
func envValue(t *testing.T, ctr map[string]any, e map[string]any) string {
	t.Helper()
	if v, ok := e["value"]; ok {
		return fmt.Sprint(v)
	}
	from, _ := e["valueFrom"].(map[string]any)
	ref, ok := from["resourceFieldRef"].(map[string]any)
	require.True(t, ok, "env %v: only value and resourceFieldRef are played", e)
	kind, name, _ := strings.Cut(fmt.Sprint(ref["resource"]), ".")
	q, ok := nested(ctr, "resources", kind, name).(string)
	require.True(t, ok, "env %v: the container sets no %s", e, ref["resource"])
	divisor := resource.MustParse("1")
	if d, ok := ref["divisor"].(string); ok {
		if q := resource.MustParse(d); !q.IsZero() { // the API server defaults it to "0", which means 1
			divisor = q
		}
	}
	v := resource.MustParse(q)
	// Rounded up, as the kubelet does.
	return strconv.FormatInt((v.Value()+divisor.Value()-1)/divisor.Value(), 10)
}

func nested(m map[string]any, keys ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(m, keys...)
	return v
}

func imageUser(t *testing.T, user string) (int, int) {
	t.Helper()
	u, g, _ := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	require.NoError(t, err, "the image's user %q is numeric (scratch has no /etc/passwd)", user)
	gid := uid
	if g != "" {
		gid, err = strconv.Atoi(g)
		require.NoError(t, err)
	}
	return uid, gid
}

func toInt(t *testing.T, v any) int {
	t.Helper()
	switch n := v.(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	t.Fatalf("%v is not a number", v)
	return 0
}

func strs(l []any) []string {
	var out []string
	for _, v := range l {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

func hasKey(env []string, key string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, key+"=") {
			return true
		}
	}
	return false
}

// isContained checks that the controller runs as the container it plays:
// the Deployment's user, no capability, no new privileges, in the image's
// root filesystem, mounted read-only.
func (r *running) isContained(t *testing.T) {
	t.Helper()
	pid := strconv.Itoa(r.cmd.Process.Pid)
	var status []byte
	r.c.k.eventually(t, 10*time.Second, func() string { // the init becomes the entrypoint
		exe, _ := os.Readlink("/proc/" + pid + "/exe")
		if path.Base(exe) != "kontinue" {
			return "the container runs " + exe
		}
		status, _ = os.ReadFile("/proc/" + pid + "/status")
		return ""
	})
	for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532\n", "Gid:\t65532\t65532\t65532\t65532\n", "CapEff:\t0000000000000000\n", "NoNewPrivs:\t1\n"} {
		require.Contains(t, string(status), want)
	}
	mounts, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	require.NoError(t, err)
	var rootOpts string
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 5 && f[4] == "/" {
			rootOpts = f[5]
		}
	}
	require.Contains(t, strings.Split(rootOpts, ","), "ro", "the root filesystem is read-only")
}

func (r *running) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// ready waits until the probe the kubelet's readinessProbe reads answers
// 200: the caches synced, leading or standing by.
func (r *running) ready(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(r.c.probe + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if r.exited() {
			return fmt.Errorf("the controller exited: %v (log: %s)", r.err, r.log)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/readyz not 200 after 2m: %v (log: %s)", err, r.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ownRefusal matches a log line in which the API server refused the
// controller's own identity (the chart's ServiceAccount): not an owner's
// service account it impersonates, whose refusals are the owner's to fix
// and end as conditions.
var ownRefusal = regexp.MustCompile(`(?i)forbidden.*system:serviceaccount:` + namespace + `:kontinue\\?"`)

// refused are the log lines of refusals to the controller itself.
func (r *running) refused() []string {
	f, err := os.Open(r.log)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if ownRefusal.MatchString(s.Text()) {
			out = append(out, s.Text())
		}
	}
	return out
}

// stop ends the container as the kubelet does: SIGTERM, and the exit
// within the Pod's grace period.
func (r *running) stop(t *testing.T) {
	t.Helper()
	grace, _, _ := unstructured.NestedInt64(r.c.dep.Object, "spec", "template", "spec", "terminationGracePeriodSeconds")
	require.Positive(t, grace)
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-r.done:
		var exit *exec.ExitError
		if r.err != nil && !errors.As(r.err, &exit) {
			t.Fatalf("the controller: %v", r.err)
		}
		require.NoError(t, r.err, "the controller exits 0 on SIGTERM (log: %s)", r.log)
	case <-time.After(time.Duration(grace) * time.Second):
		t.Fatalf("the controller did not exit within the Pod's grace period of %ds (log: %s)", grace, r.log)
	}
}
