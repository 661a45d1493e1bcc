package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/annotations"
	"kontinue.dev/kontinue/cli/view"
)

type reconcileOptions struct {
	wait    bool
	retry   bool
	timeout time.Duration
}

func reconcileCommand(a *app) *cobra.Command {
	o := &reconcileOptions{}
	c := &cobra.Command{
		Use:   "reconcile workload|deliverable|runnable NAME",
		Short: "ask Kontinue to reconcile a Workload or Deliverable now, or to retry a failed run",
		Long: `Ask the controller to reconcile a Workload or Deliverable now, e.g. after
fixing RBAC or a template outside the chain's view: sets the annotation
kontinue.dev/reconcile-requested-at to the current time (a merge patch that
changes nothing else).

With --wait, waits until the controller has handled the request (its status
field lastHandledReconcileAt names it) and prints the owner's Ready
condition; the exit status is 1 when Ready is False or the wait times out.

With --retry, also sets kontinue.dev/retry to the same time: every
immutable step of the owner whose newest run of its current inputs failed
creates one more run of the same inputs, once for this request (the run
carries the token and the name of the run it retries, an event RunRetried
says so, the step's status.resources[].lastHandledRetry records the
token). On a Runnable (only with --retry) the same for its runs
(status.lastHandledRetry); a runnable: true step of an owner is retried on
its Runnable.`,
		Example: `  # Reconcile now.
  kontinue reconcile workload app -n dev

  # Reconcile and wait until the controller has done so; then the tree.
  kontinue reconcile workload app -n dev --wait && kontinue get workload app -n dev

  # The newest run of an immutable step failed (a flaky test): run it again.
  kontinue reconcile workload app -n dev --retry --wait

  # The same for a Runnable's run.
  kontinue reconcile runnable app-tests -n dev --retry --wait`,
		Args:              exactArgs(2, "a kind (workload or deliverable) and a name"),
		ValidArgsFunction: a.completeOwnerAndName,
		RunE:              func(c *cobra.Command, args []string) error { return a.runReconcile(c.Context(), o, args) },
	}
	c.Flags().BoolVar(&o.wait, "wait", false, "wait until the controller has handled the request, and print the owner's Ready condition")
	c.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long --wait waits")
	c.Flags().BoolVar(&o.retry, "retry", false, "also ask for one more run of the same inputs where the newest run failed (kontinue.dev/retry), once")
	return c
}

// runReconcile asks for a reconcile of one owner.
func (a *app) runReconcile(ctx context.Context, o *reconcileOptions, args []string) error {
	k, err := parseOwnerKind(args[0])
	if err != nil {
		if ks, kerr := parseKinds(args[0]); kerr == nil && len(ks) == 1 && ks[0].category == catRunnable {
			if !o.retry {
				return usagef("a Runnable is reconciled on every change of its inputs: 'reconcile runnable' takes --retry")
			}
			return a.retryRunnable(ctx, o, ks[0], args[1])
		}
		return usagef("unknown kind %q: want workload, deliverable, or runnable with --retry", args[0])
	}
	dyn, loaded, err := a.dynamicClient("kontinue-cli")
	if err != nil {
		return err
	}
	ns, name := loaded.Namespace, args[1]
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	keys := []string{annotations.ReconcileRequest}
	if o.retry {
		keys = append(keys, annotations.Retry)
	}
	now, patched, err := patchAnnotations(pctx, dyn, k, ns, name, keys...)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.env.Stdout, "%s %s/%s: reconcile requested (%s=%s)\n", k.kind, ns, name, annotations.ReconcileRequest, now)
	if o.retry {
		fmt.Fprintf(a.env.Stdout, "%s %s/%s: retry of failed runs requested (%s=%s)\n", k.kind, ns, name, annotations.Retry, now)
	}
	if !o.wait {
		return nil
	}
	var handled view.Owner
	if _, err := a.waitHandled(ctx, o, dyn, k, ns, name, patched.GetResourceVersion(), func(u *unstructured.Unstructured) bool {
		handled = view.Build(u, nil)
		return reconcileHandled(handled, now)
	}); err != nil {
		return err
	}
	r := handled.Ready
	line := fmt.Sprintf("%s %s/%s: reconciled; Ready: %s", k.kind, ns, name, r.Status)
	if r.Reason != "" {
		line += " (" + r.Reason + ")"
	}
	if r.Status != "True" && r.Message != "" {
		line += ": " + oneLine(r.Message, 0)
	}
	fmt.Fprintln(a.env.Stdout, line)
	if r.Status == "False" {
		return errors.New("reconciled, but not Ready")
	}
	return nil
}

// reconcileHandled reports whether the owner's status answers the request
// made at `at` and describes its current spec.
func reconcileHandled(v view.Owner, at string) bool {
	return v.LastHandledReconcileAt == at && !v.Stale
}

// requestReconcile sets the reconcile request annotation of an owner to the
// current time with a merge patch (nothing else of the object changes) and
// returns that time. `kontinue reconcile` and the dashboard's "reconcile
// now" both call it.
func requestReconcile(ctx context.Context, dyn dynamic.Interface, k ownerKind, ns, name string) (string, error) {
	now, _, err := patchReconcileRequest(ctx, dyn, k, ns, name)
	return now, err
}

func patchReconcileRequest(ctx context.Context, dyn dynamic.Interface, k ownerKind, ns, name string) (string, *unstructured.Unstructured, error) {
	return patchAnnotations(ctx, dyn, k, ns, name, annotations.ReconcileRequest)
}

// patchAnnotations sets annotations keys of an object to the current time
// with a merge patch (nothing else changes) and returns that time.
func patchAnnotations(ctx context.Context, dyn dynamic.Interface, k kindInfo, ns, name string, keys ...string) (string, *unstructured.Unstructured, error) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	set := map[string]string{}
	for _, key := range keys {
		set[key] = now
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	u, err := dyn.Resource(k.gvr()).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kontinue-cli"})
	if apierrors.IsNotFound(err) {
		return "", nil, fmt.Errorf("%s %s/%s not found: %w", k.kind, ns, name, err)
	}
	return now, u, err
}

// retryRunnable asks a Runnable for one more run of its inputs where its
// newest run failed, and with --wait waits until the controller has
// handled the request (status.lastHandledRetry) and prints its Ready
// condition.
func (a *app) retryRunnable(ctx context.Context, o *reconcileOptions, k kindInfo, name string) error {
	dyn, loaded, err := a.dynamicClient("kontinue-cli")
	if err != nil {
		return err
	}
	ns := loaded.Namespace
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now, patched, err := patchAnnotations(pctx, dyn, k, ns, name, annotations.Retry)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.env.Stdout, "%s %s/%s: retry of a failed run requested (%s=%s)\n", k.kind, ns, name, annotations.Retry, now)
	if !o.wait {
		return nil
	}
	handled, err := a.waitHandled(ctx, o, dyn, k, ns, name, patched.GetResourceVersion(), func(u *unstructured.Unstructured) bool {
		h, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledRetry")
		return h == now
	})
	if err != nil {
		return err
	}
	latest, _, _ := unstructured.NestedString(handled.Object, "status", "latestRunRef", "name")
	fmt.Fprintf(a.env.Stdout, "%s %s/%s: handled; newest run: %s\n", k.kind, ns, name, latest)
	return nil
}

// waitHandled watches the object k ns/name from resourceVersion rv, for
// --wait's timeout, until handled says the controller has handled the
// request, and returns that copy. The object deleted meanwhile, or the
// request not handled in time, is an error.
func (a *app) waitHandled(ctx context.Context, o *reconcileOptions, dyn dynamic.Interface, k kindInfo, ns, name, rv string, handled func(*unstructured.Unstructured) bool) (*unstructured.Unstructured, error) {
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var got *unstructured.Unstructured
	err := watchResource(wctx, dyn.Resource(k.gvr()).Namespace(ns), rv,
		metav1.ListOptions{FieldSelector: "metadata.name=" + name}, func(ev watch.Event, u *unstructured.Unstructured) error {
			if ev.Type == watch.Deleted {
				return fmt.Errorf("%s %s/%s was deleted", k.kind, ns, name)
			}
			if handled(u) {
				got = u
				return errStop
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if got == nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the controller did not handle the request within %s: is it running? ('%s check' looks)", o.timeout, a.root.CommandPath())
	}
	return got, nil
}
