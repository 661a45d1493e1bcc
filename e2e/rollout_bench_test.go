package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
	"kontinue.dev/kontinue/tracking"
)

// BenchmarkRolloutWave measures what a chain's roll-out costs Kontinue
// (in this process) at scale: N Workloads (KONTINUE_BENCH_ROLLOUT_N, 1,000
// unless given) with one ConfigMap step, under a policy of a canary wave (2
// owners), 50% and the implied 100%.
//
//  1. A wave that waits: a template edit the canaries fail on halts the
//     roll-out; over the next KONTINUE_BENCH_ROLLOUT_WAIT (20 s) nothing
//     changes, and the process's CPU seconds, the owners decoded from the
//     cache and the chain's reconciles are counted, per second.
//  2. A rolled-out edit: a good edit, from the edit until the chain says
//     Complete (every owner Ready on it): seconds, CPU seconds, owner
//     decodes, chain reconciles.
//
// Run alone (it creates N Workloads on the suite's control plane):
//
//	go test ./e2e -run '^$' -bench RolloutWave -benchtime 1x
func BenchmarkRolloutWave(b *testing.B) {
	n := envInt("KONTINUE_BENCH_ROLLOUT_N", 1000)
	wait := time.Duration(envInt("KONTINUE_BENCH_ROLLOUT_WAIT", 20)) * time.Second
	for i := 0; i < b.N; i++ {
		rolloutWave(b, n, wait)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// cpuSeconds is this process's user and system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// rolloutMeter counts from its start: CPU seconds, owner decodes, the
// chain's reconciles.
type rolloutMeter struct {
	key        reconciler.Key
	start      time.Time
	cpu        float64
	decoded    int64
	reconciles int
}

func newRolloutMeter(chain string) *rolloutMeter {
	k := reconciler.Key{Kind: api.KindClusterSupplyChain, NamespacedName: types.NamespacedName{Name: chain}}
	return &rolloutMeter{key: k, start: time.Now(), cpu: cpuSeconds(), decoded: tracking.Decoded(), reconciles: reconciles.get(k)}
}

func (m *rolloutMeter) read() (secs, cpu float64, decoded int64, rec int) {
	return time.Since(m.start).Seconds(), cpuSeconds() - m.cpu, tracking.Decoded() - m.decoded, reconciles.get(m.key) - m.reconciles
}

func rolloutWave(b *testing.B, n int, wait time.Duration) {
	k := newKit(b)
	chain, tmpl := k.name("chain"), k.name("cfg")
	template := func(data string) string {
		return k.templateYAML("ClusterTemplate", tmpl, `
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-cfg}
    data: `+data)
	}
	k.apply(template(`{v: "1"}`))
	k.apply(k.chainYAML(chain, `
  rollout:
    waves:
    - selector: {matchLabels: {rollout.example.com/canary: "true"}}
    - percent: 50`, k.step("cfg", "ClusterTemplate", tmpl, "")))

	cfg := rest.CopyConfig(env.cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	dc := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			u := obj(fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata:
  name: w%04d
  labels: {app.example.com/chain: %s, rollout.example.com/canary: "%t"}
spec: {}
`, i, chain, i < 2))
			if _, err := dc.Resource(workloadGVR).Namespace(k.ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		}(i)
	}
	wg.Wait()
	created := time.Now()
	allReady := func() string {
		ws, err := dc.Resource(workloadGVR).Namespace(k.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		ready := 0
		for i := range ws.Items {
			if c := ownerCondition(&ws.Items[i], "Ready"); c != nil && c["status"] == "True" {
				ready++
			}
		}
		if ready < n {
			return fmt.Sprintf("%d of %d Workloads Ready", ready, n)
		}
		return ""
	}
	eventually(b, 30*time.Minute, func() string {
		time.Sleep(time.Second)
		return allReady()
	})
	b.Logf("%d Workloads Ready in %s", n, time.Since(created).Round(time.Second))
	complete := func(target string) func() string {
		return func() string {
			time.Sleep(200 * time.Millisecond)
			st := k.rollout(chain)
			if st.Phase != rollout.PhaseComplete || (target != "" && st.Stable != target) {
				return fmt.Sprintf("%s wave %d (%d/%d)", st.Phase, st.Wave, st.Updated, st.Admitted)
			}
			return ""
		}
	}
	eventually(b, 5*time.Minute, complete(""))
	time.Sleep(3 * time.Second) // the last status writes pass

	// 1. A wave that waits: halted at the canaries.
	k.apply(template(`{v: "2", x: $(workload.metadata.annotations.missing)$}`))
	eventually(b, 5*time.Minute, func() string {
		time.Sleep(200 * time.Millisecond)
		if st := k.rollout(chain); st.Phase != rollout.PhaseHalted {
			return fmt.Sprintf("%s wave %d", st.Phase, st.Wave)
		}
		return ""
	})
	time.Sleep(3 * time.Second)
	m := newRolloutMeter(chain)
	time.Sleep(wait)
	secs, cpu, dec, rec := m.read()
	b.ReportMetric(cpu/secs, "halted-cpu-s/s")
	b.ReportMetric(float64(dec)/secs, "halted-decodes/s")
	b.ReportMetric(float64(rec)/secs, "halted-chain-reconciles/s")
	b.Logf("halted for %.1f s: %.2f CPU s (%.3f/s), %d owner decodes (%.0f/s), %d chain reconciles", secs, cpu, cpu/secs, dec, float64(dec)/secs, rec)

	// 2. A good edit, rolled out to every owner.
	m = newRolloutMeter(chain)
	k.apply(template(`{v: "3"}`))
	target := ""
	eventually(b, 5*time.Minute, func() string {
		time.Sleep(100 * time.Millisecond)
		st := k.rollout(chain)
		if st.Target == "" || st.Phase == rollout.PhaseHalted {
			return "no new target yet"
		}
		target = st.Target
		return ""
	})
	eventually(b, 30*time.Minute, complete(target))
	secs, cpu, dec, rec = m.read()
	b.ReportMetric(secs, "rollout-s")
	b.ReportMetric(cpu, "rollout-cpu-s")
	b.ReportMetric(float64(dec), "rollout-decodes")
	b.ReportMetric(float64(rec), "rollout-chain-reconciles")
	b.Logf("rolled out to %d Workloads in %.1f s: %.2f CPU s, %d owner decodes, %d chain reconciles", n, secs, cpu, dec, rec)
	if msg := allReady(); msg != "" {
		b.Fatal(msg)
	}
}
