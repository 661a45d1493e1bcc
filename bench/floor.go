package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"kontinue.dev/kontinue/reconciler/stamp"
)

// measureFloor times the minimal writes that converging the workloads
// needs, with Kontinue stopped: one create per stamped object and one status
// update per workload, nothing else. The clients are set up as Kontinue's
// are (same QPS and burst; stamped objects written by a client that
// impersonates the namespace's default service account, built by the same
// code; status written by the controller's own client), and `workers`
// goroutines each take a workload, create its three objects, then write its
// status, as Kontinue's workers do. The objects and statuses are copies of
// what Kontinue wrote, so request sizes match.
func (b *bench) measureFloor(ctx context.Context) error {
	o, res := b.o, b.res
	logf("floor: preparing %d workloads in namespace %s (not timed)", o.n, floorNS)
	objs, err := parseObjects(namespaceYAML(floorNS))
	if err != nil {
		return err
	}
	if err := applyAll(ctx, b.dyn, objs); err != nil {
		return err
	}
	// What Kontinue stamped, by name.
	list, err := b.dyn.Resource(configMapGVR).Namespace(benchNS).List(ctx, metav1.ListOptions{LabelSelector: stampedSelector})
	if err != nil {
		return err
	}
	stamped := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		stamped[list.Items[i].GetName()] = &list.Items[i]
	}
	owners := make([]*unstructured.Unstructured, o.n)
	if err := parallel(ctx, o.n, 16, func(i int) error {
		u, err := create(ctx, b.dyn, workload(floorNS, i, false))
		owners[i] = u
		return err
	}); err != nil {
		return fmt.Errorf("creating the floor's workloads: %w", err)
	}
	type job struct {
		objs  []*unstructured.Unstructured
		owner *unstructured.Unstructured
	}
	jobs := make([]job, o.n)
	for i, owner := range owners {
		name := workloadName(i)
		src := b.watcher.workload(benchNS, name)
		if src == nil {
			return fmt.Errorf("workload %s/%s not in the bench's cache", benchNS, name)
		}
		owner = owner.DeepCopy()
		owner.Object["status"] = renamespace(src.Object["status"])
		j := job{owner: owner}
		for _, suffix := range []string{"-source", "-image", "-" + lastStep} {
			cm := stamped[name+suffix]
			if cm == nil {
				return fmt.Errorf("ConfigMap %s/%s%s not found", benchNS, name, suffix)
			}
			j.objs = append(j.objs, copyStamped(cm, owner))
		}
		jobs[i] = j
	}

	// The API server's capacity, never Kontinue's limits: unthrottled
	// writers, as many as saturate it.
	limited := rest.CopyConfig(b.cfg)
	limited.QPS, limited.Burst = 1e6, 1e6
	ownerClient, err := dynamic.NewForConfig(limited)
	if err != nil {
		return err
	}
	stamper, err := stamp.NewClients(limited, 0).For(floorNS, "default")
	if err != nil {
		return err
	}
	a0, _ := b.apiserver.scrape(ctx)
	cpu := b.cpuMeter()
	logf("floor: %d creates and %d status updates, %d unthrottled writers", o.n*stepsPerWorkload, o.n, o.floorWriters)
	start := time.Now()
	err = parallel(ctx, o.n, o.floorWriters, func(i int) error {
		j := jobs[i]
		for _, cm := range j.objs {
			if _, err := stamper.Resource(configMapGVR).Namespace(floorNS).Create(ctx, cm, metav1.CreateOptions{FieldManager: "kontinue"}); err != nil {
				return err
			}
		}
		_, err := ownerClient.Resource(workloadGVR).Namespace(floorNS).UpdateStatus(ctx, j.owner, metav1.UpdateOptions{FieldManager: "kontinue"})
		return err
	})
	if err != nil {
		return err
	}
	res.Floor.Seconds = round(time.Since(start).Seconds(), 2)
	res.Floor.Writes = o.n * (stepsPerWorkload + 1)
	res.Floor.CPUSeconds = cpu.read()
	if a1, _ := b.apiserver.scrape(ctx); a0 != nil && a1 != nil {
		res.Floor.APIServerWrites = apiserverWrites(a0, a1)
	}
	logf("floor: %.1fs", res.Floor.Seconds)
	return nil
}

// copyStamped is a stamped ConfigMap moved to the floor's namespace and
// owned by owner, without what the server sets.
func copyStamped(cm, owner *unstructured.Unstructured) *unstructured.Unstructured {
	c := cm.DeepCopy()
	md := c.Object["metadata"].(map[string]any)
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"} {
		delete(md, f)
	}
	c.SetNamespace(floorNS)
	l := c.GetLabels()
	l["carto.run/workload-namespace"] = floorNS
	c.SetLabels(l)
	refs := c.GetOwnerReferences()
	for i := range refs {
		refs[i].UID = owner.GetUID()
	}
	c.SetOwnerReferences(refs)
	return c
}

// renamespace copies a status, pointing its stamped refs at the floor's
// namespace.
func renamespace(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			if k == "namespace" && x == benchNS {
				out[k] = floorNS
				continue
			}
			out[k] = renamespace(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = renamespace(x)
		}
		return out
	default:
		return v
	}
}
