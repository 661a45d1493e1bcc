package cli

// `kontinue rollout status|pause|resume|undo CHAIN`: look at and steer the
// roll-out of a chain's definitions in waves (reconciler/rollout,
// docs/rollouts.md). Pause and resume set annotations the controller
// reads; undo writes the definitions of a kept revision back to the chain
// and its templates, with the caller's identity.

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/jsonvalue"
	"kontinue.dev/kontinue/reconciler/rollout"
)

type rolloutOptions struct {
	delivery bool
	output   string
}

func rolloutCommand(a *app) *cobra.Command {
	o := &rolloutOptions{}
	c := &cobra.Command{
		Use:   "rollout status|pause|resume|undo CHAIN",
		Short: "show and steer the roll-out of a chain's definitions in waves",
		Long: `A chain with spec.rollout rolls a change of its own definitions (the chain,
or a template it uses) out to its owners wave by wave (docs/rollouts.md).

  status  the phase, the wave, the stable and target revisions, the owners
          admitted and updated, and those that failed; during a roll-out
          each wave with its owners (of those you may list), failed first
          (exit status 1 when Halted)
  pause   stop the waves where they are (annotation kontinue.dev/rollout-paused);
          owners already admitted stay, the others keep their revision
  resume  go on: clears the pause and, after a halt, looks at the wave again
          (annotation kontinue.dev/rollout-resume)
  undo    during a roll-out, write the stable revision's definitions back to
          the chain and its templates: every owner renders with it again at
          once; after a roll-out completed, the previous revision's, which
          then rolls out in waves like any change`,
		Example: `  kontinue rollout status web
  kontinue rollout pause web
  kontinue rollout resume web
  kontinue rollout undo web
  kontinue rollout status --delivery prod`,
		Args:      exactArgs(2, "a verb (status, pause, resume or undo) and a chain name"),
		ValidArgs: []string{"status", "pause", "resume", "undo"},
		RunE:      func(c *cobra.Command, args []string) error { return a.runRollout(c.Context(), o, args[0], args[1]) },
	}
	c.Flags().BoolVar(&o.delivery, "delivery", false, "the chain is a ClusterDelivery (default: a ClusterSupplyChain)")
	c.Flags().StringVarP(&o.output, "output", "o", "", "status only: json prints status.rollout and the RolledOut condition")
	return c
}

func (a *app) runRollout(ctx context.Context, o *rolloutOptions, verb, name string) error {
	switch verb {
	case "status", "pause", "resume", "undo":
	default:
		return usagef("unknown verb %q: want status, pause, resume or undo", verb)
	}
	if o.output != "" && (o.output != "json" || verb != "status") {
		return usagef("-o json goes with status only")
	}
	f := api.WorkloadFlavor
	if o.delivery {
		f = api.DeliverableFlavor
	}
	dyn, _, err := a.dynamicClient("kontinue-cli")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if verb != "status" {
		did, err := SteerRollout(ctx, dyn, f, name, verb, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintln(a.env.Stdout, did)
		return nil
	}
	chain, _, st, err := readRollout(ctx, dyn, f, name)
	if err != nil {
		return err
	}
	var owners []*unstructured.Unstructured
	var listErr error
	if st.Target != "" {
		// The waves' owners: those the caller may list.
		list, err := dyn.Resource(f.OwnerGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			listErr = fmt.Errorf("cannot list %ss: %w", f.OwnerKind, err)
		} else {
			for i := range list.Items {
				owners = append(owners, &list.Items[i])
			}
		}
	}
	return a.rolloutStatus(rolloutReport(f, chain, st, owners, listErr), o.output)
}

// readRollout reads a chain and its roll-out; an error when it has no
// policy.
func readRollout(ctx context.Context, dyn dynamic.Interface, f *api.Flavor, name string) (*unstructured.Unstructured, *rollout.Compiled, *rollout.Status, error) {
	chain, err := dyn.Resource(f.ChainGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s %s: %w", f.ChainKind, name, err)
	}
	policy, st, err := rollout.Read(chain.Object)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s %s: %w", f.ChainKind, name, err)
	}
	if policy == nil {
		return nil, nil, nil, fmt.Errorf("%s %s has no spec.rollout: a change of its definitions reaches every owner at once", f.ChainKind, name)
	}
	return chain, policy, st, nil
}

// SteerRollout pauses, resumes or undoes (verb) the roll-out of the chain
// name of flavor f, with dyn's identity, and says what it did: what
// `kontinue rollout pause|resume|undo` and the dashboard's buttons do (one
// function for both). now is the resume token.
func SteerRollout(ctx context.Context, dyn dynamic.Interface, f *api.Flavor, name, verb string, now time.Time) (string, error) {
	chain, _, st, err := readRollout(ctx, dyn, f, name)
	if err != nil {
		return "", err
	}
	chains := dyn.Resource(f.ChainGVR)
	switch verb {
	case "pause":
		return annotateChain(ctx, chains, f, name, map[string]any{rollout.AnnotationPaused: "true"}, "paused")
	case "resume":
		return annotateChain(ctx, chains, f, name, map[string]any{rollout.AnnotationPaused: nil,
			rollout.AnnotationResume: now.UTC().Format(time.RFC3339Nano)}, "resumed")
	case "undo":
		return undoRollout(ctx, dyn, f, chain, st)
	}
	return "", fmt.Errorf("unknown verb %q: want pause, resume or undo", verb)
}

func annotateChain(ctx context.Context, chains dynamic.NamespaceableResourceInterface, f *api.Flavor, name string, set map[string]any, what string) (string, error) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	if _, err := chains.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kontinue-cli"}); err != nil {
		return "", fmt.Errorf("%s %s: %w", f.ChainKind, name, err)
	}
	return fmt.Sprintf("%s %s: roll-out %s", f.ChainKind, name, what), nil
}

// undoRollout writes a kept revision's definitions back: the stable one
// during a roll-out, else the previous one.
func undoRollout(ctx context.Context, dyn dynamic.Interface, f *api.Flavor, chain *unstructured.Unstructured, st *rollout.Status) (string, error) {
	name := st.Stable
	if st.Target == "" {
		name = st.Previous
	}
	rev := st.Find(name)
	if rev == nil {
		return "", fmt.Errorf("%s %s: no kept revision to undo to (stable %s, target %s, previous %s)",
			f.ChainKind, chain.GetName(), orNone(st.Stable), orNone(st.Target), orNone(st.Previous))
	}
	kinds := map[string]schema.GroupVersionResource{}
	for _, k := range api.TemplateKinds {
		kinds[k] = api.GVR(strings.ToLower(k) + "s")
	}
	var changed []string
	for _, t := range rev.Templates {
		gvr, ok := kinds[t.Kind]
		if !ok {
			return "", fmt.Errorf("revision %s names template kind %s, which is not one", name, t.Kind)
		}
		res := dyn.Resource(gvr)
		live, err := res.Get(ctx, t.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": api.Group + "/" + api.Version, "kind": t.Kind,
				"metadata": map[string]any{"name": t.Name}, "spec": t.Spec}}
			if _, err := res.Create(ctx, obj, metav1.CreateOptions{FieldManager: "kontinue-cli"}); err != nil {
				return "", fmt.Errorf("%s %s: %w", t.Kind, t.Name, err)
			}
		case err != nil:
			return "", fmt.Errorf("%s %s: %w", t.Kind, t.Name, err)
		case sameJSON(live.Object["spec"], t.Spec):
			continue
		default:
			live.Object["spec"] = t.Spec
			if _, err := res.Update(ctx, live, metav1.UpdateOptions{FieldManager: "kontinue-cli"}); err != nil {
				return "", fmt.Errorf("%s %s: %w", t.Kind, t.Name, err)
			}
		}
		changed = append(changed, t.Kind+" "+t.Name)
	}
	spec := map[string]any{}
	for k, v := range rev.Chain {
		spec[k] = v
	}
	if p, ok := chain.Object["spec"].(map[string]any)["rollout"]; ok {
		spec["rollout"] = p // the policy is not part of a revision
	}
	if !sameJSON(chain.Object["spec"], spec) {
		chain.Object["spec"] = spec
		if _, err := dyn.Resource(f.ChainGVR).Update(ctx, chain, metav1.UpdateOptions{FieldManager: "kontinue-cli"}); err != nil {
			return "", fmt.Errorf("%s %s: %w", f.ChainKind, chain.GetName(), err)
		}
		changed = append(changed, f.ChainKind+" "+chain.GetName())
	}
	if len(changed) == 0 {
		return fmt.Sprintf("%s %s: the definitions are revision %s already", f.ChainKind, chain.GetName(), name), nil
	}
	return fmt.Sprintf("%s %s: restored revision %s (%s)", f.ChainKind, chain.GetName(), name, strings.Join(changed, ", ")), nil
}

// sameJSON compares two JSON values as the API server holds them (int64 and
// float64 alike, integers exact).
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var va, vb any
	_ = jsonvalue.Unmarshal(ja, &va)
	_ = jsonvalue.Unmarshal(jb, &vb)
	return reflect.DeepEqual(va, vb)
}
