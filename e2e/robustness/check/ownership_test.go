package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

const sa = "system:serviceaccount:t1:builder"

func TestOwnership(t *testing.T) {
	cm := func(uid string, opts ...func(obj)) obj { return object("ConfigMap", "t1", "app-src", uid, opts...) }
	cases := []struct {
		name     string
		history  func(b *builder)
		want     int
		contains string
	}{
		{"Kontinue's own object, written again", func(b *builder) {
			b.write(1, "create", kontinue, sa, "configmaps", 201, cm("u1", stamped("src")))
			b.write(2, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("src")))
			b.write(3, "delete", kontinue, sa, "configmaps", 200, cm("u1", stamped("src")))
		}, 0, ""},
		{"a person's ConfigMap taken over by an account without get", func(b *builder) {
			b.write(1, "create", "admin", "person-a", "configmaps", 201, cm("u1"))
			b.write(2, "create", kontinue, sa, "configmaps", 409, nil)
			b.write(3, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("src")))
			b.write(4, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("src")))
		}, 1, "did not create it and it was not handed over: created"},
		{"a person's object carrying the Workload's labels, no controller", func(b *builder) {
			b.write(1, "create", "admin", "person-a", "configmaps", 201,
				cm("u1", labels(LabelStamped, "true", LabelWorkload, "app", LabelStep, "src")))
			b.write(2, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("src")))
		}, 1, "no controller"},
		{"handed over with adopt-by", func(b *builder) {
			b.write(1, "create", "admin", "person-a", "configmaps", 201, cm("u1"))
			b.write(2, "update", "admin", "person-a", "configmaps", 200, cm("u1", annotations(AnnotationAdoptBy, "Workload/app")))
			b.write(3, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("src")))
		}, 0, ""},
		{"adopt-by for another owner", func(b *builder) {
			b.write(1, "create", "admin", "person-a", "configmaps", 201, cm("u1", annotations(AnnotationAdoptBy, "Workload/other")))
			b.write(3, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("src")))
		}, 1, "adopt-by Workload/other"},
		{"a controller reference set by someone who may write it", func(b *builder) {
			b.write(1, "create", "admin", "person-a", "configmaps", 201, cm("u1", controlledBy("Workload", "app", "w1")))
			b.write(2, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("src")))
		}, 0, ""},
		{"two steps of one owner writing one object", func(b *builder) {
			b.write(1, "create", kontinue, sa, "configmaps", 201, cm("u1", stamped("src")))
			b.write(2, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("config")))
			b.write(3, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("src")))
		}, 1, "but it was created for"},
		{"another owner's object", func(b *builder) {
			b.write(1, "create", kontinue, sa, "configmaps", 201, cm("u1", stamped("src")))
			b.write(2, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("src"), controlledBy("Workload", "other", "w2")))
		}, 1, "Workload/other"},
		{"a primary written as its shadow", func(b *builder) {
			b.write(1, "create", kontinue, sa, "configmaps", 201, cm("u1", stamped("src")))
			b.write(2, "patch", kontinue, sa, "configmaps", 200, cm("u1", stamped("src", LabelShadow, "true")))
		}, 1, "(shadow)"},
		{"a person's object deleted", func(b *builder) {
			b.write(1, "create", "admin", "person-a", "configmaps", 201, cm("u1"))
			b.write(2, "delete", kontinue, sa, "configmaps", 200, cm("u1"))
		}, 1, "Kontinue deleted it"},
		{"a new incarnation of the name is a person's", func(b *builder) {
			b.write(1, "create", kontinue, sa, "configmaps", 201, cm("u1", stamped("src")))
			b.write(2, "delete", "admin", "person-a", "configmaps", 200, cm("u1", stamped("src")))
			b.write(3, "create", "admin", "person-a", "configmaps", 201, cm("u2"))
			b.write(4, "patch", kontinue, sa, "configmaps", 200, cm("u2", stamped("src")))
		}, 1, "created"},
		{"others write Kontinue's object; its status is its own", func(b *builder) {
			b.write(1, "create", kontinue, sa, "configmaps", 201, cm("u1", stamped("src")))
			b.write(2, "update", "admin", "person-a", "configmaps", 200, cm("u1", stamped("src")))
			b.write(3, "update", kontinue, "", "workloads.carto.run/status", 200, object("Workload", "t1", "app", "w1"))
		}, 0, ""},
		{"a person's Runnable is stamped over", func(b *builder) {
			b.write(1, "create", "admin", "person-a", "runnables.carto.run", 201, object("Runnable", "t1", "lint", "r1"))
			b.write(2, "patch", kontinue, sa, "runnables.carto.run", 200, object("Runnable", "t1", "lint", "r1", stamped("lint")))
		}, 1, ""},
		{"Kontinue's generated ClusterRunTemplate (cluster-scoped, no owner reference), updated and deleted", func(b *builder) {
			b.write(1, "create", kontinue, "", "clusterruntemplates.carto.run", 201, crt("t1-app-run-0a1b", "c1"))
			b.write(2, "patch", kontinue, "", "clusterruntemplates.carto.run", 200, crt("t1-app-run-0a1b", "c1"))
			b.write(3, "delete", kontinue, "", "clusterruntemplates.carto.run", 200, crt("t1-app-run-0a1b", "c1"))
		}, 0, ""},
		{"the platform's copy of a generated ClusterRunTemplate, labels included, deleted when its owner is gone", func(b *builder) {
			b.write(1, "create", kontinue, "", "clusterruntemplates.carto.run", 201, crt("t1-app-run-0a1b", "c1"))
			b.write(2, "create", "admin", "platform", "clusterruntemplates.carto.run", 201, crt("pin-1", "c2"))
			b.write(3, "delete", "admin", "person-a", "workloads.carto.run", 200, object("Workload", "t1", "app", "w1"))
			b.write(4, "delete", kontinue, "", "clusterruntemplates.carto.run", 200, crt("t1-app-run-0a1b", "c1"))
			b.write(4, "delete", kontinue, "", "clusterruntemplates.carto.run", 200, crt("pin-1", "c2"))
		}, 1, "Kontinue deleted it (as itself) but did not create it: created"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBuilder()
			c.history(b)
			vs, unjudged := Ownership(b.h)
			assert.Zero(t, unjudged)
			assert.Len(t, vs, c.want, "%v", vs)
			for _, v := range vs {
				assert.Equal(t, 1, v.Invariant)
				assert.Contains(t, v.Message, c.contains)
			}
		})
	}
}

// crt is a ClusterRunTemplate as Kontinue generates it for step run of
// Workload t1/app: cluster-scoped, labelled for the owner, no owner
// reference.
func crt(name, uid string) obj {
	return object("ClusterRunTemplate", "", name, uid, labels(LabelStamped, "true", LabelWorkload, "app",
		"carto.run/workload-namespace", "t1", LabelStep, "run"))
}

func TestOwnershipUnjudgedWithoutCreation(t *testing.T) {
	b := newBuilder()
	b.write(2, "patch", kontinue, sa, "configmaps", 200, object("ConfigMap", "t1", "x", "u1", stamped("src")))
	vs, unjudged := Ownership(b.h)
	assert.Empty(t, vs)
	assert.Equal(t, 1, unjudged)
}
