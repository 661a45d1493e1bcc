package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/dashboard"
	"kontinue.dev/kontinue/version"
)

// DefaultDashboardAddress is where `kontinue dashboard` listens: loopback
// only, since it reads with the caller's own credentials.
const DefaultDashboardAddress = "127.0.0.1:8082"

func dashboardCommand() *command {
	addr := DefaultDashboardAddress
	return &command{
		name: "dashboard", short: "serve a live picture of chains and workloads in the browser", cluster: true,
		usage: "kontinue dashboard [--address HOST:PORT] [-n NAMESPACE]",
		examples: `  # Every chain and every Workload and Deliverable you may list; open the printed URL.
  kontinue dashboard

  # Only the owners of one namespace (for a user who may not list them cluster-wide).
  kontinue dashboard -n dev

  # Another port.
  kontinue dashboard --address 127.0.0.1:9000
`,
		flags: func(fs *pflag.FlagSet, _ *env) {
			fs.StringVar(&addr, "address", DefaultDashboardAddress, "address to listen on (keep it on loopback: the page reads with your credentials)")
		},
		run: func(e *env, args []string) error { return runDashboard(e, addr, args) },
	}
}

// runDashboard serves the dashboard with the kubeconfig's user until the
// command is stopped. Without -n it shows every namespace.
func runDashboard(e *env, addr string, args []string) error {
	if len(args) > 0 {
		return usagef("dashboard takes no arguments")
	}
	loaded, err := e.cfg.Load()
	if err != nil {
		return err
	}
	cfg := loaded.Config
	cfg.UserAgent = "kontinue-dashboard/" + version.Version
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	identity := "the kubeconfig's user"
	if e.cfg.Context != "" {
		identity += " of context " + e.cfg.Context
	}
	srv := dashboard.New(dyn, dashboard.Options{
		Namespace: e.cfg.Namespace, // only an explicit -n: the context's namespace is no reason to hide others
		Identity:  identity,
		LocalOnly: true,
		Reconcile: func(ctx context.Context, kind, ns, name string) (string, error) {
			k, err := parseKind(kind)
			if err != nil {
				return "", err
			}
			return requestReconcile(ctx, dyn, k, ns, name)
		},
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
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
	fmt.Fprintf(e.stdout, "Kontinue dashboard at http://%s/ (Ctrl-C stops)\n", l.Addr())
	if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
