// Package robustness searches for Kontinue's next defect by itself: seeded
// random traffic from tenants, a platform team and rogue controllers, with
// injected faults (kill -9, API server outages, slow answers and 429s,
// leader failovers, two shards), on the local cluster with the real
// workload controllers and kwok; then the API server's own audit log and
// a final read of the cluster are checked against invariants
// (e2e/robustness/check). The oracle is the API server, never Kontinue.
// README.md says how it works, what the invariants and their bounds are,
// and what it found.
//
//	go test ./e2e/robustness                     the fixed seeds (make test)
//	make robustness DURATION=1h [SEED=n]         seeds in sequence for an hour
//	go test ./e2e/robustness -run 'TestRobustness$' -args -robustness.replay=_output/robustness/<seed>-<run>/ops.jsonl
package robustness

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kontinue.dev/kontinue/e2e/robustness/check"
	"kontinue.dev/kontinue/e2e/robustness/shrink"
	"kontinue.dev/kontinue/hack/localcluster"
)

// fixedSeeds run in `make test`: each must pass on correct code, and
// together they take a few minutes.
var fixedSeeds = []uint64{1, 2}

// fixedTiming is theirs.
var fixedTiming = timing{Traffic: 45 * time.Second, Settle: 35 * time.Second, Quiet: 15 * time.Second}

var (
	flagSeed       = flag.Uint64("robustness.seed", 0, "first seed (0: from the clock); each next run takes the next seed")
	flagSeeds      = flag.String("robustness.seeds", "", "comma-separated seeds for TestRobustnessSeeds instead of the fixed ones")
	flagDuration   = flag.Duration("robustness.duration", 0, "TestRobustness: run seeds one after the other for this long (0: skip, unless -robustness.seed or -robustness.replay is set: one run)")
	flagTraffic    = flag.Duration("robustness.traffic", 90*time.Second, "TestRobustness: traffic of each run (one long seed: -robustness.traffic=1h)")
	flagSettle     = flag.Duration("robustness.settle", 40*time.Second, "TestRobustness: time after the traffic before the quiet window")
	flagQuiet      = flag.Duration("robustness.quiet", 15*time.Second, "TestRobustness: the final quiet window")
	flagReplay     = flag.String("robustness.replay", "", "TestRobustness: run this op list (ops.jsonl) instead of a seed's")
	flagShrink     = flag.Bool("robustness.shrink", false, "TestRobustness: shrink a failing op list (each try is a full run)")
	flagShrinkRuns = flag.Int("robustness.shrink-runs", 30, "TestRobustness: at most this many runs to shrink one failure")
	flagKeep       = flag.Bool("robustness.keep", false, "keep the folder of passing runs too")
	flagKontinue   = flag.String("robustness.kontinue", "", "run this kontinue binary instead of building the worktree's (another branch's, a mutant's)")
	flagRecheck    = flag.String("robustness.recheck", "", "TestRecheck: check kept runs again (a glob of their folders)")
	flagNoProxy    = flag.Bool("robustness.noproxy", false, "Kontinue talks to the API server directly (no slow or 429 answers)")
	flagRepeat     = flag.Int("robustness.repeat", 1, "TestRobustness: run each seed this many times (a flake shows)")
	flagStop       = flag.Bool("robustness.failfast", false, "TestRobustness: stop at the first failing seed")
)

// suite is the cluster and binary every run shares.
var suite struct {
	once    sync.Once
	err     error
	root    string
	out     string
	dir     string
	cluster *localcluster.Cluster
	api     api
	bin     string
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if suite.cluster != nil {
		_ = suite.cluster.Stop()
		if code == 0 {
			_ = os.RemoveAll(suite.dir)
		}
	}
	os.Exit(code)
}

// needCluster starts the cluster (once per test process) and builds
// Kontinue.
func needCluster(t *testing.T) {
	t.Helper()
	suite.once.Do(func() {
		ctx := context.Background()
		t0 := time.Now()
		if suite.root, suite.err = localcluster.RepoRoot("."); suite.err != nil {
			return
		}
		suite.out = filepath.Join(suite.root, "_output", "robustness")
		if suite.dir, suite.err = os.MkdirTemp("", "kontinue-robustness-"); suite.err != nil {
			return
		}
		if suite.cluster, suite.err = startCluster(ctx, suite.root, suite.dir); suite.err != nil {
			return
		}
		client, err := suite.cluster.HTTPClient()
		if suite.err = err; err != nil {
			return
		}
		client.Timeout = time.Minute
		suite.api = api{host: suite.cluster.Host, client: client}
		if suite.bin = *flagKontinue; suite.bin == "" {
			if suite.bin, suite.err = buildKontinue(suite.root); suite.err != nil {
				return
			}
		}
		fmt.Fprintf(os.Stderr, "robustness: cluster (state and logs in %s) and Kontinue ready in %s\n", suite.dir, time.Since(t0).Round(time.Second))
	})
	if suite.err != nil {
		t.Fatalf("robustness: %v", suite.err)
	}
}

// TestRobustnessSeeds runs the fixed seeds.
func TestRobustnessSeeds(t *testing.T) {
	seeds := fixedSeeds
	if *flagSeeds != "" {
		seeds = nil
		for _, s := range strings.Split(*flagSeeds, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				t.Fatalf("-robustness.seeds: %v", err)
			}
			seeds = append(seeds, n)
		}
	}
	needCluster(t)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			res, err := execute(context.Background(), seed, nil, fixedTiming, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("seed %d: %d ops in %s; %s", seed, len(res.Ops), res.Took.Round(time.Second), strings.Join(res.Notes, "; "))
			report(t, res, fixedTiming)
		})
	}
}

// TestRobustness runs seeds one after the other for -robustness.duration
// (make robustness), or one seed, or a saved op list.
func TestRobustness(t *testing.T) {
	if *flagDuration == 0 && *flagSeed == 0 && *flagReplay == "" {
		t.Skip("set -robustness.duration, -robustness.seed or -robustness.replay (make robustness)")
	}
	needCluster(t)
	tm := timing{Traffic: *flagTraffic, Settle: *flagSettle, Quiet: *flagQuiet}
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	var ops []Op
	if *flagReplay != "" {
		var err error
		if ops, err = loadOps(*flagReplay); err != nil {
			t.Fatal(err)
		}
		if last := ops[len(ops)-1].At + 10*time.Second; last > tm.Traffic {
			tm.Traffic = last
		}
	}
	start := time.Now()
	runs, failures, repeats := 0, 0, 0
	found := map[int]string{} // invariant → when, which seed
	for {
		runs++
		res, err := execute(context.Background(), seed, ops, tm, t.Logf)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		t.Logf("seed %d: %d ops, %d violation(s), %s; %s", seed, len(res.Ops), len(res.Violations), res.Took.Round(time.Second),
			strings.Join(res.Notes, "; "))
		if len(res.Violations) > 0 {
			failures++
			for _, v := range res.Violations {
				if _, ok := found[v.Invariant]; !ok {
					found[v.Invariant] = fmt.Sprintf("after %s (seed %d, run %d)", time.Since(start).Round(time.Second), seed, runs)
				}
			}
			report(t, res, tm)
			if *flagShrink {
				shrinkFailure(t, res, tm)
			}
			if *flagStop {
				break
			}
		}
		if repeats++; repeats < *flagRepeat {
			continue
		}
		repeats = 0
		if ops != nil || time.Since(start)+res.Took > *flagDuration {
			break
		}
		seed++
	}
	t.Logf("%d run(s), %d failing, in %s", runs, failures, time.Since(start).Round(time.Second))
	for inv := 0; inv <= 8; inv++ {
		if w, ok := found[inv]; ok {
			t.Logf("invariant %d (%s) first failed %s", inv, check.Names[inv], w)
		}
	}
}

// report fails the test with the seed, the violations, and how to run it
// again: with the run's own timing, since the traffic of a seed depends on
// its length (a fixed seed's is not make robustness's default).
func report(t *testing.T, res *result, tm timing) {
	t.Helper()
	if len(res.Violations) == 0 {
		return
	}
	rel := res.Dir
	if r, err := filepath.Rel(suite.root, res.Dir); err == nil {
		rel = r
	}
	t.Errorf("seed %d: %d invariant violation(s):\n%s\nthe ops, the audit log and Kontinue's logs are in %s;\n"+
		"run it again: make robustness SEED=%d TRAFFIC=%s ROBUSTNESS_ARGS='-robustness.settle=%s -robustness.quiet=%s'\n"+
		"or the same ops: go test -count=1 -timeout 0 -run 'TestRobustness$' ./e2e/robustness -args -robustness.replay=%s/ops.jsonl",
		res.Seed, len(res.Violations), check.Summary(res.Violations, 5), rel, res.Seed, tm.Traffic, tm.Settle, tm.Quiet, rel)
}

// shrinkFailure shrinks a failing op list to one that still fails an
// invariant it failed (delta debugging, a run per try).
func shrinkFailure(t *testing.T, res *result, tm timing) {
	want := map[int]bool{}
	for _, v := range res.Violations {
		want[v.Invariant] = true
	}
	tries := 0
	fails := func(ops []Op) bool {
		tries++
		r, err := execute(context.Background(), res.Seed, ops, tm, func(string, ...any) {})
		if err != nil {
			t.Logf("shrink try %d: %v", tries, err)
			return false
		}
		for _, v := range r.Violations {
			if want[v.Invariant] {
				t.Logf("shrink try %d: %d ops still fail", tries, len(ops))
				return true
			}
		}
		t.Logf("shrink try %d: %d ops pass", tries, len(ops))
		return false
	}
	min := shrink.Minimize(res.Ops, fails, *flagShrinkRuns)
	path := filepath.Join(res.Dir, "ops-shrunk.jsonl")
	if err := saveOps(path, min); err != nil {
		t.Logf("saving the shrunk ops: %v", err)
	}
	t.Logf("seed %d shrunk to %d ops in %d runs (%s):\n%s", res.Seed, len(min), tries, path, opsText(min))
}
