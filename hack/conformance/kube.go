package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// pollServed waits until the API server lists every resource in group
// version gv.
func pollServed(ctx context.Context, kubeconfig, gv string, resources []string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var missing []string
	for {
		missing = missing[:0]
		list, err := dc.ServerResourcesForGroupVersion(gv)
		served := map[string]bool{}
		if err == nil {
			for _, r := range list.APIResources {
				served[r.Name] = true
			}
		}
		for _, r := range resources {
			if !served[r] {
				missing = append(missing, r)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not served: %v", gv, missing)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// grantServiceAccounts binds cluster-admin to every service account.
// Cartographer's suite gives its workloads' service accounts no RBAC at
// all: it was written for a test API server whose requests were not
// authorized (envtest's old insecure port). Kontinue, like Cartographer,
// stamps with the workload's service account, so the suite's assumption is
// restored here, outside the suite, rather than by editing it.
func grantServiceAccounts(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRoleBinding",
		"metadata":   map[string]any{"name": "conformance-service-accounts"},
		"roleRef":    map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{
			"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:serviceaccounts",
		}},
	}}
	gvr := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	_, err = dc.Resource(gvr).Create(ctx, crb, metav1.CreateOptions{})
	return err
}
