package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/hack/localcluster"
)

// startCartographer installs Cartographer's own CRDs and runs its
// controller, built from the pinned module, with a self-signed certificate
// for its webhook server (no webhook configuration points at it, as in the
// suite's own kuttl setup).
func startCartographer(ctx context.Context, root, carto, kubeconfig, dir, logPath string) (stop func(), err error) {
	bin, err := output(ctx, root, filepath.Join(root, "hack", "install-cartographer.sh"))
	if err != nil {
		return nil, fmt.Errorf("building cartographer: %w", err)
	}
	if err := installCRDs(ctx, kubeconfig, filepath.Join(carto, "config", "crd", "bases")); err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "cartographer-certs")
	if err := localcluster.WriteServingCert(certDir); err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	c := exec.Command(bin, "--cert-dir", certDir, "--Port", "0")
	c.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	c.Stdout, c.Stderr = logf, logf
	if err := c.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		_ = c.Process.Signal(syscall.SIGTERM)
		_, _ = c.Process.Wait()
		logf.Close()
	}, nil
}

func installCRDs(ctx context.Context, kubeconfig, folder string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(folder, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s: %v", folder, err)
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := dc.Resource(gvr).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the CRD of %s: %w", filepath.Base(f), err)
		}
	}
	return nil
}
