package check

import (
	"time"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deployment is step deploy's object on input set set.
func deployment(set string, extra ...string) obj {
	return object("Deployment", "t1", "app", "d1", stamped("deploy", extra...), annotations(AnnotationInputSet, set))
}

// ownerStatus is Workload app's status with step deploy's provenance.
func ownerStatus(prov map[string]any) obj {
	st := map[string]any{"name": "deploy", "stampedRef": map[string]any{"kind": "Deployment", "name": "app", "resource": "deployments.apps"}}
	if prov != nil {
		st["provenance"] = prov
	}
	return object("Workload", "t1", "app", "w1", with("status", map[string]any{"resources": []any{st}}))
}

func set(digest, outcome string) map[string]any {
	return map[string]any{"digest": digest, "outcome": outcome}
}

func TestEndsRecorded(t *testing.T) {
	gated := func(tmpl string) bool { return tmpl == "tmpl-deploy" }
	status := "workloads.carto.run/status"

	t.Run("c2 completes while c3 is held: recorded, then c3 goes in", func(t *testing.T) {
		b := newBuilder()
		b.write(1, "create", kontinue, sa, "deployments.apps", 201, deployment("c1"))
		b.write(2, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c1", "Succeeded")}))
		b.write(3, "patch", kontinue, sa, "deployments.apps", 200, deployment("c2"))
		b.write(4, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c1", "Succeeded"),
			"latest": set("c2", "Processing"), "held": set("c3", "Held")}))
		b.write(5, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c2", "Succeeded"), "held": set("c3", "Held")}))
		b.write(6, "patch", kontinue, sa, "deployments.apps", 200, deployment("c3"))
		assert.Empty(t, EndsRecorded(b.h, gated))
	})

	t.Run("c2 completes and c3 goes in at once: c2 is lost", func(t *testing.T) {
		b := newBuilder()
		b.write(1, "create", kontinue, sa, "deployments.apps", 201, deployment("c1"))
		b.write(2, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c1", "Succeeded")}))
		b.write(3, "patch", kontinue, sa, "deployments.apps", 200, deployment("c2"))
		b.write(4, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c1", "Succeeded"),
			"latest": set("c2", "Processing"), "held": set("c3", "Held")}))
		b.write(6, "patch", kontinue, sa, "deployments.apps", 200, deployment("c3"))
		vs := EndsRecorded(b.h, gated)
		require.Len(t, vs, 1)
		assert.Contains(t, vs[0].Message, "input set c3 went in while the end of c2 was not recorded")
		assert.Contains(t, vs[0].Message, "latest c2 Processing")
	})

	t.Run("a patch answered 504 was done: the controller's next write shows c2 (seed 1035)", func(t *testing.T) {
		b := newBuilder()
		b.write(1, "create", kontinue, sa, "deployments.apps", 201, deployment("c1"))
		b.write(2, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c1", "Succeeded")}))
		b.attempt(3, "patch", kontinue, sa, "deployments.apps", 504, deployment("c2"))
		b.write(4, "update", "system:kube-controller-manager", "", "deployments.apps/status", 200, deployment("c2"))
		b.write(5, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c2", "Succeeded")}))
		b.write(6, "patch", kontinue, sa, "deployments.apps", 200, deployment("c3"))
		assert.Empty(t, EndsRecorded(b.h, gated))

		// Not done (the next state is still c1): c2 was never stamped.
		b = newBuilder()
		b.write(1, "create", kontinue, sa, "deployments.apps", 201, deployment("c1"))
		b.attempt(3, "patch", kontinue, sa, "deployments.apps", 504, deployment("c2"))
		b.write(4, "update", "system:kube-controller-manager", "", "deployments.apps/status", 200, deployment("c1"))
		b.write(5, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c2", "Succeeded")}))
		vs := EndsRecorded(b.h, gated)
		require.Len(t, vs, 1)
		assert.Contains(t, vs[0].Message, "which no object of the step was stamped with before")
	})

	t.Run("a failure recorded first", func(t *testing.T) {
		b := newBuilder()
		b.write(1, "create", kontinue, sa, "deployments.apps", 201, deployment("c1"))
		b.write(2, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"latest": set("c1", "Failed")}))
		b.write(3, "patch", kontinue, sa, "deployments.apps", 200, deployment("c2"))
		assert.Empty(t, EndsRecorded(b.h, gated))
	})

	t.Run("ungated templates, shadows and statuses without provenance are not judged", func(t *testing.T) {
		b := newBuilder()
		b.write(1, "create", kontinue, sa, "deployments.apps", 201, deployment("c1"))
		b.write(2, "update", kontinue, "", status, 200, ownerStatus(nil))
		b.write(3, "patch", kontinue, sa, "deployments.apps", 200, deployment("c2"))
		b.write(4, "create", kontinue, sa, "deployments.apps", 201,
			object("Deployment", "t1", "app-last-good", "d2", stamped("deploy", LabelShadow, "true"), annotations(AnnotationInputSet, "c0")))
		b.write(5, "patch", kontinue, sa, "deployments.apps", 200,
			object("Deployment", "t1", "app-last-good", "d2", stamped("deploy", LabelShadow, "true"), annotations(AnnotationInputSet, "c1")))
		assert.Empty(t, EndsRecorded(b.h, gated))
		assert.Empty(t, EndsRecorded(b.h, func(string) bool { return false }))
	})

	t.Run("a write lost at an API server kill is not judged", func(t *testing.T) {
		// The stamp of c2 was committed as the API server was killed at
		// 2.5 s, before its audit line: the log has neither it nor, for
		// (a), the move from c1.
		b := newBuilder()
		b.write(1, "create", kontinue, sa, "deployments.apps", 201, deployment("c1"))
		b.write(2, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c1", "Succeeded")}))
		b.write(10, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c2", "Succeeded"), "held": set("c3", "Held")}))
		b.write(11, "patch", kontinue, sa, "deployments.apps", 200, deployment("c3"))
		require.Len(t, EndsRecorded(b.h, gated), 2, "without the stop, both (a) and (b) fail")
		b.h.Stops = []time.Time{at(2.5)}
		assert.Empty(t, EndsRecorded(b.h, gated))
		b.h.Stops = []time.Time{at(0.5)} // before the writes judged: no excuse for (a)
		assert.Len(t, EndsRecorded(b.h, gated), 1)
	})

	t.Run("outputs from a set never stamped", func(t *testing.T) {
		b := newBuilder()
		b.write(1, "create", kontinue, sa, "deployments.apps", 201, deployment("c1"))
		b.write(2, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c1", "Succeeded")}))
		b.write(3, "update", kontinue, "", status, 200, ownerStatus(map[string]any{"current": set("c9", "Succeeded")}))
		vs := EndsRecorded(b.h, gated)
		require.Len(t, vs, 1)
		assert.Contains(t, vs[0].Message, "input set c9, which no object of the step was stamped with")
	})
}
