package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/cli/objdiff"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/render"
)

type diffOptions struct {
	files  []string
	all    bool
	format string
	owners int
	helm   render.HelmOptions
}

func diffCommand(a *app) *cobra.Command {
	o := &diffOptions{}
	c := &cobra.Command{
		Use:   "diff -f FILE|FOLDER",
		Short: "preview what a new template or chain would change in every owner it reaches",
		Long: `Preview a change of templates or chains before applying it: for every
Workload or Deliverable the files' definitions reach (its chain is in the
files, or one of its steps uses a template in the files, or a step after
one of those), render its steps with the new definitions, with the
controller's own code, and compare what they would stamp with the live
stamped objects, as kubectl diff does. Owners whose objects change the same
way (their own name, namespace and UID set aside) are shown as one group
with one diff; owners whose steps cannot be rendered are listed with why.

Reads the cluster with your identity (owners, chains, templates, stamped
objects); writes nothing. Only the fields Kontinue applies are compared.
Downstream steps are rendered with the outputs the new objects would give
where the objects hold them (a ConfigMap's data), else the outputs of the
live objects. A step of a runnable: true template is previewed as the
ClusterRunTemplate and Runnable the controller generates for it; the runs
the Runnable makes from them are not (the output says so).

The exit status is 1 when a reached owner cannot be previewed.`,
		Example: `  # What a new version of a template would change, in this namespace.
  kontinue diff -f app-config-template.yaml

  # A folder of chains and templates, every namespace, as JSON for tools.
  kontinue diff -f platform/ -A -o json`,
		Args: NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return a.runDiff(c.Context(), o) },
	}
	fs := c.Flags()
	fs.StringArrayVarP(&o.files, "filename", "f", nil, "file or folder (recursive: *.yaml, *.yml, *.json) holding the new chains and templates; - is stdin; repeatable")
	fs.BoolVarP(&o.all, "all-namespaces", "A", false, "owners of every namespace (default: the namespace of -n or the context)")
	fs.StringVarP(&o.format, "output", "o", "diff", "diff (groups, each with one unified diff) or json (every owner's changes)")
	fs.IntVar(&o.owners, "owners", 10, "owners named per group (0: all)")
	fs.BoolVar(&o.helm.AllowPrivateNetworks, "helm-allow-private-networks", false, "let helm templates fetch charts from loopback, private and link-local addresses (as the controller's flag)")
	fs.BoolVar(&o.helm.AllowHTTP, "helm-allow-http", false, "let helm templates fetch charts over plain http (as the controller's flag)")
	return c
}

// DiffResult is what `kontinue diff -o json` prints.
type DiffResult struct {
	// Definitions are the chains and templates of the files.
	Definitions []ObjectName `json:"definitions"`
	// Reached counts the owners the definitions reach.
	Reached int `json:"reached"`
	// Groups of owners whose objects change the same way, the largest first.
	Groups []objdiff.Group `json:"groups"`
	// Failures are the owners with steps that cannot be previewed.
	Failures []objdiff.Owner `json:"failures,omitempty"`
	// Owners are every reached owner's changes.
	Owners []objdiff.Owner `json:"owners"`
}

func (a *app) runDiff(ctx context.Context, o *diffOptions) error {
	if len(o.files) == 0 {
		return usagef("give the new chains or templates with -f FILE|FOLDER")
	}
	if o.format != "diff" && o.format != "json" {
		return usagef("-o must be diff or json")
	}
	objs, err := LoadObjects(o.files, a.env.Stdin)
	if err != nil {
		return err
	}
	files := defs{}
	var names []ObjectName
	for _, u := range objs {
		if definitionKind(u) {
			files.put(u)
			names = append(names, ObjectName{Kind: u.GetKind(), Name: u.GetName()})
		}
	}
	if len(names) == 0 {
		return usagef("the files hold no ClusterSupplyChain, ClusterDelivery or template (other kinds are not previewed)")
	}
	dyn, loaded, err := a.dynamicClient("kontinue-diff")
	if err != nil {
		return err
	}
	live := defs{}
	for _, k := range append([]kindInfo{kindSupplyChain, kindDelivery}, templateKinds...) {
		if k.kind == "ClusterRunTemplate" {
			continue // Runnables', not steps'
		}
		l, err := dyn.Resource(k.gvr()).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("cannot list %s: %w", k.resource, err)
		}
		for i := range l.Items {
			live.put(&l.Items[i])
		}
	}
	pv := &previewer{live: live, next: live.overlay(files), files: files,
		engines: map[string]render.Engine{render.FieldHelm: render.HelmWith(o.helm)}, getter: clusterGetter{dyn},
		stamped: &stampedReader{dyn: dyn, lists: map[string]map[string]*unstructured.Unstructured{}, errs: map[string]error{}}}
	ns := loaded.Namespace
	if o.all {
		ns = ""
	}
	res := DiffResult{Definitions: names, Groups: []objdiff.Group{}, Owners: []objdiff.Owner{}}
	for _, f := range []*api.Flavor{api.WorkloadFlavor, api.DeliverableFlavor} {
		l, err := dyn.Resource(f.OwnerGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("cannot list %s: %w", f.OwnerGVR.Resource, err)
		}
		sort.Slice(l.Items, func(i, j int) bool {
			if l.Items[i].GetNamespace() != l.Items[j].GetNamespace() {
				return l.Items[i].GetNamespace() < l.Items[j].GetNamespace()
			}
			return l.Items[i].GetName() < l.Items[j].GetName()
		})
		for i := range l.Items {
			if l.Items[i].GetDeletionTimestamp() != nil {
				continue
			}
			od, reached := pv.preview(ctx, f, &l.Items[i])
			if !reached {
				continue
			}
			res.Owners = append(res.Owners, od)
			if len(od.Failures) > 0 {
				res.Failures = append(res.Failures, od)
			}
		}
	}
	res.Reached = len(res.Owners)
	res.Groups = objdiff.GroupOwners(res.Owners)
	if o.format == "json" {
		if err := writeJSON(a.env.Stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Fprint(a.env.Stdout, diffText(res, o.owners))
	}
	if len(res.Failures) > 0 {
		return fmt.Errorf("%d owner(s) cannot be previewed (see above)", len(res.Failures))
	}
	return nil
}

// definitionKind: what diff previews.
func definitionKind(u *unstructured.Unstructured) bool {
	if u.GroupVersionKind().Group != api.Group {
		return false
	}
	switch u.GetKind() {
	case kindSupplyChain.kind, kindDelivery.kind:
		return true
	case "ClusterRunTemplate":
		return false // used by Runnables, not by chains' steps
	}
	for _, k := range templateKinds {
		if u.GetKind() == k.kind {
			return true
		}
	}
	return false
}

// diffText is the human output: a line per group, the owners it holds,
// the first owner's diff; then the owners that cannot be previewed.
func diffText(res DiffResult, named int) string {
	var b strings.Builder
	var defs []string
	for _, d := range res.Definitions {
		defs = append(defs, d.Kind+" "+d.Name)
	}
	verb := "reaches"
	if len(defs) > 1 {
		verb = "reach"
	}
	fmt.Fprintf(&b, "# %s %s %s\n", strings.Join(defs, ", "), verb, countOwners(res.Owners, len(res.Owners)))
	for _, g := range res.Groups {
		fmt.Fprintf(&b, "\n# %s: %s\n", countRefs(g.Owners), g.Summary)
		var list []string
		for i, r := range g.Owners {
			if named > 0 && i == named {
				list = append(list, fmt.Sprintf("... and %d more", len(g.Owners)-named))
				break
			}
			list = append(list, r.String())
		}
		fmt.Fprintf(&b, "#   %s\n", strings.Join(list, ", "))
		for _, obj := range g.Objects {
			b.WriteString(obj.Diff)
			if obj.Note != "" {
				fmt.Fprintf(&b, "# step [%s]: %s\n", obj.Step, obj.Note)
			}
		}
	}
	if len(res.Failures) > 0 {
		fmt.Fprintf(&b, "\n# %s cannot be previewed:\n", countOwners(res.Failures, len(res.Failures)))
		for _, f := range res.Failures {
			for _, s := range f.Failures {
				where := ""
				if s.Step != "" {
					where = " step [" + s.Step + "]"
				}
				fmt.Fprintf(&b, "#   %s %s%s: %s: %s\n", f.Kind, f.Ref.String(), where, s.Reason, oneLine(s.Message, 0))
			}
		}
	}
	return b.String()
}

func countOwners(os []objdiff.Owner, n int) string {
	var refs []objdiff.Ref
	for _, o := range os {
		refs = append(refs, o.Ref)
	}
	if n == 0 {
		return "no owner"
	}
	return countRefs(refs)
}

// countRefs says "48 Workloads", "1 Deliverable", "3 owners" (mixed).
func countRefs(refs []objdiff.Ref) string {
	kinds := map[string]bool{}
	for _, r := range refs {
		kinds[r.Kind] = true
	}
	word := "owner"
	if len(kinds) == 1 {
		word = refs[0].Kind
	}
	if len(refs) != 1 {
		word += "s"
	}
	return fmt.Sprintf("%d %s", len(refs), word)
}
