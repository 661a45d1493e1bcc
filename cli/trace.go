package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

type traceOptions struct {
	step   string
	output string
}

func traceCommand(a *app) *cobra.Command {
	o := &traceOptions{}
	c := &cobra.Command{
		Use:   "trace KIND NAME",
		Short: "the provenance of an owner's steps or of a stamped object, back to the source revision",
		Long: `Print which input values made what a step publishes, step by step back to the
source revision: commit -> image -> config -> deployment, with when each
step took its inputs and when they succeeded, as the steps' status records
them (status.resources[].provenance).

KIND NAME is a Workload or Deliverable (all the steps no later step reads,
or --step), or any object Kontinue stamped (its step: found by its
carto.run labels, and proven by the owner's status naming the object).
A Deliverable stamped by a Workload is traced through that Workload's
chain too; links that cannot be proven are named under Notes.`,
		Example: `  # Which commit made what the workload deploys.
  kontinue trace workload app -n dev

  # From a stamped object, as JSON.
  kontinue trace configmap app-deploy -n dev -o json`,
		Args: exactArgs(2, "a kind and a name"),
		RunE: func(c *cobra.Command, args []string) error { return a.runTrace(c.Context(), o, args) },
	}
	fs := c.Flags()
	fs.StringVar(&o.step, "step", "", "trace this step of the owner (default: every step no later step reads)")
	fs.StringVarP(&o.output, "output", "o", "", "text (the default) or json")
	return c
}

func (a *app) runTrace(ctx context.Context, o *traceOptions, args []string) error {
	switch o.output {
	case "", "text", "json":
	default:
		return usagef("-o must be text or json")
	}
	dyn, loaded, err := a.dynamicClient("kontinue-cli")
	if err != nil {
		return err
	}
	ns := loaded.Namespace
	var ownerKind kindInfo
	var ownerName string
	var steps []string
	var notes []string
	var stamped *unstructured.Unstructured
	if k, err := parseOwnerKind(args[0]); err == nil {
		ownerKind, ownerName = k, args[1]
		if o.step != "" {
			steps = []string{o.step}
		}
	} else {
		// Any stamped object: its labels say which owner and step, its
		// owner's status must name it.
		obj, err := a.getAnyObject(ctx, dyn, ns, args[0], args[1])
		if err != nil {
			return err
		}
		l := obj.GetLabels()
		switch {
		case l[api.LabelWorkloadName] != "":
			ownerKind, ownerName = kindWorkload, l[api.LabelWorkloadName]
		case l[api.LabelDeliverableName] != "":
			ownerKind, ownerName = kindDeliverable, l[api.LabelDeliverableName]
		default:
			return fmt.Errorf("%s %s/%s carries no %s or %s label: not an object Kontinue stamped", obj.GetKind(), ns, obj.GetName(), api.LabelWorkloadName, api.LabelDeliverableName)
		}
		step := l[api.LabelResourceName]
		if step == "" {
			return fmt.Errorf("%s %s/%s carries no %s label: its step is unknown", obj.GetKind(), ns, obj.GetName(), api.LabelResourceName)
		}
		steps, stamped = []string{step}, obj
		notes = append(notes, fmt.Sprintf("%s %s/%s: stamped by %s %s/%s step [%s] (its labels)", obj.GetKind(), ns, obj.GetName(), ownerKind.kind, ns, ownerName, step))
	}
	ownerObj, err := getOwner(ctx, dyn, ownerKind, ns, ownerName)
	if err != nil {
		return err
	}
	owner, err := view.DecodeTraceOwner(ownerObj)
	if err != nil {
		return fmt.Errorf("%s %s/%s: unreadable status: %w", ownerKind.kind, ns, ownerName, err)
	}
	if stamped != nil && !names(owner, steps[0], stamped) {
		notes = append(notes, fmt.Sprintf("the status of %s %s/%s does not name %s %s/%s as step [%s]'s: its labels are not proven (copied, or from an older stamp)",
			ownerKind.kind, ns, ownerName, stamped.GetKind(), ns, stamped.GetName(), steps[0]))
	}
	if len(steps) == 0 {
		steps = owner.Leaves()
	}
	var upstream *view.TraceOwner
	var upstreamStep string
	if ownerKind.kind == api.KindDeliverable {
		upstream, upstreamStep, notes = stampingWorkload(ctx, dyn, ownerObj, notes)
	}
	t, err := view.TraceStep(owner, steps, upstream, upstreamStep)
	if err != nil {
		return err
	}
	t.Notes = append(notes, t.Notes...)
	if o.output == "json" {
		return writeJSON(a.env.Stdout, t)
	}
	printTrace(a.env.Stdout, t)
	return nil
}

// names reports whether owner's status names obj as one of step's objects.
func names(owner view.TraceOwner, step string, obj *unstructured.Unstructured) bool {
	same := func(r *st.StampedRef) bool {
		return r != nil && r.Kind == obj.GetKind() && r.Namespace == obj.GetNamespace() && r.Name == obj.GetName()
	}
	for _, r := range owner.Status.Resources {
		if r.Name != step {
			continue
		}
		if same(r.StampedRef) || same(r.ShadowRef) {
			return true
		}
		for i := range r.StampedObjects {
			if same(&r.StampedObjects[i]) {
				return true
			}
		}
	}
	return false
}

// stampingWorkload finds the Workload that stamped a Deliverable: its
// controller reference names it, and the Workload's status must name the
// Deliverable as a step's object (a reference alone anyone could write).
func stampingWorkload(ctx context.Context, dyn dynamic.Interface, d *unstructured.Unstructured, notes []string) (*view.TraceOwner, string, []string) {
	ref := metav1.GetControllerOf(d)
	if ref == nil || ref.Kind != api.KindWorkload {
		return nil, "", append(notes, fmt.Sprintf("Deliverable %s/%s has no Workload as its controller: traced within its delivery only", d.GetNamespace(), d.GetName()))
	}
	w, err := dyn.Resource(kindWorkload.gvr()).Namespace(d.GetNamespace()).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil || w.GetUID() != ref.UID {
		return nil, "", append(notes, fmt.Sprintf("Deliverable %s/%s names Workload %s as its controller, which could not be read (or is another object now): traced within its delivery only", d.GetNamespace(), d.GetName(), ref.Name))
	}
	o, err := view.DecodeTraceOwner(w)
	if err != nil {
		return nil, "", append(notes, fmt.Sprintf("Workload %s/%s: unreadable status: %v", w.GetNamespace(), w.GetName(), err))
	}
	for _, r := range o.Status.Resources {
		if names(o, r.Name, d) {
			return &o, r.Name, notes
		}
	}
	return nil, "", append(notes, fmt.Sprintf("Workload %s/%s controls Deliverable %s/%s but no step of its status names it: not proven, traced within its delivery only", w.GetNamespace(), w.GetName(), d.GetNamespace(), d.GetName()))
}

// getAnyObject reads an object of any kind kubectl would take by that name
// (configmap, test.test.run, Image.kpack.io …).
func (a *app) getAnyObject(ctx context.Context, dyn dynamic.Interface, ns, kind, name string) (*unstructured.Unstructured, error) {
	loaded, err := a.cluster.Load()
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(loaded.Config)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	gvr, err := mapper.ResourceFor(schema.ParseGroupResource(strings.ToLower(kind)).WithVersion(""))
	if err != nil {
		return nil, usagef("unknown kind %q: want workload, deliverable, or a kind the cluster serves (%v)", kind, err)
	}
	u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %s/%s not found", kind, ns, name)
	}
	return u, err
}

// printTrace prints the hops upstream first, each with its inputs and
// outputs, then the notes.
func printTrace(w io.Writer, t view.Trace) {
	owner := ""
	for _, h := range t.Hops {
		if h.Owner != owner {
			owner = h.Owner
			fmt.Fprintln(w, owner)
		}
		line := "  [" + h.Step + "]"
		if h.Stamped != "" {
			line += " " + h.Stamped
		}
		if s := h.Input; s != nil {
			line += "  " + s.Outcome
			if s.TakenAt != nil {
				line += "  taken " + s.TakenAt.UTC().Format(time.RFC3339)
			}
			if s.EndedAt != nil {
				line += "  ended " + s.EndedAt.UTC().Format(time.RFC3339)
				if s.TakenAt != nil {
					line += fmt.Sprintf(" (%s)", s.EndedAt.Sub(s.TakenAt.Time))
				}
			}
		}
		fmt.Fprintln(w, line)
		if s := h.Input; s != nil && len(h.Links) == 0 {
			fmt.Fprintf(w, "      from the owner's spec (generation %d)\n", s.OwnerGeneration)
		}
		for _, l := range h.Links {
			mark := "= its outputs now"
			if !l.Matches {
				mark = "(older than its outputs now)"
			}
			fmt.Fprintf(w, "      in  %s <- [%s] %s %s\n", l.Input, l.Resource, l.Value, mark)
		}
		for _, n := range []string{"url", "revision", "image", "config"} {
			if v, ok := h.Outputs[n]; ok {
				fmt.Fprintf(w, "      out %s: %s\n", n, v)
			}
		}
	}
	if len(t.Notes) > 0 {
		fmt.Fprintln(w, "Notes:")
		for _, n := range t.Notes {
			fmt.Fprintln(w, "  - "+n)
		}
	}
}
