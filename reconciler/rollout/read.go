package rollout

import (
	"fmt"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/jsonvalue"
)

// Annotations on a chain that steer its roll-out (`kontinue rollout`).
const (
	// AnnotationPaused ("true") stops the waves where they are.
	AnnotationPaused = "kontinue.dev/rollout-paused"
	// AnnotationResume: a new token goes on after a halt.
	AnnotationResume = "kontinue.dev/rollout-resume"
)

// Read decodes a chain's spec.rollout and status.rollout (obj: the chain
// as a map). No policy: nil, nil, nil. err says why the policy cannot be
// used (the chain reports it; its owners render with the live definitions).
func Read(obj map[string]any) (*Compiled, *Status, error) {
	spec, _ := obj["spec"].(map[string]any)
	raw, ok := spec["rollout"]
	if !ok || raw == nil {
		return nil, nil, nil
	}
	var p Policy
	if err := remarshal(raw, &p); err != nil {
		return nil, nil, fmt.Errorf("cannot read spec.rollout: %w", err)
	}
	c, err := Compile(&p)
	if err != nil {
		return nil, nil, fmt.Errorf("spec.rollout: %w", err)
	}
	st := &Status{}
	if status, ok := obj["status"].(map[string]any); ok && status["rollout"] != nil {
		// A status that cannot be read is as none: the live definitions
		// are adopted again.
		_ = remarshal(status["rollout"], st)
	}
	return c, st, nil
}

// remarshal keeps the revisions' definitions exact (integers past 2^53):
// owners render with them.
func remarshal(in, out any) error { return jsonvalue.Remarshal(in, out) }

// Status references of the two owner kinds: the chain an owner's status
// names.
const (
	RefSupplyChain = "supplyChainRef"
	RefDelivery    = "deliveryRef"
)

// ReadOwner reads what deciding needs of an owner (obj: the owner as a
// map) and the chain its status names under ref (RefSupplyChain or
// RefDelivery; "": none). Map lookups only: it runs on every watch event
// of an owner. Labels is a copy.
func ReadOwner(obj map[string]any, ref string) (chain string, o Owner) {
	md, _ := obj["metadata"].(map[string]any)
	o.Namespace, _ = md["namespace"].(string)
	o.Name, _ = md["name"].(string)
	if l, ok := md["labels"].(map[string]any); ok && len(l) > 0 {
		o.Labels = make(map[string]string, len(l))
		for k, v := range l {
			o.Labels[k], _ = v.(string)
		}
	}
	status, _ := obj["status"].(map[string]any)
	if r, ok := status[ref].(map[string]any); ok {
		chain, _ = r["name"].(string)
	}
	o.Revision, _ = status["chainRevision"].(string)
	o.Current = asInt64(status["observedGeneration"]) == asInt64(md["generation"])
	o.Deleting = md["deletionTimestamp"] != nil
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		m, ok := c.(map[string]any)
		switch {
		case !ok:
		case m["type"] == "Ready":
			o.Ready, _ = m["status"].(string)
		case chainReady(m["type"]):
			o.ChainReason = ""
			if m["status"] == "False" {
				o.ChainReason, _ = m["reason"].(string)
			}
		}
	}
	return chain, o
}

// chainReady reports whether a condition's type is an owner's chain
// condition (SupplyChainReady, DeliveryReady).
func chainReady(t any) bool {
	return t == api.WorkloadFlavor.ChainReadyCondition || t == api.DeliverableFlavor.ChainReadyCondition
}

// asInt64 reads a JSON number as decoded into a map (int64 from the API
// machinery, float64 from encoding/json); 0 when absent.
func asInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

// Trim keeps of an owner (obj: as a map) only what ReadOwner reads, for
// either kind, and what a cache needs to tell versions apart: name,
// namespace, UID, resourceVersion, generation, labels, deletionTimestamp;
// the status's chain references, chainRevision, observedGeneration, its
// Ready condition and its chain condition (SupplyChainReady, DeliveryReady).
// The replicas of a shard watch the other shards' owners for roll-outs
// only (reconciler/rollout.go): their cache holds this, not the owner.
func Trim(obj map[string]any) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	keep := map[string]any{}
	for _, k := range []string{"name", "namespace", "uid", "resourceVersion", "generation", "labels", "deletionTimestamp"} {
		if v, ok := md[k]; ok {
			keep[k] = v
		}
	}
	out := map[string]any{"metadata": keep}
	status, _ := obj["status"].(map[string]any)
	if status == nil {
		return out
	}
	st := map[string]any{}
	for _, k := range []string{RefSupplyChain, RefDelivery} {
		if r, ok := status[k].(map[string]any); ok {
			st[k] = map[string]any{"name": r["name"]}
		}
	}
	for _, k := range []string{"chainRevision", "observedGeneration"} {
		if v, ok := status[k]; ok {
			st[k] = v
		}
	}
	// The last of each, as ReadOwner reads them.
	var ready, chain any
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		m, ok := c.(map[string]any)
		switch {
		case !ok:
		case m["type"] == "Ready":
			ready = map[string]any{"type": "Ready", "status": m["status"]}
		case chainReady(m["type"]):
			chain = nil // only its reason when False is read
			if m["status"] == "False" {
				chain = map[string]any{"type": m["type"], "status": "False", "reason": m["reason"]}
			}
		}
	}
	var kept []any
	for _, c := range []any{chain, ready} {
		if c != nil {
			kept = append(kept, c)
		}
	}
	if kept != nil {
		st["conditions"] = kept
	}
	out["status"] = st
	return out
}
