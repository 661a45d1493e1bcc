package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/history"
)

type doraOptions struct {
	output string
	all    bool
	since  time.Duration
	chain  string
}

func doraCommand(a *app) *cobra.Command {
	o := &doraOptions{}
	c := &cobra.Command{
		Use:   "dora [KIND [NAME]]",
		Short: "the four DORA metrics of the Workloads and Deliverables the cluster records, per chain and namespace",
		Long: `Print the four DORA metrics (docs/dora.md) of some Workloads and Deliverables,
per chain and namespace: deployment frequency (successful deployments per day),
lead time for changes (from a revision first seen to its successful
deployment), change failure rate (deployments that failed, a shadow serving or
not) and time to restore (from a failed deployment to the next good one).

A deployment is a revision's outcome at the chain's deployment steps (its
deploymentSteps, else its ClusterDeploymentTemplate steps and its last step).
They are read from each owner's status and its history ConfigMap
(--history-revisions of the controller bounds how far back), with your
identity: the numbers are those of the revisions the cluster still records.`,
		Example: `  # The last 30 days of every workload of a namespace.
  kontinue dora -n dev

  # One workload, over a week.
  kontinue dora workload app -n dev --since 168h

  # Every namespace, one chain, as JSON.
  kontinue dora -A --chain web -o json`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error { return a.runDora(c.Context(), o, args) },
	}
	fs := c.Flags()
	fs.StringVarP(&o.output, "output", "o", "", "text (the default) or json")
	fs.BoolVarP(&o.all, "all-namespaces", "A", false, "the owners of every namespace")
	fs.DurationVar(&o.since, "since", 30*24*time.Hour, "the window: deployments that ended this long ago or since")
	fs.StringVar(&o.chain, "chain", "", "only the owners of this ClusterSupplyChain or ClusterDelivery")
	return c
}

// DoraOutput is what `kontinue dora -o json` prints (view.DORA).
type DoraOutput = view.DoraOutput

// DoraRow is one chain's numbers in one namespace.
type DoraRow = view.DoraRow

func (a *app) runDora(ctx context.Context, o *doraOptions, args []string) error {
	switch o.output {
	case "", "text", "json":
	default:
		return usagef("-o must be text or json")
	}
	if o.since <= 0 {
		return usagef("--since must be positive")
	}
	kinds := []ownerKind{kindWorkload, kindDeliverable}
	if len(args) > 0 {
		k, err := parseOwnerKind(args[0])
		if err != nil {
			return err
		}
		kinds = []ownerKind{k}
	}
	dyn, loaded, err := a.dynamicClient("kontinue-cli")
	if err != nil {
		return err
	}
	ns := loaded.Namespace
	if o.all {
		if len(args) == 2 {
			return usagef("a name and --all-namespaces: name one owner in one namespace")
		}
		ns = metav1.NamespaceAll
	}
	var owners []*unstructured.Unstructured
	for _, k := range kinds {
		if len(args) == 2 {
			u, err := getOwner(ctx, dyn, k, ns, args[1])
			if err != nil {
				return err
			}
			owners = append(owners, u)
			continue
		}
		l, err := dyn.Resource(k.gvr()).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing %s: %w", k.resource, err)
		}
		for i := range l.Items {
			owners = append(owners, &l.Items[i])
		}
	}
	now := time.Now()
	out := view.DORA(owners, o.chain, now.Add(-o.since), now, view.DoraReads{
		History: func(kind, namespace, name string) (history.History, error) {
			return history.Get(ctx, dyn, kind, namespace, name)
		},
		DeploymentSteps: func(chainKind, name string) []string {
			k := kindSupplyChain
			if chainKind == kindDelivery.kind {
				k = kindDelivery
			}
			return deploymentSteps(ctx, dyn, k, name)
		},
	})
	if o.output == "json" {
		return writeJSON(a.env.Stdout, out)
	}
	return printDora(a.env.Stdout, out)
}

// deploymentSteps is a chain's spec.deploymentSteps (nil when unreadable:
// the default steps then).
func deploymentSteps(ctx context.Context, dyn dynamic.Interface, k kindInfo, name string) []string {
	u, err := dyn.Resource(k.gvr()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	s, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "deploymentSteps")
	return s
}

func printDora(w io.Writer, out DoraOutput) error {
	fmt.Fprintf(w, "From %s to %s\n", out.From.Format(time.RFC3339), out.To.Format(time.RFC3339))
	t := newTable("NAMESPACE", "CHAIN", "OWNERS", "DEPLOYMENTS", "PER DAY", "LEAD TIME", "FAILED", "CHANGE FAILURE RATE", "TIME TO RESTORE")
	for _, r := range out.Rows {
		lead, restore := "-", "-"
		if r.LeadTimes > 0 {
			lead = seconds(r.LeadTimeMedian)
		}
		if r.Restores > 0 {
			restore = seconds(r.RestoreMedian)
		}
		chain := r.Chain
		if chain == "" {
			chain = "-"
		}
		t.add(plain(r.Namespace), plain(chain), plain(fmt.Sprint(r.Owners)), plain(fmt.Sprint(r.Deployments)),
			plain(fmt.Sprintf("%.2f", r.PerDay)), plain(lead), plain(fmt.Sprint(r.Failed)),
			plain(fmt.Sprintf("%.0f%%", 100*r.ChangeFailureRate)), plain(restore))
	}
	if err := t.write(w, false); err != nil {
		return err
	}
	fmt.Fprintln(w, "LEAD TIME and TIME TO RESTORE are medians; FAILED counts deployments that failed (a shadow serving or not).")
	if len(out.Notes) > 0 {
		fmt.Fprintln(w, "Notes:")
		for _, n := range out.Notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	return nil
}

func seconds(s float64) string {
	return (time.Duration(s) * time.Second).String()
}
