package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/cli"
	"kontinue.dev/kontinue/clientconfig"
	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/render"
	"kontinue.dev/kontinue/reconciler/spans"
	"kontinue.dev/kontinue/version"
)

// options are the controller's flags (docs/operations.md#flags); the
// connection flags (--kubeconfig, --context, ...) are the command line's
// global ones.
type options struct {
	metricsAddr   string
	probeAddr     string
	pprofAddr     string
	dashboardAddr string
	dashboardSA   string
	workers       int
	fairQueue     bool
	qps           float64
	burst         int
	resync        time.Duration
	installCRDs   bool
	kstatus       bool
	history       int
	otlpTraces    string
	attestKey     string
	signer        *attest.Signer // from attestKey, loaded before anything else
	shutdownGrace time.Duration
	helm          render.HelmOptions
	shard         string

	leaderElect bool
	election    electionOptions

	logFormat string
	logLevel  string
}

// controllerCommand is `kontinue controller`: the only way to run the
// controller, so that exploring the CLI never starts one by accident.
func controllerCommand(cluster *clientconfig.Flags) *cobra.Command {
	var o options
	// Of klog's flags only -v applies: its output flags (files, headers) do
	// not, since logs go through setupLogging's handler.
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	v := klogFlags.Lookup("v")
	c := &cobra.Command{
		Use:   "controller",
		Short: "run the controller: reconcile Workloads, Deliverables, chains and Runnables",
		Long: `Run the controller against the cluster the global flags pick (as kubectl: the
kubeconfig, else the in-cluster configuration). The Deployment of deploy/
runs it with --leader-elect; locally, leader election is off unless asked:
never run two controllers without it against one cluster.

Flags and defaults: docs/operations.md#flags.`,
		Example: `  # Locally, against the current context, installing the CRDs first.
  kontinue controller --install-crds

  # As the Deployment does.
  kontinue controller --leader-elect --leader-election-namespace=kontinue-system --kstatus-conditions`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// A key that cannot be used stops the start before anything
			// is done, with why.
			var err error
			if o.signer, err = attestations(o.attestKey, o.history); err != nil {
				return err
			}
			loaded, err := cluster.Load()
			if err != nil {
				return err
			}
			if o.logFormat == "" {
				o.logFormat = "text"
				if loaded.InCluster {
					o.logFormat = "json"
				}
			}
			if err := setupLogging(o.logFormat, o.logLevel, v.Value, c.ErrOrStderr()); err != nil {
				return cli.UsageError(err)
			}
			klog.InfoS("starting", "version", version.Version, "inCluster", loaded.InCluster)
			if err := run(c.Context(), o, loaded.Config); err != nil {
				klog.ErrorS(err, "kontinue stopped")
				klog.Flush()
				return fmt.Errorf("stopped: %w", err)
			}
			klog.Flush()
			return nil
		},
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the /metrics endpoint; \"0\" disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; \"0\" disables them")
	fs.StringVar(&o.dashboardAddr, "dashboard-bind-address", "0", "address of the read-only dashboard (docs/dashboard.md); \"0\" disables it; needs --dashboard-service-account")
	fs.StringVar(&o.dashboardSA, "dashboard-service-account", "", "namespace/name of the ServiceAccount whose rights the dashboard reads with (never the controller's own)")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof endpoints (profiling); \"0\" disables them")
	fs.IntVar(&o.workers, "workers", 16, "reconcile workers per controller: a reconcile mostly waits for the API server, so more workers than cores keep it busy")
	fs.BoolVar(&o.fairQueue, "fair-queue", true, "serve namespaces round-robin and owners' own edits before template-wide re-renders (docs/operations.md#fairness); false: one FIFO per controller, as before")
	fs.Float64Var(&o.qps, "kube-api-qps", -1, "client-side limit of queries per second to the API server; negative: none, the API server's Priority and Fairness bounds Kontinue (events keep their own limit)")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "client-side burst of queries to the API server, with a positive --kube-api-qps")
	fs.DurationVar(&o.resync, "resync-period", 10*time.Hour, "informer resync period")
	fs.BoolVar(&o.installCRDs, "install-crds", false, "apply Kontinue's CRDs at start")
	fs.BoolVar(&o.kstatus, "kstatus-conditions", false, "add kstatus's Reconciling and Stalled conditions to Workloads and Deliverables, so that Flux, Argo CD and other kstatus users see failures (the Helm chart turns it on)")
	fs.IntVar(&o.history, "history-revisions", 10, "input revisions each Workload's and Deliverable's history keeps (a ConfigMap beside it, written as its service account; docs/status.md#history); 0: no history")
	fs.StringVar(&o.otlpTraces, "otlp-traces-endpoint", "", "send OpenTelemetry traces over OTLP/HTTP to this URL (http://collector:4318): a trace per input revision of an owner, a span per step (docs/operations.md#traces); empty: off")
	fs.StringVar(&o.attestKey, "attestation-key", "", "PEM file of an ECDSA P-256 or ed25519 private key: sign an in-toto SLSA provenance statement of each step's outputs as its input set succeeds, kept in the owner's history ConfigMap (docs/attestation.md); empty: none signed")
	fs.BoolVar(&o.helm.AllowPrivateNetworks, "helm-allow-private-networks", false, "let helm templates fetch charts from loopback, private and link-local addresses (refused by default: a template author could otherwise make Kontinue reach in-cluster services or a cloud metadata endpoint)")
	fs.BoolVar(&o.helm.AllowHTTP, "helm-allow-http", false, "let helm templates fetch charts over plain http (by default https and oci only)")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace-period", 30*time.Second, "time in-flight reconciles get to finish on SIGTERM")
	fs.StringVar(&o.shard, "shard", "", "serve only the owners labelled kontinue.dev/shard=<shard> and cache only them and what they stamped; empty: the owners without the label (docs/operations.md#sharding)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "run the controllers only while holding a Lease, so that replicas can wait as standbys (the Deployment sets it)")
	fs.StringVar(&o.election.namespace, "leader-election-namespace", "", "namespace of the shards' Leases (leader election; which shards run, read by roll-outs, and kept fresh without --leader-elect too); default: the pod's namespace")
	fs.StringVar(&o.election.id, "leader-election-id", "kontinue-leader", "name of the Lease; with --shard, <name>-shard-<shard>")
	fs.DurationVar(&o.election.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long standbys wait after the last renewal before taking the Lease")
	fs.DurationVar(&o.election.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up (and exits)")
	fs.DurationVar(&o.election.retryPeriod, "leader-elect-retry-period", 2*time.Second, "interval between attempts to acquire or renew the Lease")
	fs.StringVar(&o.logFormat, "log-format", "", "json or text; default: json in a cluster (no kubeconfig), text otherwise")
	fs.StringVar(&o.logLevel, "log-level", "", "error, info, debug, trace, or a klog verbosity number (sets -v)")
	pv := pflag.PFlagFromGoFlag(v)
	pv.Usage = "klog verbosity of the logs (--log-level sets it too)"
	fs.AddFlag(pv)
	return c
}

// historyRevisions maps --history-revisions to the Manager's option: 0
// there is the default, here it is off.
func historyRevisions(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// attestations turns on the signing of steps' statements with the key in
// path: a key that cannot be read or used stops the start, with why.
func attestations(path string, history int) (*attest.Signer, error) {
	if path == "" {
		return nil, nil
	}
	if history <= 0 {
		return nil, errors.New("--attestation-key: attestations are kept in the owners' history ConfigMaps: --history-revisions must be positive")
	}
	key, err := attest.LoadKeyFile(path, true)
	if err != nil {
		return nil, fmt.Errorf("--attestation-key: %w", err)
	}
	return attest.NewSigner(key, version.Version), nil
}

// traces turns on the OpenTelemetry spans when an endpoint is set; stop
// sends what is batched.
func traces(ctx context.Context, endpoint string, opts *reconciler.Options) (stop func(), err error) {
	if endpoint == "" {
		return nil, nil
	}
	x, err := spans.New(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("--otlp-traces-endpoint: %w", err)
	}
	opts.Spans = x.StatusWritten
	return func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = x.Shutdown(c)
	}, nil
}
