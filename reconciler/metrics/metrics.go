// Package metrics exposes Kontinue's Prometheus metrics: workqueues,
// reconciles, API requests, informers and applies.
package metrics

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"

	"kontinue.dev/kontinue/reconciler/fairq"
)

// Registry holds every Kontinue metric.
var Registry = prometheus.NewRegistry()

var (
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kontinue_reconcile_duration_seconds", Help: "Time to reconcile one key, by controller and result.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"controller", "result"})
	applies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_stamped_applies_total", Help: "Stamped objects applied (result=applied) or left alone because the live object was up to date (result=skipped).",
	}, []string{"result"})
	apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_api_requests_total", Help: "Requests Kontinue made to the API server, by verb and status code.",
	}, []string{"verb", "code"})
	apiLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kontinue_api_request_duration_seconds", Help: "API request latency by verb.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"verb"})
	informers = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kontinue_active_informers", Help: "Informers currently running."})
	cached    = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kontinue_cached_objects", Help: "Objects held in informer caches."})
	dropped   = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_events_dropped_total", Help: "Normal events not recorded because their namespace's event budget was spent, by reason.",
	}, []string{"reason"})
	clients = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kontinue_impersonating_clients", Help: "Clients kept that act as a service account (bounded)."})
	foreign = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kontinue_shard_foreign_objects_total", Help: "Objects of another shard that a watch of owners or stamped objects delivered (0 while the API server filters by shard).",
	})
	conflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_status_conflicts_total", Help: "Status writes the API server refused as conflicts (decided on a stale cached copy), by kind.",
	}, []string{"kind"})
	fights = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kontinue_stamped_object_fights_total", Help: "Writes of a stamped object Kontinue stopped because another writer set a field back after each of its writes (a fight over a field).",
	})
	echoes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_own_write_wakes_total", Help: "Keys woken only by the watch events of versions Kontinue itself wrote, and so not reconciled, by controller.",
	}, []string{"controller"})
)

func init() {
	Registry.MustRegister(reconcileDuration, applies, apiRequests, apiLatency, informers, cached, dropped, clients, conflicts, foreign, echoes, fights,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerWorkqueue()
	registerStandard()
	clientmetrics.Register(clientmetrics.RegisterOpts{
		RequestResult:  requestResult{},
		RequestLatency: requestLatency{},
	})
}

// Observer records reconcile outcomes (reconciler.Observer).
type Observer struct{}

// Reconciled records one reconcile.
func (Observer) Reconciled(controller string, d time.Duration, result string) {
	reconcileDuration.WithLabelValues(controller, result).Observe(d.Seconds())
	observeStandard(controller, d, result)
}

// Working counts the workers busy with a reconcile.
func (Observer) Working(controller string, delta int) {
	crActiveWorkers.WithLabelValues(controller).Add(float64(delta))
}

// Panicked counts a reconcile that panicked.
func (Observer) Panicked(controller string) { crPanics.WithLabelValues(controller).Inc() }

// Applied counts an apply or a skipped no-op apply.
func Applied(applied bool) {
	if applied {
		applies.WithLabelValues("applied").Inc()
	} else {
		applies.WithLabelValues("skipped").Inc()
	}
}

// Fought counts a fight over a field Kontinue stopped (stamp.Fights).
func Fought() { fights.Inc() }

// Foreign counts an object of another shard a sharded watch delivered.
func Foreign() { foreign.Inc() }

// OwnWriteWake counts a key of controller not reconciled: only versions
// Kontinue wrote had woken it.
func OwnWriteWake(controller string) { echoes.WithLabelValues(controller).Inc() }

// StatusConflict counts a status write of kind refused as a conflict.
func StatusConflict(kind string) { conflicts.WithLabelValues(kind).Inc() }

// EventDropped counts a Normal event past its namespace's budget.
func EventDropped(reason string) { dropped.WithLabelValues(reason).Inc() }

// SetClients records how many impersonating clients are kept.
func SetClients(n int) { clients.Set(float64(n)) }

// SetInformers records the tracker's state.
func SetInformers(active, objects int) {
	informers.Set(float64(active))
	cached.Set(float64(objects))
}

type requestResult struct{}

func (requestResult) Increment(_ context.Context, code, method, host string) {
	apiRequests.WithLabelValues(method, code).Inc()
	restRequest(code, method, host)
}

type requestLatency struct{}

func (requestLatency) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	apiLatency.WithLabelValues(verb).Observe(d.Seconds())
	restObserve(verb, u, d)
}

// Workqueue metrics, per queue name.
var (
	wqDepth   = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kontinue_workqueue_depth", Help: "Current depth of the workqueue."}, []string{"name"})
	wqAdds    = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kontinue_workqueue_adds_total", Help: "Items added to the workqueue."}, []string{"name"})
	wqLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kontinue_workqueue_queue_duration_seconds", Help: "Time an item waits in the queue.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12)}, []string{"name"})
	wqWork    = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kontinue_workqueue_work_duration_seconds", Help: "Time processing an item.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12)}, []string{"name"})
	wqRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kontinue_workqueue_retries_total", Help: "Retries (rate-limited re-adds)."}, []string{"name"})
	wqUnfin   = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kontinue_workqueue_unfinished_work_seconds", Help: "Seconds of work in progress."}, []string{"name"})
	wqLongest = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kontinue_workqueue_longest_running_processor_seconds", Help: "Longest running processor."}, []string{"name"})
)

func registerWorkqueue() {
	Registry.MustRegister(wqDepth, wqAdds, wqLatency, wqWork, wqRetries, wqUnfin, wqLongest)
	workqueue.SetProvider(provider{})
	fairq.SetProvider(provider{}) // the controllers' fair queues report as workqueues
}

type provider struct{}

func (provider) NewDepthMetric(n string) workqueue.GaugeMetric {
	return gauges{wqDepth.WithLabelValues(n), wqStdDepth.WithLabelValues(n, n, "")}
}
func (provider) NewAddsMetric(n string) workqueue.CounterMetric {
	return counters{wqAdds.WithLabelValues(n), wqStdAdds.WithLabelValues(n, n)}
}
func (provider) NewLatencyMetric(n string) workqueue.HistogramMetric {
	return histograms{wqLatency.WithLabelValues(n), wqStdLatency.WithLabelValues(n, n)}
}
func (provider) NewWorkDurationMetric(n string) workqueue.HistogramMetric {
	return histograms{wqWork.WithLabelValues(n), wqStdWork.WithLabelValues(n, n)}
}
func (provider) NewUnfinishedWorkSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return gauges{wqUnfin.WithLabelValues(n), wqStdUnfin.WithLabelValues(n, n)}
}
func (provider) NewLongestRunningProcessorSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return gauges{wqLongest.WithLabelValues(n), wqStdLongest.WithLabelValues(n, n)}
}
func (provider) NewRetriesMetric(n string) workqueue.CounterMetric {
	return counters{wqRetries.WithLabelValues(n), wqStdRetries.WithLabelValues(n, n)}
}
