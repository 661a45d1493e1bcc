package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/cli/view"
)

var eventsGVR = corev1.SchemeGroupVersion.WithResource("events")

type eventsOptions struct {
	watch  bool
	types  []string
	output string
	color  string
}

func eventsCommand(a *app) *cobra.Command {
	o := &eventsOptions{}
	c := &cobra.Command{
		Use:   "events workload|deliverable NAME",
		Short: "the events of an owner, its chain and the objects its steps stamped, merged",
		Long: `Print the Kubernetes events of a Workload or Deliverable, of its chain, and of
every object its steps stamped (and the latest runs of its Runnables),
merged and sorted by time: what happened to the owner, and what the
controllers of the stamped objects (Tekton, kpack, Flux, ...) said.

One LIST of the namespace's events (and one of the chain's); --watch then
follows the namespace's events for those objects.`,
		Example: `  # What happened to a workload and everything it stamped.
  kontinue events workload app -n dev

  # Only warnings, and keep following.
  kontinue events workload app -n dev --types Warning --watch`,
		Args:              exactArgs(2, "a kind (workload or deliverable) and a name"),
		ValidArgsFunction: a.completeOwnerAndName,
		RunE:              func(c *cobra.Command, args []string) error { return a.runEvents(c.Context(), o, args) },
	}
	fs := c.Flags()
	fs.BoolVarP(&o.watch, "watch", "w", false, "after printing, follow new events")
	fs.StringSliceVar(&o.types, "types", nil, "only events of these types (Normal, Warning); repeatable")
	fs.StringVarP(&o.output, "output", "o", "", "table (the default), json or yaml (the events as read)")
	colorFlag(fs, &o.color)
	return c
}

// eventTarget is an object whose events are shown.
type eventTarget struct{ kind, namespace, name string }

func (a *app) runEvents(ctx context.Context, o *eventsOptions, args []string) error {
	k, err := parseOwnerKind(args[0])
	if err != nil {
		return err
	}
	switch o.output {
	case "", "table", "json", "yaml":
	default:
		return usagef("-o must be table, json or yaml")
	}
	for _, t := range o.types {
		if t != corev1.EventTypeNormal && t != corev1.EventTypeWarning {
			return usagef("--types %q: want Normal or Warning", t)
		}
	}
	color, err := a.useColor(o.color)
	if err != nil {
		return err
	}
	dyn, loaded, err := a.dynamicClient("kontinue-cli")
	if err != nil {
		return err
	}
	ns, name := loaded.Namespace, args[1]
	owner, err := getOwner(ctx, dyn, k, ns, name)
	if err != nil {
		return err
	}
	g := &getter{dyn: dyn}
	v := g.ownerView(ctx, owner)
	targets := eventTargets(v)
	evs, rv, err := listEvents(ctx, dyn, ns, targets)
	if err != nil {
		return err
	}
	if v.Chain != nil {
		// Events of a cluster-scoped object are in the default namespace.
		l, err := dyn.Resource(eventsGVR).Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.kind": v.Chain.Kind, "involvedObject.name": v.Chain.Name}.String()})
		if err == nil {
			evs = append(evs, decodeEvents(l.Items)...)
		}
	}
	evs = filterTypes(evs, o.types)
	sortEvents(evs)
	w := a.env.Stdout
	switch o.output {
	case "json", "yaml":
		items := make([]any, 0, len(evs))
		for _, e := range evs {
			items = append(items, e)
		}
		f := writeJSON
		if o.output == "yaml" {
			f = writeYAML
		}
		if err := f(w, map[string]any{"apiVersion": "v1", "kind": "List", "items": items}); err != nil {
			return err
		}
	default:
		if len(evs) == 0 && !o.watch {
			fmt.Fprintf(a.env.Stderr, "No events for %s %s/%s or what it stamped.\n", k.kind, ns, name)
			return nil
		}
	}
	t := newTable("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
	now := a.env.Now()
	if o.output == "" || o.output == "table" {
		for _, e := range evs {
			t.add(eventRow(e, now)...)
		}
		if err := t.write(w, color); err != nil {
			return err
		}
	}
	if !o.watch {
		return nil
	}
	return watchResource(ctx, dyn.Resource(eventsGVR).Namespace(ns), rv, metav1.ListOptions{}, func(ev watch.Event, u *unstructured.Unstructured) error {
		if ev.Type == watch.Deleted {
			return nil // expired
		}
		e, ok := decodeEvent(u)
		if !ok || !targets[eventTarget{e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name}] || len(filterTypes([]corev1.Event{e}, o.types)) == 0 {
			return nil
		}
		switch o.output {
		case "json":
			return writeJSON(w, e)
		case "yaml":
			if _, err := fmt.Fprintln(w, "---"); err != nil {
				return err
			}
			return writeYAML(w, e)
		}
		return t.writeRow(w, color, eventRow(e, a.env.Now())...)
	})
}

// eventTargets are the owner and every object its status names.
func eventTargets(v view.Owner) map[eventTarget]bool {
	t := map[eventTarget]bool{{v.OwnerKind, v.Namespace, v.Name}: true}
	add := func(r *view.Ref) {
		if r != nil {
			t[eventTarget{r.Kind, r.Namespace, r.Name}] = true
		}
	}
	for _, s := range v.Steps {
		add(s.Stamped)
		add(s.Shadow)
		for i := range s.Objects {
			add(&s.Objects[i])
		}
		if s.Runnable != nil {
			add(s.Runnable.LatestRun)
			add(s.Runnable.LatestSuccessfulRun)
		}
	}
	for i := range v.Orphans {
		add(&v.Orphans[i])
	}
	return t
}

// listEvents reads the namespace's events with one LIST and keeps those of
// the targets.
func listEvents(ctx context.Context, dyn dynamic.Interface, ns string, targets map[eventTarget]bool) ([]corev1.Event, string, error) {
	l, err := dyn.Resource(eventsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	var out []corev1.Event
	for _, e := range decodeEvents(l.Items) {
		if targets[eventTarget{e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name}] {
			out = append(out, e)
		}
	}
	return out, l.GetResourceVersion(), nil
}

func decodeEvents(items []unstructured.Unstructured) []corev1.Event {
	var out []corev1.Event
	for i := range items {
		if e, ok := decodeEvent(&items[i]); ok {
			out = append(out, e)
		}
	}
	return out
}

func decodeEvent(u *unstructured.Unstructured) (corev1.Event, bool) {
	var e corev1.Event
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &e); err != nil {
		return e, false
	}
	e.ManagedFields = nil
	e.APIVersion, e.Kind = "v1", "Event"
	return e, true
}

func filterTypes(evs []corev1.Event, types []string) []corev1.Event {
	if len(types) == 0 {
		return evs
	}
	var out []corev1.Event
	for _, e := range evs {
		for _, t := range types {
			if strings.EqualFold(e.Type, t) {
				out = append(out, e)
			}
		}
	}
	return out
}

// sortTime is when an event last happened, to the nanosecond when it can
// be told. lastTimestamp has whole seconds, so the events of one reconcile
// would tie; client-go's recorders name an event "<object>.<UnixNano in
// hex>" of its first occurrence, which orders them within that second (a
// name that holds no time of that second changes nothing).
func sortTime(e corev1.Event) time.Time {
	t := view.LastSeen(e)
	if t.Nanosecond() != 0 {
		return t
	}
	i := strings.LastIndexByte(e.Name, '.')
	if i < 0 {
		return t
	}
	n, err := strconv.ParseInt(e.Name[i+1:], 16, 64)
	if err != nil || n <= 0 {
		return t
	}
	if named := time.Unix(0, n); named.Truncate(time.Second).Equal(t) {
		return named
	}
	return t
}

// sortEvents orders events oldest first (the newest at the bottom, next to
// the prompt), ties by object and reason.
func sortEvents(evs []corev1.Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		ti, tj := sortTime(evs[i]), sortTime(evs[j])
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		oi, oj := evs[i].InvolvedObject.Kind+"/"+evs[i].InvolvedObject.Name, evs[j].InvolvedObject.Kind+"/"+evs[j].InvolvedObject.Name
		if oi != oj {
			return oi < oj
		}
		return evs[i].Reason < evs[j].Reason
	})
}

func eventRow(e corev1.Event, now time.Time) []cell {
	typ := cell{text: e.Type}
	if e.Type == corev1.EventTypeWarning {
		typ.color = cYellow
	}
	msg := oneLine(e.Message, 0)
	if e.Count > 1 {
		msg += fmt.Sprintf(" (x%d)", e.Count)
	}
	return []cell{plain(age(now, view.LastSeen(e))), typ, plain(e.Reason), plain(e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name), plain(msg)}
}
