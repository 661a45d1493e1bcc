package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/version"
)

type ownerKind struct {
	kind string
	gvr  schema.GroupVersionResource
}

var runnableGVR = schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: "runnables"}

// parseKind accepts what kubectl users type.
func parseKind(s string) (ownerKind, error) {
	gv := schema.GroupVersion{Group: api.Group, Version: api.Version}
	switch s {
	case "workload", "workloads", "wl", "Workload", "workload.carto.run", "workloads.carto.run":
		return ownerKind{api.KindWorkload, gv.WithResource("workloads")}, nil
	case "deliverable", "deliverables", "Deliverable", "deliverable.carto.run", "deliverables.carto.run":
		return ownerKind{api.KindDeliverable, gv.WithResource("deliverables")}, nil
	}
	return ownerKind{}, usagef("unknown kind %q: want workload or deliverable", s)
}

type getOptions struct {
	all    bool
	output string
	watch  bool
}

func getCommand() *command {
	o := &getOptions{}
	return &command{
		name: "get", short: "show a Workload or Deliverable as a tree of its steps", cluster: true,
		usage: "kontinue get workload|deliverable [NAME] [-n NAMESPACE | -A] [-o tree|json|yaml] [--watch]",
		examples: `  # The steps of one workload: template, stamped object, health, outputs, conditions.
  kontinue get workload app -n dev

  # Every workload of every namespace, one line each.
  kontinue get workloads -A

  # The same data as a stable JSON document (docs/cli.md#the-data-model).
  kontinue get deliverable app -n prod -o json

  # Print again on every change (a watch, not polling); Ctrl-C stops.
  kontinue get workload app -n dev --watch
`,
		flags: func(fs *pflag.FlagSet, _ *env) {
			fs.BoolVarP(&o.all, "all-namespaces", "A", false, "list the owners of every namespace")
			fs.StringVarP(&o.output, "output", "o", "tree", "tree, json or yaml")
			fs.BoolVarP(&o.watch, "watch", "w", false, "after printing, watch and print again on every change")
		},
		run: func(e *env, args []string) error { return runGet(e, o, args) },
	}
}

func runGet(e *env, o *getOptions, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return usagef("want a kind (workload or deliverable) and an optional name")
	}
	k, err := parseKind(args[0])
	if err != nil {
		return err
	}
	name := ""
	if len(args) == 2 {
		name = args[1]
	}
	switch o.output {
	case "tree", "json", "yaml":
	default:
		return usagef("-o must be tree, json or yaml")
	}
	if name != "" && o.all {
		return usagef("a name and -A do not go together")
	}
	loaded, err := e.cfg.Load()
	if err != nil {
		return err
	}
	cfg := loaded.Config
	cfg.UserAgent = "kontinue-cli/" + version.Version
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := loaded.Namespace
	if o.all {
		ns = ""
	}
	ctx := e.ctx
	g := &getter{e: e, o: o, dyn: dyn, kind: k, ns: ns}
	if name != "" {
		return g.one(ctx, name)
	}
	return g.list(ctx)
}

type getter struct {
	e    *env
	o    *getOptions
	dyn  dynamic.Interface
	kind ownerKind
	ns   string
}

func (g *getter) res() dynamic.ResourceInterface {
	if g.ns == "" {
		return g.dyn.Resource(g.kind.gvr)
	}
	return g.dyn.Resource(g.kind.gvr).Namespace(g.ns)
}

// build reads the Runnables the owner's steps stamped and makes the view.
func (g *getter) build(ctx context.Context, u *unstructured.Unstructured) view.Owner {
	v := view.Build(u, nil)
	var runnables map[string]*unstructured.Unstructured
	for _, s := range v.Steps {
		if s.Stamped == nil || s.Stamped.Kind != api.KindRunnable {
			continue
		}
		r, err := g.dyn.Resource(runnableGVR).Namespace(s.Stamped.Namespace).Get(ctx, s.Stamped.Name, metav1.GetOptions{})
		if err != nil {
			continue // shown without its runs
		}
		if runnables == nil {
			runnables = map[string]*unstructured.Unstructured{}
		}
		runnables[view.RunnableKey(r.GetNamespace(), r.GetName())] = r
	}
	if runnables == nil {
		return v
	}
	return view.Build(u, runnables)
}

func (g *getter) one(ctx context.Context, name string) error {
	u, err := g.res().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %s/%s not found", g.kind.kind, g.ns, name)
		}
		return err
	}
	if err := g.printOne(g.build(ctx, u)); err != nil {
		return err
	}
	if !g.o.watch {
		return nil
	}
	return g.watch(ctx, u.GetResourceVersion(), metav1.ListOptions{FieldSelector: "metadata.name=" + name}, func(ev watch.Event, u *unstructured.Unstructured) error {
		if ev.Type == watch.Deleted {
			fmt.Fprintf(g.e.stdout, "%s %s/%s was deleted\n", g.kind.kind, u.GetNamespace(), u.GetName())
			return errStop
		}
		if g.o.output == "tree" {
			if g.e.color {
				fmt.Fprint(g.e.stdout, "\x1b[H\x1b[2J") // redraw in place on a terminal
			} else {
				fmt.Fprintf(g.e.stdout, "--- %s\n", time.Now().Format(time.RFC3339))
			}
		}
		return g.printOne(g.build(ctx, u))
	})
}

func (g *getter) printOne(v view.Owner) error {
	switch g.o.output {
	case "json":
		return writeJSON(g.e.stdout, v)
	case "yaml":
		return writeYAML(g.e.stdout, v)
	}
	printTree(g.e.stdout, v, g.e.color)
	return nil
}

func (g *getter) list(ctx context.Context) error {
	l, err := g.res().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var items []view.Owner
	for i := range l.Items {
		items = append(items, g.build(ctx, &l.Items[i]))
	}
	list := view.NewList(items)
	switch g.o.output {
	case "json":
		err = writeJSON(g.e.stdout, list)
	case "yaml":
		err = writeYAML(g.e.stdout, list)
	default:
		if len(list.Items) == 0 && !g.o.watch {
			where := "namespace " + g.ns
			if g.ns == "" {
				where = "any namespace"
			}
			fmt.Fprintf(g.e.stderr, "No %ss found in %s.\n", g.kind.kind, where)
			return nil
		}
		tw := tabwriter.NewWriter(g.e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tNAME\tCHAIN\tREADY\tREASON\tSTEPS\tMESSAGE")
		for _, v := range list.Items {
			listLine(tw, v, g.e.color)
		}
		err = tw.Flush()
	}
	if err != nil || !g.o.watch {
		return err
	}
	return g.watch(ctx, l.GetResourceVersion(), metav1.ListOptions{}, func(ev watch.Event, u *unstructured.Unstructured) error {
		v := g.build(ctx, u)
		if g.o.output != "tree" {
			return g.printOne(v)
		}
		tw := tabwriter.NewWriter(g.e.stdout, 0, 4, 2, ' ', 0)
		if ev.Type == watch.Deleted {
			v.Ready = view.Condition{Type: "Ready", Status: "Deleted"}
		}
		listLine(tw, v, g.e.color)
		return tw.Flush()
	})
}

func listLine(w io.Writer, v view.Owner, color bool) {
	chain := "-"
	if v.Chain != nil {
		chain = v.Chain.Name
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Namespace, v.Name, chain,
		paint(color, statusColor(v.Ready.Status), v.Ready.Status), dash(v.Ready.Reason), v.StepsReady(), oneLine(v.Ready.Message, 80))
}

var errStop = fmt.Errorf("stop watching")

// watch follows changes from rv until ctx ends, starting again from the last
// version seen when the server closes the watch, and from a fresh list when
// that version is too old.
func (g *getter) watch(ctx context.Context, rv string, opts metav1.ListOptions, f func(watch.Event, *unstructured.Unstructured) error) error {
	for ctx.Err() == nil {
		opts.ResourceVersion = rv
		opts.AllowWatchBookmarks = true
		w, err := g.res().Watch(ctx, opts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if ctx.Err() != nil {
					w.Stop()
					return nil // stopped: the stream ends with an error event
				}
				if status := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(status) || apierrors.IsGone(status) {
					rv = "" // too old: start from now
					break
				}
				w.Stop()
				return apierrors.FromObject(ev.Object)
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			if ev.Type == watch.Bookmark {
				continue
			}
			if err := f(ev, u); err != nil {
				w.Stop()
				if err == errStop {
					return nil
				}
				return err
			}
		}
		w.Stop()
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func writeYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
