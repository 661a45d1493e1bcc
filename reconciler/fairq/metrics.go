package fairq

import (
	"time"

	"k8s.io/client-go/util/workqueue"
)

// metrics are workqueue's, made by the provider set with SetProvider (none:
// no-ops), so dashboards read a fair queue as they read a workqueue.
type metrics struct {
	enabled    bool
	depth      workqueue.GaugeMetric
	adds       workqueue.CounterMetric
	latency    workqueue.HistogramMetric
	work       workqueue.HistogramMetric
	unfinished workqueue.SettableGaugeMetric
	longest    workqueue.SettableGaugeMetric
	retries    workqueue.CounterMetric
}

type noop struct{}

func (noop) Inc()            {}
func (noop) Dec()            {}
func (noop) Set(float64)     {}
func (noop) Observe(float64) {}

func newMetrics(name string, p workqueue.MetricsProvider) metrics {
	if p == nil || name == "" {
		return metrics{depth: noop{}, adds: noop{}, latency: noop{}, work: noop{}, unfinished: noop{}, longest: noop{}, retries: noop{}}
	}
	return metrics{
		enabled:    true,
		depth:      p.NewDepthMetric(name),
		adds:       p.NewAddsMetric(name),
		latency:    p.NewLatencyMetric(name),
		work:       p.NewWorkDurationMetric(name),
		unfinished: p.NewUnfinishedWorkSecondsMetric(name),
		longest:    p.NewLongestRunningProcessorSecondsMetric(name),
		retries:    p.NewRetriesMetric(name),
	}
}

// tick updates the gauges of work in progress twice a second (as
// workqueue does) until the queue shuts down.
func (q *Queue[T]) tick() {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-q.stopTick:
			return
		case <-t.C:
		}
		q.mu.Lock()
		now := time.Now()
		var total, longest float64
		for _, start := range q.processing {
			s := now.Sub(start).Seconds()
			total += s
			longest = max(longest, s)
		}
		q.mu.Unlock()
		q.m.unfinished.Set(total)
		q.m.longest.Set(longest)
	}
}
