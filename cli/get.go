package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/step"
)

type getOptions struct {
	all           bool
	output        string
	watch         bool
	selector      string
	fieldSelector string
	status        []string
	noHeaders     bool
	color         string
}

func getCommand(a *app) *cobra.Command {
	o := &getOptions{}
	c := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "show Workloads and Deliverables as trees of steps; chains, templates, Runnables",
		Long: `Show one Workload or Deliverable as a tree of its steps (template, stamped
object, health, outputs, conditions), or list them one line each. Also lists
ClusterSupplyChains and ClusterDeliveries (one chain: its steps as a tree),
templates (all kinds with "templates") and Runnables.

Kinds, as kubectl and Cartographer name them: workloads (workload, wld, wl),
deliverables (dlv), clustersupplychains (csc, supplychains),
clusterdeliveries (cd, deliveries), templates, clustersourcetemplates (cst),
clusterimagetemplates (cit), clusterconfigtemplates (cct),
clusterdeploymenttemplates (cdt), clustertemplates (ct),
clusterruntemplates (crt), runnables (run).

-o json and -o yaml print Workloads and Deliverables as the data model of
docs/cli.md (OwnerView), chains as ChainView, templates and Runnables as
read; -o jsonpath and -o custom-columns evaluate on that same document.`,
		Example: `  # The steps of one workload: template, stamped object, health, outputs, conditions.
  kontinue get workload app -n dev

  # Every workload of every namespace, one line each; only those not Ready.
  kontinue get workloads -A
  kontinue get wld -A --status-selector ready=false

  # Selected by label, as custom columns.
  kontinue get wld -l team=payments -o custom-columns=NAME:.name,CHAIN:.chain.name,READY:.ready.status

  # The stamped object of each step, with a JSONPath template.
  kontinue get workload app -n dev -o jsonpath='{range .steps[*]}{.name}{"\t"}{.stamped.name}{"\n"}{end}'

  # The same data as a stable JSON document (docs/cli.md#the-data-model).
  kontinue get deliverable app -n prod -o json

  # Chains, one chain's steps, every template, the Runnables of a namespace.
  kontinue get clustersupplychains
  kontinue get csc source-to-url
  kontinue get templates
  kontinue get runnables -n dev

  # Print again on every change (a watch, not polling); Ctrl-C stops.
  kontinue get workload app -n dev --watch`,
		Args:              rangeArgs(1, 2, "a kind (workloads, deliverables, clustersupplychains, clusterdeliveries, templates, runnables, ...) and an optional name"),
		ValidArgsFunction: a.completeKindAndName,
		RunE:              func(c *cobra.Command, args []string) error { return a.runGet(c.Context(), o, args) },
	}
	fs := c.Flags()
	fs.BoolVarP(&o.all, "all-namespaces", "A", false, "list the objects of every namespace")
	fs.StringVarP(&o.output, "output", "o", "", "tree (one owner or chain; the default), wide, name, json, yaml, jsonpath=TEMPLATE, custom-columns=HEADER:PATH,...")
	fs.StringVarP(&o.selector, "selector", "l", "", "label selector, e.g. -l team=payments,env!=prod")
	fs.StringVar(&o.fieldSelector, "field-selector", "", "field selector, e.g. --field-selector metadata.name=app")
	fs.StringSliceVar(&o.status, "status-selector", nil, "only objects whose condition has this status, CONDITION=STATUS (ready=false, ResourcesHealthy=unknown); repeatable")
	fs.BoolVarP(&o.watch, "watch", "w", false, "after printing, watch and print again on every change")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "print tables without their header line")
	colorFlag(fs, &o.color)
	return c
}

// getter is one `get`.
type getter struct {
	ctx    context.Context
	a      *app
	o      *getOptions
	out    output
	dyn    dynamic.Interface
	ns     string // "" with -A (cluster-scoped kinds ignore it)
	color  bool
	tty    bool
	status []statusReq
	now    time.Time
	// runnables holds the Runnables read by one LIST for a list of owners
	// (nil: a single owner GETs its own).
	runnables map[string]*unstructured.Unstructured
	// owners are the owners read to count a chain's, by owner kind (nil
	// when they may not be listed).
	owners map[string][]view.Owner
}

func (a *app) runGet(ctx context.Context, o *getOptions, args []string) error {
	ks, err := parseKinds(args[0])
	if err != nil {
		return err
	}
	name := ""
	if len(args) == 2 {
		name = args[1]
	}
	out, err := parseOutput(o.output)
	if err != nil {
		return err
	}
	status, err := parseStatusSelector(o.status)
	if err != nil {
		return err
	}
	color, err := a.useColor(o.color)
	if err != nil {
		return err
	}
	switch {
	case name != "" && o.all:
		return usagef("a name and -A do not go together")
	case name != "" && (o.selector != "" || o.fieldSelector != "" || len(status) > 0):
		return usagef("a name and a selector do not go together")
	case name != "" && len(ks) > 1:
		return usagef("a name needs one template kind, e.g. get clustertemplate %s", name)
	case o.watch && len(ks) > 1:
		return usagef("--watch needs one kind")
	case len(status) > 0 && ks[0].category == catTemplate:
		return usagef("templates have no status: --status-selector does not apply")
	}
	dyn, loaded, err := a.dynamicClient("kontinue-cli")
	if err != nil {
		return err
	}
	g := &getter{ctx: ctx, a: a, o: o, out: out, dyn: dyn, ns: loaded.Namespace, color: color, tty: a.isTerminal(), status: status, now: a.env.Now()}
	if o.all {
		g.ns = ""
	}
	p := g.printerFor(ks)
	if name != "" {
		return g.one(ctx, ks[0], p, name)
	}
	return g.list(ctx, ks, p)
}

func (g *getter) res(k kindInfo) dynamic.ResourceInterface {
	if !k.namespaced || g.ns == "" {
		return g.dyn.Resource(k.gvr())
	}
	return g.dyn.Resource(k.gvr()).Namespace(g.ns)
}

// kindPrinter is how `get` shows one category of kinds.
type kindPrinter struct {
	kinds []kindInfo
	// header and row make the table; kind adds a KIND column (several
	// template kinds at once), ns a NAMESPACE column (-A).
	header func(wide bool) []string
	row    func(u *unstructured.Unstructured, wide bool) []cell
	// doc is what -o json|yaml|jsonpath|custom-columns print of an
	// object; listDoc of several.
	doc     func(ctx context.Context, u *unstructured.Unstructured) any
	listDoc func(docs []any) any
	// tree prints one object (nil: its table row).
	tree func(w io.Writer, ctx context.Context, u *unstructured.Unstructured) error
	// conditions are what --status-selector looks at.
	conditions func(u *unstructured.Unstructured) []view.Condition
	// prepare reads what the documents of a list need, once.
	prepare func(ctx context.Context, objs []*unstructured.Unstructured)
}

func (g *getter) printerFor(ks []kindInfo) *kindPrinter {
	switch ks[0].category {
	case catOwner:
		return g.ownerPrinter(ks)
	case catChain:
		return g.chainPrinter(ks)
	case catRunnable:
		return g.runnablePrinter(ks)
	}
	return g.templatePrinter(ks)
}

// one prints one object, then follows it with --watch.
func (g *getter) one(ctx context.Context, k kindInfo, p *kindPrinter, name string) error {
	u, err := g.res(k).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			if k.namespaced {
				return fmt.Errorf("%s %s/%s not found", k.kind, g.ns, name)
			}
			return fmt.Errorf("%s %s not found", k.kind, name)
		}
		return err
	}
	var t *table
	if err := g.printOne(ctx, p, u, &t, true); err != nil {
		return err
	}
	if !g.o.watch {
		return nil
	}
	return watchResource(ctx, g.res(k), u.GetResourceVersion(), metav1.ListOptions{FieldSelector: "metadata.name=" + name}, func(ev watch.Event, u *unstructured.Unstructured) error {
		if ev.Type == watch.Deleted {
			fmt.Fprintf(g.a.env.Stdout, "%s %s was deleted\n", k.kind, objectName(u))
			return errStop
		}
		if g.out.format == outDefault && p.tree != nil {
			if g.tty {
				fmt.Fprint(g.a.env.Stdout, "\x1b[H\x1b[2J") // redraw in place on a terminal
			} else {
				fmt.Fprintf(g.a.env.Stdout, "--- %s\n", time.Now().Format(time.RFC3339))
			}
		}
		return g.printOne(ctx, p, u, &t, false)
	})
}

// printOne prints one object in the chosen format; t keeps a table's
// columns across the prints of a watch.
func (g *getter) printOne(ctx context.Context, p *kindPrinter, u *unstructured.Unstructured, t **table, first bool) error {
	w := g.a.env.Stdout
	switch {
	case g.out.structured():
		if g.out.format == outCustomColumns && !first {
			return g.out.printColumns(w, []any{p.doc(ctx, u)}, false)
		}
		return g.out.printDoc(w, p.doc(ctx, u), nil)
	case g.out.format == outName:
		_, err := fmt.Fprintln(w, resourceName(u))
		return err
	case g.out.format == outDefault && p.tree != nil:
		return p.tree(w, ctx, u)
	}
	wide := g.out.format == outWide
	if *t == nil {
		*t = newTable(g.header(p, wide)...)
		if !g.o.noHeaders {
			if err := (*t).writeRow(w, false, headerCells((*t).header)...); err != nil {
				return err
			}
		}
	}
	return (*t).writeRow(w, g.color, g.row(p, u, wide)...)
}

func (g *getter) header(p *kindPrinter, wide bool) []string {
	h := p.header(wide)
	if len(p.kinds) > 1 {
		h = append([]string{"KIND"}, h...)
	}
	if g.ns == "" && p.kinds[0].namespaced {
		h = append([]string{"NAMESPACE"}, h...)
	}
	return h
}

func (g *getter) row(p *kindPrinter, u *unstructured.Unstructured, wide bool) []cell {
	r := p.row(u, wide)
	if len(p.kinds) > 1 {
		r = append([]cell{plain(u.GetKind())}, r...)
	}
	if g.ns == "" && p.kinds[0].namespaced {
		r = append([]cell{plain(u.GetNamespace())}, r...)
	}
	return r
}

// list prints every object of the kinds (one LIST per kind), then follows
// changes with --watch.
func (g *getter) list(ctx context.Context, ks []kindInfo, p *kindPrinter) error {
	opts := metav1.ListOptions{LabelSelector: g.o.selector, FieldSelector: g.o.fieldSelector}
	var objs []*unstructured.Unstructured
	rv := ""
	for _, k := range ks {
		l, err := g.res(k).List(ctx, opts)
		if err != nil {
			if len(ks) > 1 && (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) {
				continue // a template kind this user may not list, or not served
			}
			return err
		}
		rv = l.GetResourceVersion()
		for i := range l.Items {
			if g.matches(p, &l.Items[i]) {
				objs = append(objs, &l.Items[i])
			}
		}
	}
	sortObjects(objs)
	t, err := g.printList(ctx, ks, p, objs)
	if err != nil || !g.o.watch {
		return err
	}
	w := g.a.env.Stdout
	wide := g.out.format == outWide
	if t == nil && !g.out.structured() && g.out.format != outName {
		t = newTable(g.header(p, wide)...)
	}
	g.runnables = nil // a watch reads the Runnables of the owner that changed
	return watchResource(ctx, g.res(ks[0]), rv, opts, func(ev watch.Event, u *unstructured.Unstructured) error {
		if !g.matches(p, u) {
			return nil
		}
		if ev.Type == watch.Deleted && !g.out.structured() && g.out.format != outName {
			row := g.row(p, u, wide)
			return t.writeRow(w, g.color, append(row[:len(row)-1:len(row)-1], cell{text: "(deleted)", color: cRed})...)
		}
		return g.printOne(ctx, p, u, &t, false)
	})
}

// printList prints objects, already filtered and sorted, and returns the
// table it printed (nil in other formats).
func (g *getter) printList(ctx context.Context, ks []kindInfo, p *kindPrinter, objs []*unstructured.Unstructured) (*table, error) {
	w := g.a.env.Stdout
	wide := g.out.format == outWide
	var t *table
	switch {
	case g.out.structured():
		if p.prepare != nil {
			p.prepare(ctx, objs)
		}
		docs := make([]any, 0, len(objs))
		for _, u := range objs {
			docs = append(docs, p.doc(ctx, u))
		}
		return nil, g.out.printDoc(w, p.listDoc(docs), docs)
	case g.out.format == outName:
		for _, u := range objs {
			fmt.Fprintln(w, resourceName(u))
		}
		return nil, nil
	}
	if len(objs) == 0 && !g.o.watch {
		fmt.Fprintf(g.a.env.Stderr, "No %s found%s.\n", g.noun(ks), g.where(ks[0]))
		return nil, nil
	}
	t = newTable(g.header(p, wide)...)
	for _, u := range objs {
		t.add(g.row(p, u, wide)...)
	}
	if g.o.noHeaders {
		for _, r := range t.rows {
			if err := t.writeRow(w, g.color, r...); err != nil {
				return nil, err
			}
		}
		return t, nil
	}
	return t, t.write(w, g.color)
}

// sortObjects orders a list by namespace, kind and name.
func sortObjects(objs []*unstructured.Unstructured) {
	sort.SliceStable(objs, func(i, j int) bool {
		if objs[i].GetNamespace() != objs[j].GetNamespace() {
			return objs[i].GetNamespace() < objs[j].GetNamespace()
		}
		if objs[i].GetKind() != objs[j].GetKind() {
			return objs[i].GetKind() < objs[j].GetKind()
		}
		return objs[i].GetName() < objs[j].GetName()
	})
}

func (g *getter) noun(ks []kindInfo) string {
	if len(ks) > 1 {
		return "templates"
	}
	return ks[0].resource
}

func (g *getter) where(k kindInfo) string {
	switch {
	case !k.namespaced:
		return ""
	case g.ns == "":
		return " in any namespace"
	}
	return " in namespace " + g.ns
}

// matches applies --status-selector.
func (g *getter) matches(p *kindPrinter, u *unstructured.Unstructured) bool {
	if len(g.status) == 0 || p.conditions == nil {
		return true
	}
	return matchStatus(g.status, p.conditions(u))
}

// resourceName is kubectl's -o name: kind.group/name.
func resourceName(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	k := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		k += "." + gvk.Group
	}
	return k + "/" + u.GetName()
}

func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetName()
}

// statusReq is one --status-selector requirement.
type statusReq struct{ condition, status string }

func parseStatusSelector(in []string) ([]statusReq, error) {
	var out []statusReq
	for _, s := range in {
		c, v, ok := strings.Cut(s, "=")
		v = strings.ToLower(strings.TrimSpace(v))
		if !ok || strings.TrimSpace(c) == "" || (v != "true" && v != "false" && v != "unknown") {
			return nil, usagef("--status-selector %q: want CONDITION=STATUS, STATUS true, false or unknown (e.g. ready=false)", s)
		}
		out = append(out, statusReq{condition: strings.TrimSpace(c), status: v})
	}
	return out, nil
}

// matchStatus: every requirement holds; a missing condition is Unknown.
func matchStatus(reqs []statusReq, conds []view.Condition) bool {
	for _, r := range reqs {
		got := "unknown"
		for _, c := range conds {
			if strings.EqualFold(c.Type, r.condition) {
				got = strings.ToLower(c.Status)
			}
		}
		if got != r.status {
			return false
		}
	}
	return true
}

// ---- Workloads and Deliverables

func (g *getter) ownerPrinter(ks []kindInfo) *kindPrinter {
	return &kindPrinter{
		kinds: ks,
		header: func(wide bool) []string {
			if wide {
				return []string{"NAME", "CHAIN", "READY", "REASON", "STEPS", "AGE", "SINCE", "MESSAGE"}
			}
			return []string{"NAME", "CHAIN", "READY", "REASON", "STEPS", "AGE", "MESSAGE"}
		},
		row: func(u *unstructured.Unstructured, wide bool) []cell {
			return ownerRow(view.Build(u, nil), u, g.now, wide)
		},
		doc:     func(ctx context.Context, u *unstructured.Unstructured) any { return g.ownerView(ctx, u) },
		listDoc: func(docs []any) any { return ownerList(docs) },
		tree: func(w io.Writer, ctx context.Context, u *unstructured.Unstructured) error {
			printTree(w, g.ownerView(ctx, u), g.color)
			return nil
		},
		conditions: func(u *unstructured.Unstructured) []view.Condition {
			v := view.Build(u, nil)
			return v.Conditions
		},
		prepare: g.listRunnables,
	}
}

func ownerList(docs []any) view.List {
	items := make([]view.Owner, 0, len(docs))
	for _, d := range docs {
		items = append(items, d.(view.Owner))
	}
	return view.NewList(items)
}

// ownerRow is one line of the owners' table.
func ownerRow(v view.Owner, u *unstructured.Unstructured, now time.Time, wide bool) []cell {
	chain := "-"
	if v.Chain != nil {
		chain = v.Chain.Name
	}
	msg := oneLine(v.Ready.Message, 80)
	if wide {
		msg = oneLine(v.Ready.Message, 0)
	}
	row := []cell{plain(v.Name), plain(chain), {v.Ready.Status, statusColor(v.Ready.Status)}, plain(dash(v.Ready.Reason)),
		plain(v.StepsReady()), plain(age(now, u.GetCreationTimestamp().Time))}
	if wide {
		since := "-"
		if t := parseTime(v.Ready.LastTransitionTime); !t.IsZero() {
			since = age(now, t)
		}
		row = append(row, plain(since))
	}
	return append(row, plain(msg))
}

// ownerView reads the Runnables the owner's steps stamped (from the list's
// one LIST, else one GET each) and makes the view.
func (g *getter) ownerView(ctx context.Context, u *unstructured.Unstructured) view.Owner {
	v := view.Build(u, nil)
	if g.runnables != nil {
		return view.Build(u, g.runnables)
	}
	var runnables map[string]*unstructured.Unstructured
	for _, s := range v.Steps {
		if s.Stamped == nil || s.Stamped.Kind != api.KindRunnable {
			continue
		}
		r, err := g.dyn.Resource(kindRunnable.gvr()).Namespace(s.Stamped.Namespace).Get(ctx, s.Stamped.Name, metav1.GetOptions{})
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

// listRunnables reads, with one LIST of the namespace (or of all of them),
// the Runnables a list of owners stamped, when any did: never one GET per
// owner.
func (g *getter) listRunnables(ctx context.Context, owners []*unstructured.Unstructured) {
	if g.runnables != nil {
		return // read already
	}
	g.runnables = map[string]*unstructured.Unstructured{}
	need := false
	for _, u := range owners {
		for _, s := range view.Build(u, nil).Steps {
			need = need || (s.Stamped != nil && s.Stamped.Kind == api.KindRunnable)
		}
	}
	if !need {
		return
	}
	l, err := g.res(kindRunnable).List(ctx, metav1.ListOptions{})
	if err != nil {
		return // shown without their runs
	}
	for i := range l.Items {
		r := &l.Items[i]
		g.runnables[view.RunnableKey(r.GetNamespace(), r.GetName())] = r
	}
}

// ---- ClusterSupplyChains and ClusterDeliveries

func (g *getter) chainPrinter(ks []kindInfo) *kindPrinter {
	build := func(ctx context.Context, u *unstructured.Unstructured) (view.Chain, bool) {
		c := view.BuildChain(u)
		owners, ok := g.ownersOf(ctx, kindOfChain(u))
		if ok {
			cs := []view.Chain{c}
			view.Count(cs, owners)
			c = cs[0]
		}
		return c, ok
	}
	return &kindPrinter{
		kinds: ks,
		header: func(wide bool) []string {
			h := []string{"NAME", "READY", "REASON", "STEPS", "OWNERS", "AGE"}
			if wide {
				h = append(h, "SELECTOR")
			}
			return h
		},
		row: func(u *unstructured.Unstructured, wide bool) []cell {
			c, counted := build(g.ctx, u)
			owners := "-"
			if counted {
				owners = fmt.Sprintf("%d/%d", c.OwnersReady, c.Owners)
			}
			row := []cell{plain(c.Name), {c.Ready.Status, statusColor(c.Ready.Status)}, plain(dash(c.Ready.Reason)),
				plain(fmt.Sprint(len(c.Steps))), plain(owners), plain(age(g.now, u.GetCreationTimestamp().Time))}
			if wide {
				row = append(row, plain(dash(c.Selector)))
			}
			return row
		},
		doc: func(ctx context.Context, u *unstructured.Unstructured) any { c, _ := build(ctx, u); return c },
		listDoc: func(docs []any) any {
			items := make([]view.Chain, 0, len(docs))
			for _, d := range docs {
				items = append(items, d.(view.Chain))
			}
			return view.NewChainList(items)
		},
		tree: func(w io.Writer, ctx context.Context, u *unstructured.Unstructured) error {
			c, counted := build(ctx, u)
			printChainTree(w, c, counted, g.color)
			return nil
		},
		conditions: func(u *unstructured.Unstructured) []view.Condition { return view.BuildChain(u).Conditions },
	}
}

// ownersOf reads, once, the owners of every namespace that walk chains of
// kind k (one LIST), to count them per chain; false when they may not be
// listed.
func (g *getter) ownersOf(ctx context.Context, chain kindInfo) ([]view.Owner, bool) {
	k := ownerKindOf(chain)
	if owners, ok := g.owners[k.kind]; ok {
		return owners, owners != nil
	}
	if g.owners == nil {
		g.owners = map[string][]view.Owner{}
	}
	l, err := g.dyn.Resource(k.gvr()).List(ctx, metav1.ListOptions{})
	if err != nil {
		g.owners[k.kind] = nil
		return nil, false
	}
	owners := make([]view.Owner, 0, len(l.Items))
	for i := range l.Items {
		owners = append(owners, view.Build(&l.Items[i], nil))
	}
	g.owners[k.kind] = owners
	return owners, true
}

// ---- templates

func (g *getter) templatePrinter(ks []kindInfo) *kindPrinter {
	return &kindPrinter{
		kinds: ks,
		header: func(bool) []string {
			return []string{"NAME", "ENGINE", "LIFECYCLE", "AGE"}
		},
		row: func(u *unstructured.Unstructured, _ bool) []cell {
			engine, lifecycle := templateEngine(u), "-"
			if u.GetKind() != api.KindClusterRunTemplate {
				l, _, _ := unstructured.NestedString(u.Object, "spec", "lifecycle")
				r, _, _ := unstructured.NestedBool(u.Object, "spec", "runnable")
				lifecycle = step.ShowLifecycle(&api.TemplateSpec{Lifecycle: l, Runnable: r})
			}
			return []cell{plain(u.GetName()), plain(engine), plain(lifecycle), plain(age(g.now, u.GetCreationTimestamp().Time))}
		},
		doc:     func(_ context.Context, u *unstructured.Unstructured) any { return asRead(u) },
		listDoc: objectList,
	}
}

// templateEngine names the render engine a template uses.
func templateEngine(u *unstructured.Unstructured) string {
	spec, _ := u.Object["spec"].(map[string]any)
	var set []string
	for _, f := range render.EngineFields() {
		if _, ok := spec[f]; ok {
			set = append(set, f)
		}
	}
	if len(set) == 0 {
		return "-"
	}
	return strings.Join(set, ",")
}

// asRead is an object as read, without managedFields (as kubectl shows it).
func asRead(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	return c.Object
}

func objectList(docs []any) any {
	if docs == nil {
		docs = []any{}
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": docs}
}

// ---- Runnables

func (g *getter) runnablePrinter(ks []kindInfo) *kindPrinter {
	return &kindPrinter{
		kinds: ks,
		header: func(wide bool) []string {
			h := []string{"NAME", "READY", "REASON", "LATEST RUN", "AGE"}
			if wide {
				h = append(h, "RUN TEMPLATE", "LAST SUCCESS")
			}
			return h
		},
		row: func(u *unstructured.Unstructured, wide bool) []cell {
			r := view.RunnableOf(u)
			latest := "-"
			if r.LatestRun != nil {
				latest = r.LatestRun.Kind + " " + r.LatestRun.Name
				if r.LatestRunSucceeded != "" {
					latest += " (Succeeded: " + r.LatestRunSucceeded + ")"
				}
			}
			row := []cell{plain(u.GetName()), {r.Ready.Status, statusColor(r.Ready.Status)}, plain(dash(r.Ready.Reason)), plain(latest),
				plain(age(g.now, u.GetCreationTimestamp().Time))}
			if wide {
				tmpl, _, _ := unstructured.NestedString(u.Object, "spec", "runTemplateRef", "name")
				success := "-"
				if r.LatestSuccessfulRun != nil {
					success = r.LatestSuccessfulRun.Name
				}
				row = append(row, plain(dash(tmpl)), plain(success))
			}
			return row
		},
		doc:     func(_ context.Context, u *unstructured.Unstructured) any { return asRead(u) },
		listDoc: objectList,
		conditions: func(u *unstructured.Unstructured) []view.Condition {
			var status struct {
				Conditions []metav1.Condition `json:"conditions"`
			}
			_ = api.Decode(u.Object["status"], &status)
			out := make([]view.Condition, 0, len(status.Conditions))
			for _, c := range status.Conditions {
				out = append(out, view.Condition{Type: c.Type, Status: string(c.Status)})
			}
			return out
		},
	}
}

// ---- watching

var errStop = fmt.Errorf("stop watching")

// watchResource follows changes from rv until ctx ends, starting again from
// the last version seen when the server closes the watch, and from now when
// that version is too old.
func watchResource(ctx context.Context, r dynamic.ResourceInterface, rv string, opts metav1.ListOptions, f func(watch.Event, *unstructured.Unstructured) error) error {
	for ctx.Err() == nil {
		opts.ResourceVersion = rv
		opts.AllowWatchBookmarks = true
		w, err := r.Watch(ctx, opts)
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
