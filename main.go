// Command kontinue runs Kontinue, a Kubernetes supply-chain choreographer
// that speaks Cartographer's carto.run/v1alpha1 API.
//
//	kontinue [flags]     run the controller (kubeconfig as kubectl finds it, else in-cluster)
//	kontinue crds        print the CustomResourceDefinitions
//	kontinue version     print the version (also --version)
//	kontinue get|render|reconcile ...   the CLI (package cli, docs/cli.md)
//
// With --leader-elect, replicas share a Lease and only its holder runs the
// controllers (leader.go, leaselock.go); logs are JSON in a cluster and text
// locally (logging.go).
package main

// Generated files: deploy/install.yaml (deploy/namespace.yaml + the chart deploy/chart), deploy/crds.yaml and
// docs/crds.md (from the CRDs' descriptions). Unit tests fail when stale.
//go:generate go run ./hack/installyaml
//go:generate go run ./hack/crddocs

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/cli"
	"kontinue.dev/kontinue/clientconfig"
	"kontinue.dev/kontinue/crds"
	"kontinue.dev/kontinue/dashboard"
	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/metrics"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/version"
)

type options struct {
	kubeconfig    string
	kubeContext   string
	metricsAddr   string
	probeAddr     string
	pprofAddr     string
	dashboardAddr string
	dashboardSA   string
	workers       int
	qps           float64
	burst         int
	resync        time.Duration
	installCRDs   bool
	kstatus       bool
	shutdownGrace time.Duration
	helm          render.HelmOptions

	leaderElect bool
	election    electionOptions

	logFormat string
	logLevel  string
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "crds":
			os.Stdout.Write(crds.YAML())
			return
		case "version", "--version", "-version":
			fmt.Println(version.String())
			return
		}
		if cli.IsCommand(os.Args[1]) {
			os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		}
	}
	var o options
	fs := flag.NewFlagSet("kontinue", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kontinue [flags]   run the controller\n       kontinue crds|version|get|render|reconcile|dashboard|help   (kontinue help)\n\nFlags of the controller:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; default: $KUBECONFIG (several files, as kubectl), else ~/.kube/config, else the in-cluster configuration")
	fs.StringVar(&o.kubeContext, "context", "", "kubeconfig context to use; default: the current context")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the /metrics endpoint; \"0\" disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; \"0\" disables them")
	fs.StringVar(&o.dashboardAddr, "dashboard-bind-address", "0", "address of the read-only dashboard (docs/dashboard.md); \"0\" disables it; needs --dashboard-service-account")
	fs.StringVar(&o.dashboardSA, "dashboard-service-account", "", "namespace/name of the ServiceAccount whose rights the dashboard reads with (never the controller's own)")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof endpoints (profiling); \"0\" disables them")
	fs.IntVar(&o.workers, "workers", 16, "reconcile workers per controller: a reconcile mostly waits for the API server, so more workers than cores keep it busy")
	fs.Float64Var(&o.qps, "kube-api-qps", -1, "client-side limit of queries per second to the API server; negative: none, the API server's Priority and Fairness bounds Kontinue (events keep their own limit)")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "client-side burst of queries to the API server, with a positive --kube-api-qps")
	fs.DurationVar(&o.resync, "resync-period", 10*time.Hour, "informer resync period")
	fs.BoolVar(&o.installCRDs, "install-crds", false, "apply Kontinue's CRDs at start")
	fs.BoolVar(&o.kstatus, "kstatus-conditions", false, "add kstatus's Reconciling and Stalled conditions to Workloads and Deliverables, so that Flux, Argo CD and other kstatus users see failures (the Helm chart turns it on)")
	fs.BoolVar(&o.helm.AllowPrivateNetworks, "helm-allow-private-networks", false, "let helm templates fetch charts from loopback, private and link-local addresses (refused by default: a template author could otherwise make Kontinue reach in-cluster services or a cloud metadata endpoint)")
	fs.BoolVar(&o.helm.AllowHTTP, "helm-allow-http", false, "let helm templates fetch charts over plain http (by default https and oci only)")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace-period", 30*time.Second, "time in-flight reconciles get to finish on SIGTERM")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "run the controllers only while holding a Lease, so that replicas can wait as standbys (the Deployment sets it)")
	fs.StringVar(&o.election.namespace, "leader-election-namespace", "", "namespace of the Lease; default: the pod's namespace")
	fs.StringVar(&o.election.id, "leader-election-id", "kontinue-leader", "name of the Lease")
	fs.DurationVar(&o.election.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long standbys wait after the last renewal before taking the Lease")
	fs.DurationVar(&o.election.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up (and exits)")
	fs.DurationVar(&o.election.retryPeriod, "leader-elect-retry-period", 2*time.Second, "interval between attempts to acquire or renew the Lease")
	fs.StringVar(&o.logFormat, "log-format", "", "json or text; default: json in a cluster (no kubeconfig), text otherwise")
	fs.StringVar(&o.logLevel, "log-level", "", "error, info, debug, trace, or a klog verbosity number (sets -v)")
	// Of klog's flags only -v applies: its output flags (files, headers) do
	// not, since logs go through setupLogging's handler.
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	v := klogFlags.Lookup("v")
	fs.Var(v.Value, "v", "klog verbosity of the logs (--log-level sets it too)")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kontinue: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	loaded, err := clientconfig.Flags{Kubeconfig: o.kubeconfig, Context: o.kubeContext}.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kontinue:", err)
		os.Exit(1)
	}
	if o.logFormat == "" {
		o.logFormat = "text"
		if loaded.InCluster {
			o.logFormat = "json"
		}
	}
	if err := setupLogging(o.logFormat, o.logLevel, v.Value, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kontinue:", err)
		os.Exit(2)
	}
	klog.InfoS("starting", "version", version.Version, "inCluster", loaded.InCluster)

	if err := run(o, loaded.Config); err != nil {
		klog.ErrorS(err, "kontinue stopped")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(o options, cfg *rest.Config) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "kontinue/" + version.Version
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	setGCPercent(os.Getenv)

	if o.installCRDs {
		if err := installCRDs(ctx, cfg); err != nil {
			return err
		}
	}
	m, err := reconciler.NewManager(cfg, reconciler.Options{Workers: o.workers, Resync: o.resync, ShutdownGrace: o.shutdownGrace, KstatusConditions: o.kstatus, Helm: o.helm})
	if err != nil {
		return err
	}
	m.OnApply = metrics.Applied
	m.OnEventDropped = metrics.EventDropped
	m.OnStatusConflict = metrics.StatusConflict
	for _, c := range m.Controllers() {
		c.Observer = metrics.Observer{}
		metrics.SetWorkers(c.Name, o.workers)
	}
	lead := &leadership{}
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
	if err := crds.Install(ctx, dyn, reconciler.FieldManager, all, time.Minute); err != nil {
		return err
	}
	klog.InfoS("CRDs installed", "count", len(all))
	return nil
}
