// Package status builds the status Kontinue writes on owners: the
// Cartographer-compatible resources[] entries, their outputs, and the
// conditions in the contract's order. Everything here is pure.
package status

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Condition statuses.
const (
	True    = metav1.ConditionTrue
	False   = metav1.ConditionFalse
	Unknown = metav1.ConditionUnknown
)

// Condition types.
const (
	Ready              = "Ready"
	ResourcesSubmitted = "ResourcesSubmitted"
	ResourcesHealthy   = "ResourcesHealthy"
	ResourceSubmitted  = "ResourceSubmitted"
	Healthy            = "Healthy"
	TemplatesReady     = "TemplatesReady"
)

// OwnerStatus is the status of a Workload or Deliverable.
type OwnerStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	SupplyChainRef     *ObjectRef         `json:"supplyChainRef,omitempty"`
	DeliveryRef        *ObjectRef         `json:"deliveryRef,omitempty"`
	Resources          []Resource         `json:"resources,omitempty"`
	// Orphans are objects no step stamps any more that could not be
	// deleted yet: kept so that the deletion is retried, not leaked.
	Orphans []StampedRef `json:"orphans,omitempty"`
	// LastHandledReconcileAt is the value of the reconcile request
	// annotation (annotations.ReconcileRequest) this status was computed
	// after: `kontinue reconcile --wait` waits for it (as Flux's
	// lastHandledReconcileAt).
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// GeneratedRunTemplates are the ClusterRunTemplates Kontinue created
	// for the owner's runnable: true steps. Cluster-scoped, they carry no
	// owner reference: this record (only Kontinue writes an owner's
	// status) is what proves an object is Kontinue's. Labels, which
	// anyone can copy, prove nothing.
	GeneratedRunTemplates []GeneratedRunTemplate `json:"generatedRunTemplates,omitempty"`
	// ChainRevision is the revision of its chain's definitions (the chain
	// and its templates, by content hash) the owner rendered with, when
	// its chain declares a roll-out policy (reconciler/rollout).
	ChainRevision string `json:"chainRevision,omitempty"`
}

// GeneratedRunTemplate records one ClusterRunTemplate Kontinue generated:
// it updates and deletes the object of that name only while its UID is
// this one. A record without UID is one about to be created: the object
// Kontinue creates carries Claim (AnnotationClaim), so that a crash
// between the create and the status write does not lose it.
type GeneratedRunTemplate struct {
	Step  string    `json:"step"`
	Name  string    `json:"name"`
	UID   types.UID `json:"uid,omitempty"`
	Claim string    `json:"claim,omitempty"`
}

// ObjectRef names a cluster-scoped object.
type ObjectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Resource is the status of one step.
type Resource struct {
	Name           string             `json:"name"`
	StampedRef     *StampedRef        `json:"stampedRef,omitempty"`
	StampedObjects []StampedRef       `json:"stampedObjects,omitempty"`
	TemplateRef    *TemplateRef       `json:"templateRef,omitempty"`
	Inputs         []Input            `json:"inputs,omitempty"`
	Outputs        []Output           `json:"outputs,omitempty"`
	Conditions     []metav1.Condition `json:"conditions,omitempty"`
	// InputDigest identifies the input set that produced the outputs: the
	// digest Kontinue records on the stamped object it applied.
	InputDigest string `json:"inputDigest,omitempty"`
	// OutputValues are the outputs of the last success, kept for steps with
	// success rules: downstream steps receive them while this step works on
	// newer inputs or has failed on them.
	OutputValues map[string]any `json:"outputValues,omitempty"`
	// HeldInputDigest is the newest input set waiting for the object to
	// finish with the one it has.
	HeldInputDigest string `json:"heldInputDigest,omitempty"`
	// ShadowRef points at the "last good" copy stamped from the last input
	// set that succeeded, while the primary object fails (seed 004).
	ShadowRef *StampedRef `json:"shadowRef,omitempty"`
	// ServedBy says which object the step's outputs come from: "primary" or
	// "shadow" (set for steps that can have a shadow).
	ServedBy string `json:"servedBy,omitempty"`
	// LastGoodObject is the object rendered from the last input set that
	// succeeded: what a shadow is stamped from.
	LastGoodObject map[string]any `json:"lastGoodObject,omitempty"`
	// AppliedInputDigest is the input set on a gated step's object while it
	// is not the last good one, AppliedObject the object rendered from it
	// (steps that can have a shadow) and AppliedOutputValues the outputs it
	// publishes when it succeeds (a deployment's inputs): what its success
	// records when it is seen only once a newer set waits.
	AppliedInputDigest  string         `json:"appliedInputDigest,omitempty"`
	AppliedObject       map[string]any `json:"appliedObject,omitempty"`
	AppliedOutputValues map[string]any `json:"appliedOutputValues,omitempty"`
	// ProcessingInputDigest is the input set a gated step's object has
	// been working on since ProcessingSince, without succeeding or failing:
	// the clock of the template's progress deadline.
	ProcessingInputDigest string       `json:"processingInputDigest,omitempty"`
	ProcessingSince       *metav1.Time `json:"processingSince,omitempty"`
	// LastHandledRetry is the owner's kontinue.dev/retry token the step
	// last handled (an immutable step): a token is acted on once.
	LastHandledRetry string `json:"lastHandledRetry,omitempty"`
	// Provenance: the input values behind the outputs, and the newer ones
	// the step works on or holds (provenance.go).
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Carried is what a step keeps of its previous status r until it stamps
// again: everything but what each reconcile decides afresh (its
// conditions, the inputs it holds back) and its inputs, which are the
// chain's. A new field is carried unless it is reset here.
func (r Resource) Carried(inputs []Input) Resource {
	c := r
	c.Inputs = inputs
	c.Conditions, c.HeldInputDigest = nil, ""
	return c
}

// StampedRef points at a stamped object.
type StampedRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Resource is the plural with its group, e.g. "configmaps", "tests.test.run".
	Resource string `json:"resource,omitempty"`
}

// TemplateRef points at the template a step used.
type TemplateRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// Input names an upstream step.
type Input struct {
	Name string `json:"name"`
}

// Output is one output of a step as shown to people: a YAML preview cut to
// 1024 characters and the digest of the whole YAML.
type Output struct {
	Name               string      `json:"name"`
	Preview            string      `json:"preview"`
	Digest             string      `json:"digest"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

// PreviewLimit is where previews are cut.
const PreviewLimit = 1024

// Preview renders a value as its preview and digest. The YAML is what
// Cartographer writes (yaml.v3, whose default indent is four spaces), so
// that digests stay the same across a migration and tools comparing them
// keep working.
func Preview(v any) (preview, digest string) {
	b, err := yaml.Marshal(v)
	if err != nil {
		b = []byte("<unprintable>")
	}
	sum := sha256.Sum256(b)
	preview = string(b)
	if len(preview) > PreviewLimit {
		preview = preview[:PreviewLimit]
	}
	return preview, "sha256:" + hex.EncodeToString(sum[:])
}

// outputRank orders the outputs Cartographer knows as it lists them (a
// source's url before its revision); other names follow, sorted.
var outputRank = map[string]int{"url": 1, "revision": 2, "image": 3, "config": 4}

// Outputs renders output values in Cartographer's order, keeping the
// previous lastTransitionTime of each output whose digest did not change.
func Outputs(values map[string]any, prev []Output, now metav1.Time) (out []Output, changed []string) {
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := outputRank[names[i]], outputRank[names[j]]
		switch {
		case ri != rj && ri != 0 && rj != 0:
			return ri < rj
		case ri != rj:
			return ri != 0 // known names first
		}
		return names[i] < names[j]
	})
	for _, n := range names {
		p, d := Preview(values[n])
		o := Output{Name: n, Preview: p, Digest: d, LastTransitionTime: now}
		if old := findOutput(prev, n); old != nil && old.Digest == d {
			o.LastTransitionTime = old.LastTransitionTime
		} else {
			changed = append(changed, n)
		}
		out = append(out, o)
	}
	return out, changed
}

func findOutput(outs []Output, name string) *Output {
	for i := range outs {
		if outs[i].Name == name {
			return &outs[i]
		}
	}
	return nil
}

// Cond returns a condition; LastTransitionTime is filled by Merge.
func Cond(typ string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
}

// Merge returns conds (in their order) with the previous lastTransitionTime
// kept for every condition whose status did not change, and
// observedGeneration set.
func Merge(conds []metav1.Condition, prev []metav1.Condition, generation int64, now metav1.Time) []metav1.Condition {
	out := make([]metav1.Condition, len(conds))
	for i, c := range conds {
		c.LastTransitionTime = now
		c.ObservedGeneration = generation
		for _, p := range prev {
			if p.Type == c.Type && p.Status == c.Status {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
		out[i] = c
	}
	return out
}

// Summarize computes a Ready-like condition from others: True when all are
// True, else the reason and message of the first False one, else of the first
// Unknown one. trueReason is the reason when all are True.
func Summarize(typ, trueReason string, conds ...metav1.Condition) metav1.Condition {
	for _, c := range conds {
		if c.Status == False {
			return Cond(typ, False, c.Reason, c.Message)
		}
	}
	for _, c := range conds {
		if c.Status != True {
			return Cond(typ, Unknown, c.Reason, c.Message)
		}
	}
	return Cond(typ, True, trueReason, "")
}

// Find returns the condition of type typ, or nil.
func Find(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// LiveCondition is a condition as another controller wrote it on its object.
type LiveCondition struct {
	Status, Reason, Message string
}

// ConditionOf reads the condition typ of an object's status.conditions.
func ConditionOf(u *unstructured.Unstructured, typ string) (LiveCondition, bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		var lc LiveCondition
		lc.Status, _ = m["status"].(string)
		lc.Reason, _ = m["reason"].(string)
		lc.Message, _ = m["message"].(string)
		return lc, true
	}
	return LiveCondition{}, false
}

// kstatus condition types: abnormal-true, so that tools built on kstatus
// (Flux, Argo CD, kubectl wait …) tell a failing or working owner from a
// healthy one. Cartographer has neither.
const (
	Reconciling = "Reconciling"
	Stalled     = "Stalled"
)

// Kstatus returns the kstatus conditions that go with an owner's Ready:
// Stalled when Ready is False (the owner cannot progress until its inputs
// or the cluster change), Reconciling when Ready is Unknown (work is in
// progress), none when Ready is True. Each takes Ready's reason and message.
func Kstatus(ready metav1.Condition) []metav1.Condition {
	switch ready.Status {
	case False:
		return []metav1.Condition{Cond(Stalled, True, ready.Reason, ready.Message)}
	case True:
		return nil
	}
	return []metav1.Condition{Cond(Reconciling, True, ready.Reason, ready.Message)}
}
