package e2ereal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/hack/localcluster"
)

// Cartographer v0.8.11's own controller on the suite's cluster, for the
// tests that compare with it or switch from it: the binary that
// hack/install-cartographer.sh builds from the module hack/cartographer
// pins (as bench/ and hack/conformance run it), with Cartographer's own
// CRDs from the same module. No webhook configuration points at it.
//
// Both controllers serve the same kinds, so only one runs at a time: a
// test that runs Cartographer stops the suite's Kontinue first
// (handOverToCartographer) and puts Kontinue back when it ends.

var cartographer struct {
	once sync.Once
	bin  string
	crds []*unstructured.Unstructured
	err  error
}

// cartographerFiles builds (once, cached across runs) Cartographer's binary
// and reads its CRDs.
func cartographerFiles(t *testing.T) (string, []*unstructured.Unstructured) {
	t.Helper()
	cartographer.once.Do(func() {
		out, err := exec.Command(filepath.Join(env.root, "hack", "install-cartographer.sh")).Output()
		if err != nil {
			cartographer.err = fmt.Errorf("hack/install-cartographer.sh: %w", err)
			return
		}
		cartographer.bin = strings.TrimSpace(string(out))
		dir, err := exec.Command("go", "-C", filepath.Join(env.root, "hack", "cartographer"), "list", "-m", "-f", "{{.Dir}}",
			"github.com/vmware-tanzu/cartographer").Output()
		if err != nil {
			cartographer.err = fmt.Errorf("locating Cartographer's module: %w", err)
			return
		}
		files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(dir)), "config", "crd", "bases", "*.yaml"))
		if err != nil || len(files) == 0 {
			cartographer.err = fmt.Errorf("no CRDs in Cartographer's module (%v)", err)
			return
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				cartographer.err = err
				return
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(b, &u.Object); err != nil {
				cartographer.err = fmt.Errorf("%s: %w", f, err)
				return
			}
			cartographer.crds = append(cartographer.crds, u)
		}
	})
	require.NoError(t, cartographer.err)
	return cartographer.bin, cartographer.crds
}

// cartographerProc is one Cartographer process.
type cartographerProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startCartographer runs Cartographer's controller against the suite's
// cluster, as the suite's admin, logging to _output.
func startCartographer(t *testing.T, name string) *cartographerProc {
	t.Helper()
	bin, _ := cartographerFiles(t)
	certs := t.TempDir()
	require.NoError(t, localcluster.WriteServingCert(certs))
	path := filepath.Join(env.root, "_output", fmt.Sprintf("e2e-real-cartographer-%s-%d.log", name, os.Getpid()))
	f, err := os.Create(path)
	require.NoError(t, err)
	cmd := exec.Command(bin, "--cert-dir="+certs, "--Port=0", "--metrics-port=0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.kubeconfig)
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	p := &cartographerProc{cmd: cmd, log: path, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	t.Logf("cartographer %s started (log %s)", name, path)
	return p
}

// stop stops Cartographer as docs/migration.md says to: its process ends
// (SIGTERM, as a Deployment's deletion does).
func (p *cartographerProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// stopKontinue stops the suite's Kontinue (SIGTERM: a Deployment deleted)
// until the test ends; the test's cleanup puts Kontinue's CRDs back as the
// suite installed them and starts a fresh Kontinue.
func stopKontinue(t *testing.T) {
	t.Helper()
	env.kontinue.stop()
	t.Cleanup(func() {
		ours, err := crds.All()
		if err == nil {
			err = replaceCRDs(ours)
		}
		if err != nil {
			t.Errorf("putting Kontinue's CRDs back: %v", err)
		}
		if !env.kontinue.exited() {
			return
		}
		p, err := startKontinue(nextName())
		if err != nil {
			t.Errorf("starting Kontinue again: %v", err)
			return
		}
		env.kontinue = p
	})
}

// startKontinueNow starts a fresh Kontinue as the suite's (the one a test
// stopped stays stopped).
func startKontinueNow(t *testing.T) {
	t.Helper()
	require.True(t, env.kontinue.exited(), "another Kontinue still runs")
	p, err := startKontinue(nextName())
	require.NoError(t, err)
	env.kontinue = p
}

func nextName() string {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	procs.n++
	return fmt.Sprintf("k%d", procs.n)
}

// replaceCRDs replaces every CRD of objs whole (an update of the stored
// object, not a merge), and waits until each is Established.
func replaceCRDs(objs []*unstructured.Unstructured) error {
	ctx := context.Background()
	ri := env.dyn.Resource(crds.GVR)
	for _, c := range objs {
		err := until(ctx, time.Minute, func() error {
			live, err := ri.Get(ctx, c.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			next := c.DeepCopy()
			next.SetResourceVersion(live.GetResourceVersion())
			_, err = ri.Update(ctx, next, metav1.UpdateOptions{FieldManager: "e2e-real"})
			return err
		})
		if err != nil {
			return fmt.Errorf("replacing CRD %s: %w", c.GetName(), err)
		}
	}
	return until(ctx, time.Minute, func() error {
		for _, c := range objs {
			got, err := ri.Get(ctx, c.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !crds.Established(got) {
				return fmt.Errorf("CRD %s not established", c.GetName())
			}
		}
		return nil
	})
}

// useCartographerCRDs replaces Kontinue's CRDs with Cartographer's, as a
// cluster that runs Cartographer has them.
func useCartographerCRDs(t *testing.T) {
	t.Helper()
	_, objs := cartographerFiles(t)
	require.NoError(t, replaceCRDs(objs))
	require.NoError(t, waitServedSchema(false))
}

// installKontinueCRDs installs Kontinue's CRDs over Cartographer's as
// docs/migration.md says (kubectl apply --server-side --force-conflicts).
func installKontinueCRDs(t *testing.T) {
	t.Helper()
	ours, err := crds.All()
	require.NoError(t, err)
	require.NoError(t, crds.Install(context.Background(), env.dyn, "kubectl", ours, time.Minute))
	require.NoError(t, waitServedSchema(true))
}

// waitServedSchema waits until the API server serves Runnables with
// Kontinue's schema (kontinue) or Cartographer's: an Established CRD is
// served with its new schema a moment later. Kontinue's defaults
// spec.runTemplateRef.kind, Cartographer's does not: a dry-run create
// tells them apart.
func waitServedSchema(kontinue bool) error {
	ctx := context.Background()
	probe := obj(`
apiVersion: carto.run/v1alpha1
kind: Runnable
metadata: {generateName: schema-probe-, namespace: default}
spec: {runTemplateRef: {name: probe}}
`)
	return until(ctx, time.Minute, func() error {
		got, err := env.dyn.Resource(runnableGVR).Namespace("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		_, defaulted, _ := unstructured.NestedString(got.Object, "spec", "runTemplateRef", "kind")
		if defaulted != kontinue {
			return fmt.Errorf("Runnables are not served with the new schema yet")
		}
		return nil
	})
}

// waitOtherNamespacesGone waits until the namespaces of earlier tests are
// gone: Cartographer serves every namespace, and must not act on theirs.
func waitOtherNamespacesGone(t *testing.T, ns string) {
	t.Helper()
	eventually(t, 2*time.Minute, func() string {
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
}

// stop stops Kontinue with SIGTERM (its Deployment deleted) and waits for
// the exit (SIGKILL after a minute).
func (p *kontinueProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.kill()
	}
}

// exited reports whether the process has ended.
func (p *kontinueProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
