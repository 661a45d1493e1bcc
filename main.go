// Command kontinue is Kontinue, a Kubernetes supply-chain choreographer
// that speaks Cartographer's carto.run/v1alpha1 API: the controller and its
// command line in one binary.
//
//	kontinue controller [flags]   run the controller (controller.go; kubeconfig as kubectl finds it, else in-cluster)
//	kontinue get|events|reconcile|check|dashboard|render|crds|version|completion ...   the CLI (package cli, docs/cli.md)
//	kontinue                      help
//
// Invoked as kubectl-kontinue it is a kubectl plugin. With --leader-elect,
// replicas share a Lease and only its holder runs the controllers
// (leader.go: client-go's leader election and Lease lock); logs are JSON in a cluster and text locally
// (logging.go).
package main

// Generated files (`make generate`): crds/*.yaml (from the Go types of crds/kinds.go, reconciler/api and
// reconciler/status), deploy/install.yaml (deploy/namespace.yaml + the chart deploy/chart), deploy/crds.yaml and
// docs/crds.md (from the CRDs' descriptions). Unit tests fail when stale.
//go:generate go run -C hack/crdgen .
//go:generate go run ./hack/installyaml
//go:generate go run ./hack/crddocs

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	// CA roots in the binary, used only where the system has none (the
	// image is scratch: no /etc/ssl): Helm charts fetched over https, an
	// https traces endpoint, registries. Mozilla's roots as the Go team
	// ships them, kept current by bumping the module (govulncheck flags
	// an old one), rather than a CA bundle copied into the image's layer,
	// so the same binary works in the release image, the Dockerfile's and
	// any other; a system bundle, where there is one, still wins.
	_ "golang.org/x/crypto/x509roots/fallback"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/cli"
	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/dashboard"
	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/dora"
	"kontinue.dev/kontinue/reconciler/metrics"
	"kontinue.dev/kontinue/reconciler/stamp"
	"kontinue.dev/kontinue/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := newRoot(cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Program: os.Args[0]}).Execute(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// newRoot is the whole command line: the CLI and the controller.
func newRoot(env cli.Env) *cli.Root {
	root := cli.New(env)
	c := controllerCommand(root.Cluster)
	c.GroupID = "run"
	root.Command.AddCommand(c)
	return root
}

func run(ctx context.Context, o options, cfg *rest.Config) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "kontinue/" + version.Version
	setGCPercent(os.Getenv)
	if o.installCRDs {
		if err := installCRDs(ctx, cfg); err != nil {
			return err
		}
	}
	if err := api.ValidShard(o.shard); err != nil {
		return fmt.Errorf("--shard: %w", err)
	}
	// Roll-outs read which shards run from the shards' Leases, which a
	// replica keeps fresh by leader election, or itself without it
	// (reconciler/shard/served.go). Outside a cluster without
	// --leader-election-namespace there is no namespace for them: every
	// shard counts as served.
	leases := reconciler.LeaseOptions{ID: o.election.id, Keep: !o.leaderElect, Duration: o.election.leaseDuration}
	if ns, err := electionNamespace(o.election.namespace); err == nil {
		leases.Namespace = ns
	} else {
		klog.InfoS("no namespace for the shards' Leases (--leader-election-namespace): roll-outs count every shard as served")
	}
	o.election.id = leaseName(o.election.id, o.shard)
	ropts := reconciler.Options{Workers: o.workers, FIFOQueue: !o.fairQueue, Resync: o.resync, ShutdownGrace: o.shutdownGrace, KstatusConditions: o.kstatus, Helm: o.helm,
		HistoryRevisions: historyRevisions(o.history), Shard: o.shard, Leases: leases}
	ropts.Verify = reconciler.VerifyOptions{OnDecision: metrics.VerifyDecided, OnRefused: metrics.InputRefused}
	if o.signer != nil {
		ropts.Attest = o.signer
		// The kontinue rule of a verify policy checks statements with it.
		ropts.Verify.Key = o.signer.Key
		klog.InfoS("signing attestations", "keyid", o.signer.Key.ID)
	}
	if err := notifications(ctx, cfg, o.notify, &ropts); err != nil {
		return err
	}
	if stop, err := traces(ctx, o.otlpTraces, &ropts); err != nil {
		return err
	} else if stop != nil {
		defer stop()
	}
	m, err := reconciler.NewManager(cfg, ropts)
	if err != nil {
		return err
	}
	if o.shard != "" {
		klog.InfoS("serving one shard", "shard", o.shard, "selector", api.ShardSelector(o.shard))
	}
	m.OnForeign = metrics.Foreign
	m.OnApply = metrics.Applied
	m.OnFight = metrics.Fought
	m.OnEventDropped = metrics.EventDropped
	m.OnStatusConflict = metrics.StatusConflict
	m.OnInputSetEnded = metrics.InputSetEnded
	m.OnChainDelivered = metrics.ChainDelivered
	m.OnDeployment = func(chain, namespace, kind, owner string, d dora.Deployment) {
		metrics.DORADeployment(chain, namespace, kind, owner, d.Failed, d.Shadowed, d.Lead, d.Restore)
	}
	for _, c := range m.Controllers() {
		c.Observer = metrics.Observer{}
		c.OnEcho = metrics.OwnWriteWake
		metrics.SetWorkers(c.Name, o.workers)
	}
	lead := newLeadership(o.shard)
	if err := serve(ctx, o, cfg, m, lead); err != nil {
		return err
	}
	work := func(ctx context.Context) error {
		err := m.Run(ctx)
		if err != nil && ctx.Err() != nil {
			// Stopped (signal, lost lease) before the caches synced: a clean stop.
			klog.InfoS("stopped before the caches synced", "reason", err.Error())
			return nil
		}
		return err
	}
	if !o.leaderElect {
		lead.set(true)
		metrics.SetLeader(o.election.id, true)
		return work(ctx)
	}
	if o.election.namespace, err = electionNamespace(o.election.namespace); err != nil {
		return err
	}
	return runElected(ctx, cfg, o.election, lead, work)
}

// serve starts the metrics and probe endpoints.
func serve(ctx context.Context, o options, cfg *rest.Config, m *reconciler.Manager, lead *leadership) error {
	start := func(addr string, h http.Handler) error {
		if addr == "0" || addr == "" {
			return nil
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(l) }()
		go func() { <-ctx.Done(); _ = srv.Close() }()
		klog.InfoS("serving", "address", l.Addr().String())
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		metrics.SetInformers(len(m.Tracker().Active()), m.Tracker().CachedObjects())
		metrics.SetClients(m.Clients())
		promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	}))
	if err := start(o.metricsAddr, mux); err != nil {
		return err
	}
	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		// A standby is ready: it is doing its job (waiting), and a rolling
		// update must be able to replace it. The leader is ready once its
		// caches have synced.
		if !lead.get() {
			_, _ = w.Write([]byte("ok: standby"))
			return
		}
		if !m.Synced() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	if err := start(o.probeAddr, probes); err != nil {
		return err
	}
	if err := serveDashboard(ctx, o, cfg, start); err != nil {
		return err
	}
	prof := http.NewServeMux()
	prof.HandleFunc("/debug/pprof/", pprof.Index)
	prof.HandleFunc("/debug/pprof/profile", pprof.Profile)
	prof.HandleFunc("/debug/pprof/trace", pprof.Trace)
	prof.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	prof.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	return start(o.pprofAddr, prof)
}

// serveDashboard serves the dashboard read-only with the rights of the
// configured ServiceAccount (impersonated), when enabled. It runs on every
// replica, leader or not: it only reads.
func serveDashboard(ctx context.Context, o options, cfg *rest.Config, start func(string, http.Handler) error) error {
	if o.dashboardAddr == "0" || o.dashboardAddr == "" {
		return nil
	}
	if o.dashboardSA == "" {
		return fmt.Errorf("--dashboard-bind-address needs --dashboard-service-account: the dashboard never reads with the controller's own rights")
	}
	saCfg, err := dashboard.ServiceAccountConfig(cfg, o.dashboardSA)
	if err != nil {
		return fmt.Errorf("--dashboard-service-account: %w", err)
	}
	saCfg.UserAgent = "kontinue-dashboard/" + version.Version
	srv, err := dashboard.NewForConfig(saCfg, dashboard.Options{Identity: "ServiceAccount " + o.dashboardSA})
	if err != nil {
		return err
	}
	go srv.Run(ctx)
	return start(o.dashboardAddr, srv.Handler())
}

// installCRDs applies the embedded CRDs and waits until they are served.
func installCRDs(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	all, err := crds.All()
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, dyn, stamp.FieldManager, all, time.Minute); err != nil {
		return err
	}
	klog.InfoS("CRDs installed", "count", len(all))
	return nil
}
