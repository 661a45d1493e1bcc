package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// processCalls counts every API request made through client-go in this
// process (Kontinue runs in it); benchCalls the benchmark's own, so that
// Kontinue's are the difference.
var (
	processCalls, benchCalls atomic.Int64
	registerCallsOnce        sync.Once
)

// callsBy counts process calls by "METHOD code" (the benchmark's own
// included: it makes only creates, lists and status updates).
var (
	callsMu sync.Mutex
	callsBy = map[string]int{}
)

type callCounter struct{}

func (callCounter) Increment(_ context.Context, code, method, _ string) {
	processCalls.Add(1)
	callsMu.Lock()
	callsBy[method+" "+code]++
	callsMu.Unlock()
}

type countingTransport struct{ rt http.RoundTripper }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	benchCalls.Add(1)
	return c.rt.RoundTrip(r)
}

// BenchmarkHundredWorkloads times 100 workloads through the 4-step chain
// (source → image → config → template) from the first create to all Ready,
// the benchmark playing the git poller and image builder as soon as their
// Test objects appear, and counts the API calls Kontinue made meanwhile and
// until it is quiet. Run alone:
//
//	go test ./e2e -run '^$' -bench HundredWorkloads -benchtime 1x
func BenchmarkHundredWorkloads(b *testing.B) {
	registerCallsOnce.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: callCounter{}})
	})
	for i := 0; i < b.N; i++ {
		hundredWorkloads(b, 100)
	}
}

func hundredWorkloads(b *testing.B, n int) {
	ns := newNamespace(b)
	chain := uniq(ns, "chain")
	apply(b, ns, fourStepChain(ns))
	eventually(b, 30*time.Second, func() string {
		if c := ownerCondition(get(b, chainGVR, "", chain), "Ready"); c == nil || c["status"] != "True" {
			return fmt.Sprintf("chain not ready: %v", c)
		}
		return ""
	})
	cfg := rest.CopyConfig(env.cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt} }
	dc := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()

	time.Sleep(time.Second) // let the setup's events pass
	b.ResetTimer()
	callsMu.Lock()
	clear(callsBy)
	callsMu.Unlock()
	p0, b0 := processCalls.Load(), benchCalls.Load()
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			u := obj(workloadYAML(ns, fmt.Sprintf("w%03d", i), chain, ""))
			if _, err := dc.Resource(workloadGVR).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		}(i)
	}
	wg.Wait()

	// Play the source and image controllers, and wait for all Ready.
	played := map[string]bool{}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		tests, err := dc.Resource(testGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range tests.Items {
			t := &tests.Items[i]
			if played[t.GetName()] {
				continue
			}
			step := t.GetLabels()["carto.run/resource-name"]
			switch step {
			case "source-provider":
				t.Object["status"] = map[string]any{"artifact": map[string]any{"url": "https://artifacts/" + t.GetName() + ".tgz", "revision": "abc"}}
			case "image-builder":
				t.Object["status"] = map[string]any{"latestImage": "registry.example.com/" + t.GetName() + "@sha256:1"}
			default:
				continue
			}
			if _, err := dc.Resource(testGVR).Namespace(ns).UpdateStatus(ctx, t, metav1.UpdateOptions{}); err == nil {
				played[t.GetName()] = true
			}
		}
		ws, err := dc.Resource(workloadGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ready := 0
		for i := range ws.Items {
			if c := ownerCondition(&ws.Items[i], "Ready"); c != nil && c["status"] == "True" {
				ready++
			}
		}
		if ready == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d workloads Ready after 5 minutes", ready, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	elapsed := time.Since(start)
	atReady := (processCalls.Load() - p0) - (benchCalls.Load() - b0)
	b.StopTimer()

	// Trailing work (events, the last status writes) until quiet for 3 s.
	last, quietSince := processCalls.Load()-benchCalls.Load(), time.Now()
	for time.Since(quietSince) < 3*time.Second && time.Since(start) < 10*time.Minute {
		time.Sleep(250 * time.Millisecond)
		if cur := processCalls.Load() - benchCalls.Load(); cur != last {
			last, quietSince = cur, time.Now()
		}
	}
	total := last - (p0 - b0)
	b.ReportMetric(elapsed.Seconds(), "s-to-all-ready")
	b.ReportMetric(float64(atReady), "kontinue-calls-to-ready")
	b.ReportMetric(float64(total), "kontinue-calls-until-quiet")
	b.ReportMetric(float64(total)/float64(n), "kontinue-calls/workload")
	b.Logf("%d workloads, 4-step chain: all Ready in %s; Kontinue API calls: %d until all Ready, %d until quiet (%.1f per workload)",
		n, elapsed.Round(10*time.Millisecond), atReady, total, float64(total)/float64(n))
	callsMu.Lock()
	b.Logf("all calls in the process by method and code (the benchmark's %d included): %v", benchCalls.Load()-b0, callsBy)
	callsMu.Unlock()
}
