package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
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
	"kontinue.dev/kontinue/reconciler/spans"
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
them (status.resources[].provenance), and how each input a chain's verify
policy names was checked (status.resources[].verification: Verified or
Refused, the digest, the rule, whether the step holds its previous input,
why), as 'kontinue get' shows it.

KIND NAME is a Workload or Deliverable (all the steps no later step reads,
or --step), or any object Kontinue stamped (its step: found by its
carto.run labels, and proven by the owner's status naming the object).
A Deliverable stamped by a Workload is traced through that Workload's
chain too, and its first step says which Workload revision made what it
published, proven as the controller's span links are (the evidence is
printed), or not proven with the condition that failed. Links that cannot
be proven are named under Notes.`,
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
	var up *view.Upstream
	if ownerKind.kind == api.KindDeliverable {
		up, notes = stampingWorkload(ctx, dyn, ownerObj, notes)
	}
	t, err := view.TraceStep(owner, steps, up)
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

// stampingWorkload reads the Workload a Deliverable's controller reference
// names, of that UID, and the evidence spans.LinkOf weighs: whether that
// Workload made the revision the Deliverable delivers is TraceStep's to
// say. nil: no Workload claims the Deliverable.
func stampingWorkload(ctx context.Context, dyn dynamic.Interface, d *unstructured.Unstructured, notes []string) (*view.Upstream, []string) {
	ref := metav1.GetControllerOf(d)
	if ref == nil || ref.Kind != api.KindWorkload || ref.APIVersion != api.Group+"/"+api.Version {
		return nil, append(notes, fmt.Sprintf("Deliverable %s/%s has no Workload as its controller: traced within its delivery only", d.GetNamespace(), d.GetName()))
	}
	up := &view.Upstream{Ref: api.KindWorkload + "/" + d.GetNamespace() + "/" + ref.Name}
	w, err := dyn.Resource(kindWorkload.gvr()).Namespace(d.GetNamespace()).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil || w.GetUID() != ref.UID {
		up.Why = fmt.Sprintf("the Workload its controller reference names could not be read, or is another object now (%s)", readErr(err, "another UID"))
		return up, append(notes, fmt.Sprintf("Deliverable %s/%s names Workload %s as its controller, which could not be read (or is another object now): traced within its delivery only", d.GetNamespace(), d.GetName(), ref.Name))
	}
	o, err := view.DecodeTraceOwner(w)
	if err != nil {
		up.Why = fmt.Sprintf("the Workload's status is unreadable: %v", err)
		return up, append(notes, fmt.Sprintf("Workload %s/%s: unreadable status: %v", w.GetNamespace(), w.GetName(), err))
	}
	up.Workload = o
	up.Feed = spans.FeedOf(w, d, o.Status.Resources)
	if up.Feed.StampedBy() == "" {
		notes = append(notes, fmt.Sprintf("Workload %s/%s controls Deliverable %s/%s but no step of its status names it: traced within its delivery only", w.GetNamespace(), w.GetName(), d.GetNamespace(), d.GetName()))
	}
	return up, notes
}

func readErr(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
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

// times are when s was taken and ended, and how long it took.
func times(s *st.InputSet) string {
	out := ""
	if s.TakenAt != nil {
		out += "  taken " + s.TakenAt.UTC().Format(time.RFC3339)
	}
	if s.EndedAt != nil {
		out += "  ended " + s.EndedAt.UTC().Format(time.RFC3339)
		if s.TakenAt != nil {
			out += fmt.Sprintf(" (%s)", s.EndedAt.Sub(s.TakenAt.Time))
		}
	}
	return out
}

// printCrossing prints the hop from the Workload revision that made what
// a Deliverable's first step published, and what proved it, or why it is
// not proven.
func printCrossing(w io.Writer, c *view.Crossing) {
	by := c.Workload
	if c.Step != "" {
		by += " [" + c.Step + "]"
	}
	if !c.Proven {
		fmt.Fprintf(w, "      made by %s: not proven (condition %d, %s): %s\n", by, c.Condition, c.Failed, c.Reason)
		return
	}
	line := "      made by " + by + " revision " + c.Revision
	if s := c.Set; s != nil {
		line += "  " + s.Outcome + times(s)
	}
	fmt.Fprintln(w, line)
	proof := "        proven by " + strings.Join(c.Evidence, ", ") + " (out " + c.Output + " is a value it took)"
	if !slices.Contains(c.Evidence, spans.CondTraceParent.String()) {
		proof += "; no traceparent to weigh"
	}
	fmt.Fprintln(w, proof)
}

// noPaint is a painter that does not colour (trace prints plain text).
func noPaint(_, s string) string { return s }

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
			line += "  " + s.Outcome + times(s)
		}
		fmt.Fprintln(w, line)
		if s := h.Input; s != nil && len(h.Links) == 0 {
			fmt.Fprintf(w, "      from the owner's spec (generation %d)\n", s.OwnerGeneration)
		}
		if c := h.From; c != nil {
			printCrossing(w, c)
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
		for _, iv := range h.Verification {
			fmt.Fprintf(w, "      verify %s\n", verificationLine(noPaint, iv))
		}
	}
	if len(t.Notes) > 0 {
		fmt.Fprintln(w, "Notes:")
		for _, n := range t.Notes {
			fmt.Fprintln(w, "  - "+n)
		}
	}
}
