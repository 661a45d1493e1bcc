package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/version"
)

func reconcileCommand() *command {
	return &command{
		name: "reconcile", short: "ask Kontinue to reconcile a Workload or Deliverable now", cluster: true,
		usage: "kontinue reconcile workload|deliverable NAME [-n NAMESPACE]",
		examples: `  # Reconcile now, e.g. after fixing RBAC or a template outside the chain's view.
  kontinue reconcile workload app -n dev

  # Then follow it.
  kontinue get workload app -n dev --watch
`,
		run: runReconcile,
	}
}

// runReconcile asks for a reconcile of one owner.
func runReconcile(e *env, args []string) error {
	if len(args) != 2 {
		return usagef("want a kind (workload or deliverable) and a name")
	}
	k, err := parseKind(args[0])
	if err != nil {
		return err
	}
	loaded, err := e.cfg.Load()
	if err != nil {
		return err
	}
	loaded.Config.UserAgent = "kontinue-cli/" + version.Version
	dyn, err := dynamic.NewForConfig(loaded.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	now, err := requestReconcile(ctx, dyn, k, loaded.Namespace, args[1])
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s %s/%s: reconcile requested (%s=%s)\n", k.kind, loaded.Namespace, args[1], annotations.ReconcileRequest, now)
	return nil
}

// requestReconcile sets the reconcile request annotation of an owner to the
// current time with a merge patch (nothing else of the object changes) and
// returns that time. `kontinue reconcile` and the dashboard's "reconcile
// now" both call it.
func requestReconcile(ctx context.Context, dyn dynamic.Interface, k ownerKind, ns, name string) (string, error) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotations.ReconcileRequest: now}}})
	_, err := dyn.Resource(k.gvr).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kontinue-cli"})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("%s %s/%s not found: %w", k.kind, ns, name, err)
	}
	return now, err
}
