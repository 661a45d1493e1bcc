package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Shell completion: kinds from the table, names from the cluster (one LIST,
// bounded in time so that a slow cluster never hangs the shell).

// completeKindAndName completes `get KIND NAME`.
func (a *app) completeKindAndName(c *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return withPrefix(kindWords(), prefix), cobra.ShellCompDirectiveNoFileComp
	case 1:
		ks, err := parseKinds(args[0])
		if err != nil || len(ks) != 1 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return a.names(c.Context(), ks[0], prefix), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeOwnerAndName completes `reconcile|events workload|deliverable NAME`.
func (a *app) completeOwnerAndName(c *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return withPrefix([]string{"workload", "deliverable"}, prefix), cobra.ShellCompDirectiveNoFileComp
	case 1:
		k, err := parseOwnerKind(args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return a.names(c.Context(), k, prefix), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

var namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// completeNamespace completes -n/--namespace with the cluster's namespaces.
func (a *app) completeNamespace(c *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	return a.list(c.Context(), namespaceGVR, false, prefix), cobra.ShellCompDirectiveNoFileComp
}

// names lists the names of kind k in the namespace of the flags.
func (a *app) names(ctx context.Context, k kindInfo, prefix string) []string {
	return a.list(ctx, k.gvr(), k.namespaced, prefix)
}

// list lists the names of a resource (in the flags' namespace when it is
// namespaced), in one LIST bounded in time.
func (a *app) list(ctx context.Context, gvr schema.GroupVersionResource, namespaced bool, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	dyn, loaded, err := a.dynamicClient("kontinue-completion")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var r dynamic.ResourceInterface = dyn.Resource(gvr)
	if namespaced {
		r = dyn.Resource(gvr).Namespace(loaded.Namespace)
	}
	list, err := r.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.GetName())
	}
	return withPrefix(names, prefix)
}

func withPrefix(words []string, prefix string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out = append(out, w)
		}
	}
	return out
}
