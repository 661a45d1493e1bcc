package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBoundedDelayCanary(t *testing.T) {
	c := Canary{Owner: Key{Group: OwnGroup, Resource: "workloads", Namespace: "canary", Name: "c"}, Param: "tick",
		Object: Key{Resource: "configmaps", Namespace: "canary", Name: "c-final"}, Path: "data.tick"}
	owner := func(tick string) obj {
		return object("Workload", "canary", "c", "w9", with("spec", map[string]any{"params": []any{map[string]any{"name": "tick", "value": tick}}}))
	}
	final := func(tick string) obj {
		return object("ConfigMap", "canary", "c-final", "f1", with("data", map[string]any{"tick": tick}))
	}
	bounds := DelayBounds{Canary: 10 * time.Second, Observe: time.Hour, Rollout: time.Hour}
	b := newBuilder()
	b.h.End = at(200)
	b.write(10, "update", "admin", "person-canary", "workloads.carto.run", 200, owner("t1"))
	b.write(12, "patch", kontinue, "system:serviceaccount:canary:default", "configmaps", 200, final("t1"))
	b.write(20, "update", "admin", "person-canary", "workloads.carto.run", 200, owner("t2"))
	// t2 is skipped, t3 arrives within t2's bound: both are in time.
	b.write(25, "update", "admin", "person-canary", "workloads.carto.run", 200, owner("t3"))
	b.write(28, "patch", kontinue, "system:serviceaccount:canary:default", "configmaps", 200, final("t3"))
	assert.Empty(t, BoundedDelay(b.h, []Canary{c}, bounds, nil))

	b.write(40, "update", "admin", "person-canary", "workloads.carto.run", 200, owner("t4"))
	b.write(75, "patch", kontinue, "system:serviceaccount:canary:default", "configmaps", 200, final("t4"))
	b.write(80, "update", "admin", "person-canary", "workloads.carto.run", 200, owner("t5"))
	vs := BoundedDelay(b.h, []Canary{c}, bounds, nil)
	require.Len(t, vs, 2, "%v", vs)
	assert.Contains(t, vs[0].Message, `"t4" reached it after 35s`)
	assert.Contains(t, vs[1].Message, `"t5" never reached it`)

	// An outage excuses what it lasted.
	b.h.Outages = []Interval{{at(41), at(70)}, {at(81), at(200)}}
	assert.Empty(t, BoundedDelay(b.h, []Canary{c}, bounds, nil))
}

func TestBoundedDelayObserve(t *testing.T) {
	w := func(gen int64, shard string) obj {
		return object("Workload", "t1", "app", "w1", generation(gen), labels(LabelShard, shard))
	}
	st := func(gen int64) obj {
		return object("Workload", "t1", "app", "w1", generation(gen), with("status", map[string]any{"observedGeneration": gen}))
	}
	bounds := DelayBounds{Canary: time.Hour, Observe: 30 * time.Second, Rollout: time.Hour}
	served := func(s string) bool { return s == "" }
	b := newBuilder()
	b.h.End = at(300)
	b.write(1, "create", "admin", "person-a", "workloads.carto.run", 201, w(1, ""))
	b.write(2, "update", kontinue, "", "workloads.carto.run/status", 200, st(1))
	b.write(10, "update", "admin", "person-a", "workloads.carto.run", 200, w(2, ""))
	b.write(60, "update", kontinue, "", "workloads.carto.run/status", 200, st(2))
	vs := BoundedDelay(b.h, nil, bounds, served)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "generation 2 (update by person-a): the first status describing it after 50s")

	// Moved to a shard nobody serves: not Kontinue's to describe.
	b.write(100, "update", "admin", "person-a", "workloads.carto.run", 200, w(3, "nowhere"))
	assert.Len(t, BoundedDelay(b.h, nil, bounds, served), 1)
	// Changed and never described.
	b.write(150, "update", "admin", "person-a", "workloads.carto.run", 200, w(4, ""))
	assert.Len(t, BoundedDelay(b.h, nil, bounds, served), 2)
	// Deleted before the bound.
	b.write(160, "delete", "admin", "person-a", "workloads.carto.run", 200, w(4, ""))
	assert.Len(t, BoundedDelay(b.h, nil, bounds, served), 1)
}

func TestBoundedDelayRollout(t *testing.T) {
	chain := func(pauseOnFailure bool, phase, target string) obj {
		return object("ClusterSupplyChain", "", "web", "s1",
			with("spec", map[string]any{"rollout": map[string]any{"pauseOnFailure": pauseOnFailure}}),
			with("status", map[string]any{"rollout": map[string]any{"phase": phase, "target": target},
				"conditions": []any{map[string]any{"type": "RolledOut", "message": "wave 1 of 2: 1 of 2 admitted owner(s) Ready"}}}))
	}
	bounds := DelayBounds{Canary: time.Hour, Observe: time.Hour, Rollout: 60 * time.Second}
	res := "clustersupplychains.carto.run/status"
	b := newBuilder()
	b.h.End = at(500)
	b.write(1, "update", kontinue, "", res, 200, chain(false, "Progressing", "r2"))
	b.write(30, "update", kontinue, "", res, 200, chain(false, "Progressing", "r2"))
	b.write(40, "update", kontinue, "", res, 200, chain(false, "Complete", ""))
	b.write(50, "update", kontinue, "", res, 200, chain(false, "Progressing", "r3"))
	vs := BoundedDelay(b.h, nil, bounds, nil)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "roll-out of r3 still Progressing at the end, 7m30s after it began")
	assert.Contains(t, vs[0].Message, "1 of 2 admitted owner(s) Ready")
	// An outage excuses a stall during the run, not at the end.
	b.h.Outages = []Interval{{at(50), at(480)}}
	assert.Len(t, BoundedDelay(b.h, nil, bounds, nil), 1)
	// Completed after the end (the owners' deletion unblocks it): stuck.
	b.write(510, "update", kontinue, "", res, 200, chain(false, "Complete", ""))
	assert.Len(t, BoundedDelay(b.h, nil, bounds, nil), 1)
	b.h.End = at(520)
	assert.Empty(t, BoundedDelay(b.h, nil, bounds, nil))

	// A roll-out that may halt may wait.
	b = newBuilder()
	b.h.End = at(500)
	b.write(1, "update", kontinue, "", res, 200, chain(true, "Progressing", "r2"))
	assert.Empty(t, BoundedDelay(b.h, nil, bounds, nil))
}
