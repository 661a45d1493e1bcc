package metrics

import (
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/util/workqueue"
)

// The metrics below carry the names controller-runtime and client-go give
// them in most Kubernetes controllers (workqueue_*, rest_client_*,
// controller_runtime_reconcile_*, leader_election_master_status), so that
// existing dashboards and alerts work on Kontinue unchanged. Kontinue's own
// kontinue_* series stay, with the same observations.

var (
	crReconcileTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_runtime_reconcile_total",
		Help: "Total number of reconciliations per controller (result: success, error, requeue, requeue_after).",
	}, []string{"controller", "result"})
	crReconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_runtime_reconcile_errors_total",
		Help: "Total number of reconciliation errors per controller.",
	}, []string{"controller"})
	crTerminalErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_runtime_terminal_reconcile_errors_total",
		Help: "Total number of terminal reconciliation errors per controller (recorded on the object, not retried).",
	}, []string{"controller"})
	crReconcileTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "controller_runtime_reconcile_time_seconds",
		Help: "Length of time per reconciliation per controller.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
			1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60},
	}, []string{"controller"})
	crMaxConcurrent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "controller_runtime_max_concurrent_reconciles",
		Help: "Maximum number of concurrent reconciles (workers) per controller.",
	}, []string{"controller"})
	crActiveWorkers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "controller_runtime_active_workers",
		Help: "Number of workers reconciling a key right now, per controller.",
	}, []string{"controller"})
	crPanics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_runtime_reconcile_panics_total",
		Help: "Total number of reconciles that panicked, per controller (each also counts as an error).",
	}, []string{"controller"})

	restRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Number of HTTP requests, partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})
	restLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Request latency in seconds. Broken down by verb, and host.",
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0},
	}, []string{"verb", "host"})

	leaderStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
	}, []string{"name"})
	leaderSlowpath = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leader_election_slowpath_total",
		Help: "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease.",
	}, []string{"name"})

	// controller-runtime labels its queues by name and controller (the same
	// value: a queue per controller) and its depth by priority too ("" for
	// a queue without priorities, as all of Kontinue's are).
	wqStdDepth   = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Current depth of workqueue by workqueue and priority"}, []string{"name", "controller", "priority"})
	wqStdAdds    = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Total number of adds handled by workqueue"}, wqLabels)
	wqStdLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds", Help: "How long in seconds an item stays in workqueue before being requested", Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12)}, wqLabels)
	wqStdWork    = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds", Help: "How long in seconds processing an item from workqueue takes.", Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12)}, wqLabels)
	wqStdUnfin   = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds", Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads."}, wqLabels)
	wqStdLongest = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds", Help: "How many seconds has the longest running processor for workqueue been running."}, wqLabels)
	wqStdRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Total number of retries handled by workqueue"}, wqLabels)
)

var wqLabels = []string{"name", "controller"}

// leading is kontinue_leader{shard}: one series per process, naming the
// shard it serves ("" for the default shard, which Prometheus stores as no
// label: an unsharded install keeps the series it always had). Alerts and
// dashboards group by shard, and join the other series (which have no
// shard) to it on the target's instance and pod.
var leading = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "kontinue_leader",
	Help: "1 while this process runs the controllers of its shard (it holds the shard's leader lease, or leader election is off), else 0. 'shard' is the --shard it serves, empty for the default shard.",
}, []string{"shard"})

// SetLeading sets kontinue_leader{shard}. A process serves one shard: call
// it with false at start, so that a standby reports 0 before it ever leads.
func SetLeading(shard string, v bool) {
	g := leading.WithLabelValues(shard)
	if v {
		g.Set(1)
	} else {
		g.Set(0)
	}
}

func registerStandard() {
	Registry.MustRegister(leading, crReconcileTotal, crReconcileErrors, crTerminalErrors, crReconcileTime, crMaxConcurrent, crActiveWorkers, crPanics,
		restRequests, restLatency, leaderStatus, leaderSlowpath,
		wqStdDepth, wqStdAdds, wqStdLatency, wqStdWork, wqStdUnfin, wqStdLongest, wqStdRetries)
	leaderelection.SetProvider(leaderProvider{})
}

// crResult maps Kontinue's reconcile outcomes to controller-runtime's
// result label: a terminal error is an error there too.
func crResult(result string) string {
	switch result {
	case "terminal":
		return "error"
	case "requeue":
		return "requeue_after"
	}
	return result
}

func observeStandard(controller string, d time.Duration, result string) {
	crReconcileTotal.WithLabelValues(controller, crResult(result)).Inc()
	crReconcileTime.WithLabelValues(controller).Observe(d.Seconds())
	switch result {
	case "error":
		crReconcileErrors.WithLabelValues(controller).Inc()
	case "terminal":
		crReconcileErrors.WithLabelValues(controller).Inc()
		crTerminalErrors.WithLabelValues(controller).Inc()
	}
}

// SetWorkers records the number of workers of a controller
// (controller_runtime_max_concurrent_reconciles) and creates its reconcile
// series at zero, so that rates and alerts see the controller before its
// first error.
func SetWorkers(controller string, workers int) {
	crMaxConcurrent.WithLabelValues(controller).Set(float64(workers))
	for _, r := range []string{"success", "error", "requeue", "requeue_after"} {
		crReconcileTotal.WithLabelValues(controller, r)
	}
	crReconcileErrors.WithLabelValues(controller)
	crTerminalErrors.WithLabelValues(controller)
	crPanics.WithLabelValues(controller)
	crActiveWorkers.WithLabelValues(controller)
}

// SetLeader sets leader_election_master_status{name} directly, for a
// process that runs without leader election (it always leads). With leader
// election client-go's elector sets it through the provider.
func SetLeader(name string, leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	leaderStatus.WithLabelValues(name).Set(v)
}

type leaderProvider struct{}

func (leaderProvider) NewLeaderMetric() leaderelection.LeaderMetric { return leaderMetric{} }

type leaderMetric struct{}

func (leaderMetric) On(name string)                { leaderStatus.WithLabelValues(name).Set(1) }
func (leaderMetric) Off(name string)               { leaderStatus.WithLabelValues(name).Set(0) }
func (leaderMetric) SlowpathExercised(name string) { leaderSlowpath.WithLabelValues(name).Inc() }

func restRequest(code, method, host string) {
	restRequests.WithLabelValues(code, method, host).Inc()
}

func restObserve(verb string, u url.URL, d time.Duration) {
	restLatency.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

// Workqueue metrics go to both families: workqueue_* (client-go's names)
// and kontinue_workqueue_*.
type gauges []prometheus.Gauge

func (g gauges) Inc() {
	for _, x := range g {
		x.Inc()
	}
}
func (g gauges) Dec() {
	for _, x := range g {
		x.Dec()
	}
}
func (g gauges) Set(v float64) {
	for _, x := range g {
		x.Set(v)
	}
}

type counters []prometheus.Counter

func (c counters) Inc() {
	for _, x := range c {
		x.Inc()
	}
}

type histograms []prometheus.Observer

func (h histograms) Observe(v float64) {
	for _, x := range h {
		x.Observe(v)
	}
}

var _ workqueue.MetricsProvider = provider{}
