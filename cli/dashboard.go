package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"kontinue.dev/kontinue/dashboard"
	"kontinue.dev/kontinue/reconciler/api"
)

// DefaultDashboardAddress is where `kontinue dashboard` listens: loopback
// only, since it reads with the caller's own credentials.
const DefaultDashboardAddress = "127.0.0.1:8082"

func dashboardCommand(a *app) *cobra.Command {
	addr := DefaultDashboardAddress
	c := &cobra.Command{
		Use:   "dashboard",
		Short: "serve a live picture of chains and workloads in the browser",
		Long: `Serve a page that draws every chain as a graph and every Workload and
Deliverable on its chain, updated live, reading with your kubeconfig's user
(docs/dashboard.md).

Without -n it shows every namespace you may list, not the context's
namespace; -n shows the owners (and Runnables) of one namespace only.`,
		Example: `  # Every chain and every Workload and Deliverable you may list; open the printed URL.
  kontinue dashboard

  # Only the owners of one namespace (for a user who may not list them cluster-wide).
  kontinue dashboard -n dev

  # Another port.
  kontinue dashboard --address 127.0.0.1:9000`,
		Args: NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return a.runDashboard(c.Context(), addr) },
	}
	c.Flags().StringVar(&addr, "address", DefaultDashboardAddress, "address to listen on (keep it on loopback: the page reads with your credentials)")
	return c
}

// runDashboard serves the dashboard with the kubeconfig's user until the
// command is stopped. Without -n it shows every namespace.
func (a *app) runDashboard(ctx context.Context, addr string) error {
	dyn, _, err := a.dynamicClient("kontinue-dashboard")
	if err != nil {
		return err
	}
	identity := "the kubeconfig's user"
	if a.cluster.Context() != "" {
		identity += " of context " + a.cluster.Context()
	}
	srv := dashboard.New(dyn, dashboard.Options{
		Namespace: a.cluster.Namespace(), // only an explicit -n: the context's namespace is no reason to hide others
		Identity:  identity,
		LocalOnly: true,
		Reconcile: func(ctx context.Context, kind, ns, name string) (string, error) {
			k, err := parseOwnerKind(kind)
			if err != nil {
				return "", err
			}
			return requestReconcile(ctx, dyn, k, ns, name)
		},
		Rollout: func(ctx context.Context, verb, chainKind, name string) (string, error) {
			f := api.WorkloadFlavor
			if chainKind == api.KindClusterDelivery {
				f = api.DeliverableFlavor
			}
			return SteerRollout(ctx, dyn, f, name, verb, time.Now())
		},
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go srv.Run(ctx)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = hs.Shutdown(sctx)
		_ = hs.Close() // event streams do not end by themselves
	}()
	fmt.Fprintf(a.env.Stdout, "Kontinue dashboard at http://%s/ (Ctrl-C stops)\n", l.Addr())
	if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
