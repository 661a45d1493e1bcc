// Package status builds the status Kontinue writes on owners: the
// Cartographer-compatible resources[] entries, their outputs, and the
// conditions in the contract's order. Everything here is pure.
//
// Its types are also the status schema of the CRDs (hack/crdgen, as
// reconciler/api is of the specs): a field's doc comment is its description
// for users. Nothing in a status is required unless marked so.
//
// +kubebuilder:validation:Optional
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
	// The metadata.generation of the owner that the status describes. When
	// it is lower than metadata.generation, the controller has not yet acted
	// on the latest spec.
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions of the owner, in this order: SupplyChainReady for a
	// workload, DeliveryReady for a deliverable (Ready, WorkloadLabelsMissing
	// or DeliverableLabelsMissing, SupplyChainNotFound or DeliveryNotFound,
	// MultipleSupplyChainMatches or MultipleDeliveryMatches, or the chain's
	// own not-ready reason), ResourcesSubmitted (ResourceSubmissionComplete,
	// MissingValueAtPath while waiting for an output, TemplateStampFailure,
	// TemplateRejectedByAPIServer, TemplateObjectRetrievalFailure,
	// TemplateOptionsMatchError, ResolveTemplateOptionsError,
	// ServiceAccountError, UnknownError), ResourcesHealthy
	// (HealthyConditionRule) and Ready (True when all are True, else the
	// first False one, else the first Unknown one).
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// The ClusterSupplyChain selected for this workload. Empty when none or
	// several match (see the SupplyChainReady condition).
	SupplyChainRef *ObjectRef `json:"supplyChainRef,omitempty"`
	// The ClusterDelivery selected for this deliverable. Empty when none or
	// several match (see the DeliveryReady condition).
	DeliveryRef *ObjectRef `json:"deliveryRef,omitempty"`
	// One entry per step of the chain, in the chain's order.
	Resources []Resource `json:"resources,omitempty"`
	// Objects this owner stamped earlier that no step stamps any more and
	// that Kontinue could not delete yet (for example the service account
	// may not delete them). Kontinue retries, and removes an entry once the
	// object is gone.
	Orphans []StampedRef `json:"orphans,omitempty"` // kept so that the deletion is retried, not leaked
	// The value of the kontinue.dev/reconcile-requested-at annotation when
	// the controller computed this status (a Kontinue addition). Equal to
	// the annotation once the owner has been reconciled after the request;
	// `kontinue reconcile --wait` waits for it.
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"` // as Flux's lastHandledReconcileAt
	// The ClusterRunTemplates Kontinue generated for this owner's steps
	// whose template sets runnable to true. They are cluster-scoped and
	// carry no owner reference, and labels prove nothing, so this record
	// (only Kontinue writes it) is what makes one Kontinue's. Kontinue
	// updates and deletes only the object of the recorded UID, with that UID
	// as precondition; an entry without UID is recorded before its object is
	// created. An entry goes once its object is gone.
	GeneratedRunTemplates []GeneratedRunTemplate `json:"generatedRunTemplates,omitempty"`
	// A Kontinue addition: the revision of the chain's definitions (a
	// content hash of the chain and its templates) the owner rendered with,
	// when the chain has a roll-out policy.
	ChainRevision string `json:"chainRevision,omitempty"` // reconciler/rollout
	// A Kontinue addition: the shard (the kontinue.dev/shard label) whose
	// replica last brought every object of this owner into its shard (empty:
	// the default shard). An owner whose label names another shard has
	// moved: the new shard's replica looks for the objects it left in other
	// shards, which its watches do not show (docs/operations.md#sharding).
	Shard string `json:"shard,omitempty"`
}

// One generated ClusterRunTemplate. Kontinue updates and deletes the object
// of that name only while its UID is this one. A record without UID is one
// about to be created: the object Kontinue creates carries Claim
// (AnnotationClaim), so that a crash between the create and the status
// write does not lose it.
type GeneratedRunTemplate struct {
	// The step that generates it.
	// +required
	Step string `json:"step"`
	// Its name.
	// +required
	Name string `json:"name"`
	// Its UID, once Kontinue created it.
	UID types.UID `json:"uid,omitempty"`
	// A random value the object carries in the annotation
	// kontinue.dev/claim, written here before the object is created, so that
	// an object created just before a crash is known as Kontinue's.
	Claim string `json:"claim,omitempty"`
}

// A cluster-scoped object: the chain selected for an owner.
type ObjectRef struct {
	// Kind of the chain: ClusterSupplyChain or ClusterDelivery.
	Kind string `json:"kind"`
	// Name of the chain.
	Name string `json:"name"`
}

// The state of one step. Fields not listed here may be added by newer
// versions.
// +kubebuilder:pruning:PreserveUnknownFields
type Resource struct {
	// Name of the step in the chain.
	Name string `json:"name"`
	// The object this step stamped and reads outputs and health from. When
	// the template renders several objects it is the primary one; with a
	// lifecycle that creates runs (immutable, tekton) it is the newest run.
	StampedRef *StampedRef `json:"stampedRef,omitempty"`
	// Every object the step's template rendered, when it rendered more than
	// one (an engine other than template's $(...)$ tags can).
	StampedObjects []StampedRef `json:"stampedObjects,omitempty"`
	// The template the step used (for options, the one chosen).
	TemplateRef *TemplateRef `json:"templateRef,omitempty"`
	// The earlier steps whose outputs this step received.
	Inputs []Input `json:"inputs,omitempty"`
	// The outputs this step passes on (url and revision, image, or config).
	Outputs []Output `json:"outputs,omitempty"`
	// Conditions of this step: ResourceSubmitted (True with
	// ResourceSubmissionComplete or PassThrough, else the reason the object
	// could not be stamped or applied), Healthy (True: OutputsAvailable,
	// AlwaysHealthy, MatchedCondition, MatchedField or <Type>Condition;
	// Unknown: NoResource, OutputNotAvailable, NoStampedObject,
	// NoMatchesFulfilled) and Ready.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Digest of the inputs the step's object was last stamped with; a change
	// means the object gets new inputs (for immutable lifecycles: a new
	// run).
	InputDigest string `json:"inputDigest,omitempty"` // the digest Kontinue records on the stamped object it applied
	// The outputs of the step's last success, for steps whose template has
	// success rules (observedCompletion, observedMatches, alwaysSuccessful).
	// Downstream steps receive them while this step works on newer inputs or
	// has failed on them.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	OutputValues map[string]any `json:"outputValues,omitempty"`
	// Digest of the newest input set the step holds back until its object
	// has succeeded or failed on the inputs it has.
	HeldInputDigest string `json:"heldInputDigest,omitempty"`
	// The shadow object stamped from the last good input set while the
	// primary object fails on newer inputs.
	ShadowRef *StampedRef `json:"shadowRef,omitempty"` // seed 004
	// Which object the step's outputs come from: primary (stamped from the
	// latest inputs) or shadow (the last good object, kept while the primary
	// one fails).
	// +kubebuilder:validation:Enum=primary;shadow
	ServedBy string `json:"servedBy,omitempty"` // set for steps that can have a shadow
	// The object rendered from the last input set that succeeded, from which
	// a shadow is stamped (kept only for templates that can have a shadow).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	LastGoodObject map[string]any `json:"lastGoodObject,omitempty"`

	// AppliedInputDigest is the input set on a gated step's object while it
	// is not the last good one, AppliedObject the object rendered from it
	// (steps that can have a shadow) and AppliedOutputValues the outputs it
	// publishes when it succeeds (a deployment's inputs): what its success
	// records when it is seen only once a newer set waits.

	// The input set on the object while it is not the last good one (gated
	// templates). A Kontinue addition.
	AppliedInputDigest string `json:"appliedInputDigest,omitempty"`
	// The object rendered from appliedInputDigest (templates that can have
	// a shadow); it becomes lastGoodObject when that set succeeds, also when
	// a newer set is waiting by then.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	AppliedObject map[string]any `json:"appliedObject,omitempty"`
	// The outputs appliedInputDigest publishes when it succeeds (a
	// ClusterDeploymentTemplate's deployment input, which it passes on),
	// recorded also when a newer set is waiting by then.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	AppliedOutputValues map[string]any `json:"appliedOutputValues,omitempty"`
	// The input set the object has worked on since processingSince without
	// succeeding or failing (gated templates); the clock of the template's
	// progressDeadline.
	ProcessingInputDigest string `json:"processingInputDigest,omitempty"`
	// When the object began working on processingInputDigest.
	ProcessingSince *metav1.Time `json:"processingSince,omitempty"`
	// The value of the owner's kontinue.dev/retry annotation this step last
	// handled (a Kontinue addition; immutable steps). A new value asks for
	// one more run of the current inputs when the newest one failed, once.
	LastHandledRetry string `json:"lastHandledRetry,omitempty"`
	// The input values behind the step's outputs (current), the newer set
	// its object works on or failed on (latest) and the set it holds (held),
	// with when it took each and when each succeeded or failed. A Kontinue
	// addition.
	Provenance *Provenance `json:"provenance,omitempty"` // provenance.go
	// How each input that the chain's verify names was checked, this
	// reconcile (docs/verification.md). A Kontinue addition.
	// +kubebuilder:validation:MaxItems=31
	Verification []InputVerification `json:"verification,omitempty"` // reconciler/verify decides, owner/verify.go records
}

// How one input of a step was checked against the chain's policy.
type InputVerification struct {
	// The input's type: image, source, config or deployment.
	Type string `json:"type"`
	// The input's name in the step.
	Name string `json:"name"`
	// Verified (the step took it), Refused (a rule failed: the step holds
	// its previous input) or Verifying (the evidence is being read: the
	// step holds its previous input meanwhile).
	// +kubebuilder:validation:Enum=Verified;Refused;Verifying
	Result string `json:"result"`
	// The digest checked (sha256:...).
	Digest string `json:"digest,omitempty"`
	// The rules that passed (Verified) or the rule that failed (Refused):
	// signature, attestation <predicate type>, kontinue, digest or policy.
	Rule string `json:"rule,omitempty"`
	// Why, for people (cut to 512 characters).
	Message string `json:"message,omitempty"`
	// The step renders with its previous value of this input, not with
	// the one checked.
	Held bool `json:"held,omitempty"`
}

// Carried is what a step keeps of its previous status r until it stamps
// again: everything but what each reconcile decides afresh (its
// conditions, the inputs it holds back) and its inputs, which are the
// chain's. A new field is carried unless it is reset here.
func (r Resource) Carried(inputs []Input) Resource {
	c := r
	c.Inputs = inputs
	c.Conditions, c.HeldInputDigest, c.Verification = nil, "", nil
	return c
}

// One stamped object.
type StampedRef struct {
	// API version of the object.
	APIVersion string `json:"apiVersion"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace of the object (the owner's namespace).
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
	// Plural resource name with its group, e.g. configmaps or
	// tests.test.run, so tools can fetch the object without discovery.
	Resource string `json:"resource,omitempty"`
}

// The template a step used.
type TemplateRef struct {
	// API version of the template: carto.run/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind of the template, e.g. ClusterSourceTemplate.
	Kind string `json:"kind"`
	// Name of the template.
	Name string `json:"name"`
}

// One input: an upstream step.
type Input struct {
	// Name of the upstream step.
	Name string `json:"name"`
}

// One output of a step as shown to people: a YAML preview cut to 1024
// characters and the digest of the whole YAML.
type Output struct {
	// Name of the output: url, revision, image or config.
	Name string `json:"name"`
	// The value as YAML, cut to 1024 characters.
	Preview string `json:"preview"`
	// sha256: followed by the hex SHA-256 of the full YAML value; changes
	// exactly when the value changes.
	Digest string `json:"digest"`
	// When the value last changed.
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

// OutputString is the step's output name when it is a whole string: from
// its preview (YAML, when not cut at PreviewLimit), else from the
// outputValues the step keeps (only steps with success rules keep them).
func (r *Resource) OutputString(name string) (string, bool) {
	for _, o := range r.Outputs {
		if o.Name == name && len(o.Preview) < PreviewLimit {
			var s string
			if err := yaml.Unmarshal([]byte(o.Preview), &s); err == nil && s != "" {
				return s, true
			}
		}
	}
	s, ok := r.OutputValues[name].(string)
	return s, ok
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
