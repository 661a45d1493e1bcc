package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNoFights(t *testing.T) {
	shadow := func() obj {
		return object("Deployment", "t1", "app-last-good", "d1", stamped("app", LabelShadow, "true"))
	}
	bounds := QuietBounds{Object: 3, Status: 5, Final: 1, QuietFrom: at(100)}

	t.Run("a shadow written again and again with nothing changed", func(t *testing.T) {
		b := newBuilder()
		b.mark(1, "t1")
		for i := range 10 {
			b.write(2+float64(i)/10, "patch", kontinue, sa, "deployments.apps", 200, shadow())
			// The deployment controller sets its annotation back each time.
			b.write(2.05+float64(i)/10, "update", "system:kube-controller-manager", "", "deployments.apps", 200, shadow())
		}
		vs := NoFights(b.h, bounds)
		require.Len(t, vs, 1)
		assert.Contains(t, vs[0].Message, "10 times")
		assert.Equal(t, "deployments.apps/t1/app-last-good", vs[0].Object)
	})

	t.Run("each write follows a change of its namespace", func(t *testing.T) {
		b := newBuilder()
		for i := range 10 {
			b.mark(float64(i), "t1")
			b.write(float64(i)+0.5, "patch", kontinue, sa, "deployments.apps", 200, shadow())
			b.write(float64(i)+0.6, "patch", kontinue, sa, "deployments.apps", 200, shadow())
		}
		assert.Empty(t, NoFights(b.h, bounds))
	})

	t.Run("a change in another namespace does not excuse it", func(t *testing.T) {
		b := newBuilder()
		for i := range 10 {
			b.mark(float64(i), "t2")
			b.write(float64(i)+0.5, "patch", kontinue, sa, "deployments.apps", 200, shadow())
		}
		assert.Len(t, NoFights(b.h, bounds), 1)
	})

	t.Run("failed writes and deletes do not count; statuses have their own bound", func(t *testing.T) {
		b := newBuilder()
		for i := range 10 {
			b.write(float64(i), "patch", kontinue, sa, "deployments.apps", 403, nil)
		}
		for i := range 5 {
			b.write(20+float64(i), "update", kontinue, "", "workloads.carto.run/status", 200, object("Workload", "t1", "app", "w1"))
		}
		assert.Empty(t, NoFights(b.h, bounds))
		b.write(30, "update", kontinue, "", "workloads.carto.run/status", 200, object("Workload", "t1", "app", "w1"))
		assert.Len(t, NoFights(b.h, bounds), 1)
	})

	t.Run("the final quiet window", func(t *testing.T) {
		b := newBuilder()
		b.mark(99, "")
		b.write(101, "patch", kontinue, sa, "deployments.apps", 200, shadow())
		assert.Empty(t, NoFights(b.h, bounds))
		b.write(130, "patch", kontinue, sa, "deployments.apps", 200, shadow())
		vs := NoFights(b.h, bounds)
		require.Len(t, vs, 1)
		assert.Contains(t, vs[0].Message, "final quiet window")
		// What the end's deletions make Kontinue write is after the window.
		b.h.End = at(120)
		assert.Empty(t, NoFights(b.h, bounds))
	})

	t.Run("the final quiet window: a controller finishing its roll-out late", func(t *testing.T) {
		// Robustness seed 201: a Deployment became available 6 s into the
		// window; Kontinue wrote its owner's status and the next step.
		app := func() obj { return object("Deployment", "t1", "app", "d2", stamped("app")) }
		b := newBuilder()
		b.mark(99, "")
		b.write(99.5, "create", kontinue, sa, "deployments.apps", 201, app())
		b.write(101, "patch", kontinue, sa, "deployments.apps", 200, shadow())
		b.write(105, "update", "system:kube-controller-manager", "", "deployments.apps/status", 200, app())
		b.write(106, "patch", kontinue, sa, "deployments.apps", 200, shadow())
		assert.Empty(t, NoFights(b.h, bounds), "the write after the other Deployment moved is explained")
		b.write(107, "patch", kontinue, sa, "deployments.apps", 200, shadow())
		assert.Len(t, NoFights(b.h, bounds), 1, "the one after it is not")

		// A controller writing the object itself excuses nothing: a fight.
		b = newBuilder()
		b.mark(99, "")
		b.write(99.5, "create", kontinue, sa, "deployments.apps", 201, shadow())
		for i := range 2 {
			b.write(101+float64(i), "patch", kontinue, sa, "deployments.apps", 200, shadow())
			b.write(101.5+float64(i), "update", "system:kube-controller-manager", "", "deployments.apps", 200, shadow())
		}
		vs := NoFights(b.h, bounds)
		require.Len(t, vs, 1)
		assert.Contains(t, vs[0].Message, "final quiet window")
	})
}

func TestQuietReconciles(t *testing.T) {
	at := time.Now()
	rs := []Reconciles{
		{Replica: "r1", Before: map[string]float64{"Workload success": 10}, After: map[string]float64{"Workload success": 25, "Deliverable error": 3}},
		{Replica: "rb", Before: map[string]float64{"Workload success": 4}, After: map[string]float64{"Workload success": 4}},
	}
	vs, note := QuietReconciles(rs, 3, 6, at)
	assert.Empty(t, vs, "18 reconciles for 3 owners at 6 each")
	assert.Equal(t, "reconciles in the quiet window: r1 18 (of 28 since it started: Deliverable error 3, Workload success 15), rb 0 (of 4 since it started)", note)

	vs, _ = QuietReconciles(rs, 2, 6, at)
	require.Len(t, vs, 1, "18 reconciles for 2 owners at 6 each")
	assert.Equal(t, 2, vs[0].Invariant)
	assert.Equal(t, "replica r1", vs[0].Object)
	assert.Contains(t, vs[0].Message, "18 reconciles in the final quiet window, more than 12 (6 for each of 2 owners): Deliverable error 3, Workload success 15")

	vs, note = QuietReconciles(nil, 2, 6, at)
	assert.Empty(t, vs)
	assert.Empty(t, note, "nothing counted (a recheck of a kept run)")
}

func TestQuietOwners(t *testing.T) {
	from, to := at(100), at(115)
	lines := func(key, replica string, n int, start float64) []Reconciled {
		var out []Reconciled
		for i := range n {
			out = append(out, Reconciled{Replica: replica, At: at(start + float64(i)), Key: key, Outcome: "requeue"})
		}
		return out
	}

	t.Run("one owner looping among quiet ones", func(t *testing.T) {
		var ls []Reconciled
		ls = append(ls, lines("Deliverable/t1/app", "rb", 14, 101)...)
		for i := range 20 {
			ls = append(ls, lines("Workload/t2/w"+string(rune('a'+i)), "r1", 1, 102)...)
		}
		vs, note := QuietOwners(nil, ls, from, to, 8)
		require.Len(t, vs, 1)
		assert.Equal(t, "Deliverable/t1/app", vs[0].Object)
		assert.Contains(t, vs[0].Message, "14 times")
		assert.Contains(t, note, "21, most: Deliverable/t1/app 14 (requeue 14; on rb)")
	})

	t.Run("replicas are counted together", func(t *testing.T) {
		ls := append(lines("Workload/t1/app", "r1", 5, 101), lines("Workload/t1/app", "r2", 5, 106)...)
		vs, _ := QuietOwners(nil, ls, from, to, 8)
		require.Len(t, vs, 1)
		assert.Contains(t, vs[0].Message, "on r1 r2")
	})

	t.Run("retries on a growing backoff are not a loop", func(t *testing.T) {
		// Seed 1307: a reconcile request resets the backoff of a render
		// that never finishes; its retries double their gaps.
		var ls []Reconciled
		for _, sec := range []float64{99, 109, 109.12, 109.33, 109.73, 110.54, 112.14, 115.35, 121.76} {
			ls = append(ls, Reconciled{Replica: "r1", At: at(sec), Key: "Workload/t1/app", Outcome: "error"})
		}
		vs, note := QuietOwners(nil, ls, from, to, 3)
		assert.Empty(t, vs, "%v", vs)
		assert.Contains(t, note, "Workload/t1/app 3 (error 3; on r1) and 3 retries on a growing backoff")

		// The same failures at a steady pace: a loop.
		ls = nil
		for i := range 12 {
			ls = append(ls, Reconciled{Replica: "r1", At: at(100.5 + float64(i)), Key: "Workload/t1/app", Outcome: "error"})
		}
		vs, _ = QuietOwners(nil, ls, from, to, 8)
		require.Len(t, vs, 1)
		assert.Contains(t, vs[0].Message, "reconciled 12 times")

		// Growing gaps after successes are news, not retries: counted.
		ls = nil
		for _, sec := range []float64{100, 100.1, 100.3, 100.7, 101.5, 103.1, 106.3} {
			ls = append(ls, Reconciled{Replica: "r1", At: at(sec), Key: "Workload/t1/app", Outcome: "success"})
		}
		vs, _ = QuietOwners(nil, ls, from, to, 6)
		require.Len(t, vs, 1)

		// Each replica backs off on its own queue.
		ls = nil
		for i, sec := range []float64{100, 100.1, 100.3, 100.7, 101.5, 103.1, 106.3} {
			ls = append(ls, Reconciled{Replica: []string{"r1", "r2"}[i%2], At: at(sec), Key: "Workload/t1/app", Outcome: "error"})
		}
		vs, _ = QuietOwners(nil, ls, from, to, 6)
		require.Len(t, vs, 1, "one chain of doubling gaps across two replicas is no replica's backoff")
	})

	t.Run("reconciles outside the window do not count", func(t *testing.T) {
		ls := append(lines("Workload/t1/app", "r1", 20, 70), lines("Workload/t1/app", "r1", 3, 116)...)
		ls = append(ls, lines("Workload/t1/app", "r1", 8, 100)...)
		vs, note := QuietOwners(nil, ls, from, to, 8)
		assert.Empty(t, vs)
		assert.Contains(t, note, "Workload/t1/app 8")
	})

	t.Run("reconciles right after another writer's write in the namespace are its news", func(t *testing.T) {
		b := newBuilder()
		var ls []Reconciled
		for i := range 3 { // three Jobs finish, each status written twice
			for j := range 2 {
				sec := 105 + float64(i)*0.03 + float64(j)*0.01
				b.write(sec, "update", "system:kube-controller-manager", "", "jobs.batch/status", 200, object("Job", "t1", "app-test", "j1"))
				ls = append(ls, Reconciled{Replica: "r1", At: at(sec + 0.005), Key: "Workload/t1/app", Outcome: "success"})
			}
		}
		// A loop beside them, once a second: only those next to a write
		// are excused.
		ls = append(ls, lines("Workload/t1/app", "r1", 14, 100.5)...)
		vs, note := QuietOwners(b.h, ls, from, to, 8)
		require.Len(t, vs, 1)
		assert.Contains(t, vs[0].Message, "reconciled 13 times")
		assert.Contains(t, note, "and 7 after another writer's write")

		// The same writes by Kontinue, or in another namespace, excuse nothing.
		b = newBuilder()
		b.write(105, "update", kontinue, "", "jobs.batch/status", 200, object("Job", "t1", "app-test", "j1"))
		b.write(106, "update", "system:kube-controller-manager", "", "jobs.batch/status", 200, object("Job", "t2", "app-test", "j2"))
		vs, _ = QuietOwners(b.h, lines("Workload/t1/app", "r1", 9, 101), from, to, 8)
		require.Len(t, vs, 1)
	})

	t.Run("none", func(t *testing.T) {
		vs, note := QuietOwners(nil, nil, from, to, 8)
		assert.Empty(t, vs)
		assert.Equal(t, "owners reconciled in the quiet window: none", note)
	})
}
