// Package view turns a Workload or Deliverable, as read from the API server,
// into the data model `kontinue get` prints: the owner, its conditions and
// one entry per step of its chain; and a chain as a graph (chain.go). Build
// and BuildChain are pure (no cluster access): the dashboard shows the same
// model. The JSON form (`kontinue get -o json`) is stable:
// fields are only ever added, and APIVersion changes if one ever changes
// meaning (docs/cli.md#the-data-model).
package view

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/annotations"
	st "kontinue.dev/kontinue/reconciler/status"
)

// APIVersion and kinds of the data model.
const (
	APIVersion = "cli.kontinue.dev/v1"
	KindOwner  = "OwnerView"
	KindList   = "OwnerViewList"
)

// Owner is one Workload or Deliverable.
type Owner struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"` // OwnerView
	// OwnerKind is Workload or Deliverable.
	OwnerKind          string `json:"ownerKind"`
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	// Chain is the ClusterSupplyChain or ClusterDelivery the owner walks.
	Chain *Ref `json:"chain,omitempty"`
	// Ready sums the owner up: the Ready condition (status Unknown and no
	// reason when there is none yet).
	Ready      Condition   `json:"ready"`
	Conditions []Condition `json:"conditions,omitempty"`
	Steps      []Step      `json:"steps,omitempty"`
	// Orphans are stamped objects no step stamps any more, not deleted yet.
	Orphans []Ref `json:"orphans,omitempty"`
	// ReconcileRequestedAt is the value of the reconcile request
	// annotation (`kontinue reconcile`), if any.
	ReconcileRequestedAt string `json:"reconcileRequestedAt,omitempty"`
	// LastHandledReconcileAt is the request the controller last handled
	// (status.lastHandledReconcileAt): equal to ReconcileRequestedAt once
	// the controller has reconciled after the request.
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// CreationTimestamp is when the owner was created.
	CreationTimestamp string `json:"creationTimestamp,omitempty"`
	// Stale is true when the status describes an older generation than the
	// spec: the controller has not caught up yet.
	Stale bool `json:"stale,omitempty"`
	// ChainRevision is the revision of its chain's definitions it rendered
	// with (status.chainRevision), under a chain's roll-out policy.
	ChainRevision string `json:"chainRevision,omitempty"`

	labels   map[string]string // which wave admits it (Count); not shown
	deleting bool              // it has a deletionTimestamp (Count); not shown
}

// List is several owners.
type List struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"` // OwnerViewList
	Items      []Owner `json:"items"`
}

// Ref names an object. Namespace is empty for cluster-scoped objects.
type Ref struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Resource is the plural with its group, when the status gives it.
	Resource string `json:"resource,omitempty"`
}

// String is "Kind namespace/name" or "Kind name".
func (r Ref) String() string {
	if r.Namespace != "" {
		return r.Kind + " " + r.Namespace + "/" + r.Name
	}
	return r.Kind + " " + r.Name
}

// Condition is a condition as shown.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"` // True, False or Unknown
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// Health of a step, from its Healthy condition.
const (
	HealthHealthy   = "Healthy"
	HealthUnhealthy = "Unhealthy"
	HealthUnknown   = "Unknown"
	HealthNone      = "" // the step stamps nothing (pass-through)
)

// Step is one step of the chain.
type Step struct {
	Name string `json:"name"`
	// Template is the template the step used (after option choice).
	Template *Ref `json:"template,omitempty"`
	// PassThrough is true when a passThrough option was chosen: the step
	// forwards an input and stamps nothing.
	PassThrough bool `json:"passThrough,omitempty"`
	// Stamped is the object outputs and health are read from; Objects,
	// every object when the template rendered several.
	Stamped *Ref  `json:"stamped,omitempty"`
	Objects []Ref `json:"objects,omitempty"`
	// Inputs are the earlier steps this one reads from.
	Inputs []string `json:"inputs,omitempty"`
	// Ready, Submitted and Healthy are the step's conditions.
	Ready     Condition  `json:"ready"`
	Submitted *Condition `json:"submitted,omitempty"`
	Healthy   *Condition `json:"healthy,omitempty"`
	// Health is Healthy, Unhealthy, Unknown, or empty for a pass-through.
	Health  string   `json:"health"`
	Outputs []Output `json:"outputs,omitempty"`
	// InputDigest is the input set that produced the outputs.
	InputDigest string `json:"inputDigest,omitempty"`
	// HeldInputDigest is a newer input set the step holds until its object
	// has finished with the current one.
	HeldInputDigest string `json:"heldInputDigest,omitempty"`
	// Shadow is the "last good" object in use while the primary fails;
	// ServedBy says where the outputs come from (primary or shadow).
	Shadow   *Ref   `json:"shadow,omitempty"`
	ServedBy string `json:"servedBy,omitempty"`
	// Provenance is the step's status.resources[].provenance: the input
	// values behind its outputs and the newer sets, with their times.
	Provenance *st.Provenance `json:"provenance,omitempty"`
	// Verification is how each input the chain's verify names was
	// checked (status.resources[].verification).
	Verification []st.InputVerification `json:"verification,omitempty"`
	// Runnable is the status of the Runnable the step stamped, when it
	// stamped one and the caller read it.
	Runnable *Runnable `json:"runnable,omitempty"`
}

// Output is one output of a step.
type Output struct {
	Name    string `json:"name"`
	Preview string `json:"preview"` // YAML, at most 1024 characters
	Digest  string `json:"digest,omitempty"`
	Since   string `json:"since,omitempty"` // when the value last changed
}

// Runnable is what a stamped Runnable says about its runs.
type Runnable struct {
	Ref                 Ref               `json:"ref"`
	Ready               Condition         `json:"ready"`
	LatestRun           *Ref              `json:"latestRun,omitempty"`
	LatestSuccessfulRun *Ref              `json:"latestSuccessfulRun,omitempty"`
	Outputs             map[string]string `json:"outputs,omitempty"` // values as JSON
	LatestRunSucceeded  string            `json:"latestRunSucceeded,omitempty"`
	LatestRunMessage    string            `json:"latestRunMessage,omitempty"`
}

// timeFormat is how times are written (metav1.Time's JSON form).
const timeFormat = "2006-01-02T15:04:05Z"

// RunnableOf is the view of a Runnable as read.
func RunnableOf(u *unstructured.Unstructured) Runnable {
	return runnable(Ref{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}, u)
}

// RunnableKey is how Build finds a Runnable a step stamped among those the
// caller read: "namespace/name".
func RunnableKey(namespace, name string) string { return namespace + "/" + name }

// Build makes the view of one owner. runnables holds the Runnables the
// owner's steps stamped (by RunnableKey), as far as the caller read them;
// nil is fine.
func Build(owner *unstructured.Unstructured, runnables map[string]*unstructured.Unstructured) Owner {
	v := Owner{
		APIVersion: APIVersion, Kind: KindOwner,
		OwnerKind: owner.GetKind(), Namespace: owner.GetNamespace(), Name: owner.GetName(),
		Generation:           owner.GetGeneration(),
		ReconcileRequestedAt: owner.GetAnnotations()[annotations.ReconcileRequest],
	}
	if t := owner.GetCreationTimestamp(); !t.IsZero() {
		v.CreationTimestamp = t.UTC().Format(timeFormat)
	}
	var status st.OwnerStatus
	if raw, ok := owner.Object["status"]; ok {
		// A status that does not decode shows as no status.
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &status)
	}
	v.ObservedGeneration = status.ObservedGeneration
	v.ChainRevision = status.ChainRevision
	v.labels = owner.GetLabels()
	v.deleting = owner.GetDeletionTimestamp() != nil
	v.LastHandledReconcileAt = status.LastHandledReconcileAt
	v.Stale = status.ObservedGeneration < v.Generation
	switch {
	case status.SupplyChainRef != nil:
		v.Chain = &Ref{Kind: status.SupplyChainRef.Kind, Name: status.SupplyChainRef.Name}
	case status.DeliveryRef != nil:
		v.Chain = &Ref{Kind: status.DeliveryRef.Kind, Name: status.DeliveryRef.Name}
	}
	if v.Chain != nil && v.Chain.Kind == "" {
		v.Chain.Kind = "ClusterSupplyChain"
		if status.DeliveryRef != nil {
			v.Chain.Kind = "ClusterDelivery"
		}
	}
	v.Conditions = conditions(status.Conditions)
	v.Ready = find(v.Conditions, st.Ready)
	for _, r := range status.Resources {
		v.Steps = append(v.Steps, step(r, runnables))
	}
	for _, o := range status.Orphans {
		v.Orphans = append(v.Orphans, stampedRef(o))
	}
	return v
}

func step(r st.Resource, runnables map[string]*unstructured.Unstructured) Step {
	s := Step{Name: r.Name, InputDigest: r.InputDigest, HeldInputDigest: r.HeldInputDigest, ServedBy: r.ServedBy, Provenance: r.Provenance, Verification: r.Verification}
	if r.TemplateRef != nil {
		s.Template = &Ref{APIVersion: r.TemplateRef.APIVersion, Kind: r.TemplateRef.Kind, Name: r.TemplateRef.Name}
	}
	if r.StampedRef != nil {
		ref := stampedRef(*r.StampedRef)
		s.Stamped = &ref
	}
	for _, o := range r.StampedObjects {
		s.Objects = append(s.Objects, stampedRef(o))
	}
	if r.ShadowRef != nil {
		ref := stampedRef(*r.ShadowRef)
		s.Shadow = &ref
	}
	for _, in := range r.Inputs {
		s.Inputs = append(s.Inputs, in.Name)
	}
	conds := conditions(r.Conditions)
	s.Ready = find(conds, st.Ready)
	if c := find(conds, st.ResourceSubmitted); c.Reason != "" || c.Status != string(st.Unknown) {
		s.Submitted = &c
		s.PassThrough = c.Reason == "PassThrough"
	}
	if c, ok := lookup(conds, st.Healthy); ok {
		s.Healthy = &c
	}
	switch {
	case s.PassThrough:
		s.Health = HealthNone
	case s.Healthy == nil:
		s.Health = HealthUnknown
	case s.Healthy.Status == string(st.True):
		s.Health = HealthHealthy
	case s.Healthy.Status == string(st.False):
		s.Health = HealthUnhealthy
	default:
		s.Health = HealthUnknown
	}
	for _, o := range r.Outputs {
		out := Output{Name: o.Name, Preview: o.Preview, Digest: o.Digest}
		if !o.LastTransitionTime.IsZero() {
			out.Since = o.LastTransitionTime.UTC().Format(timeFormat)
		}
		s.Outputs = append(s.Outputs, out)
	}
	if s.Stamped != nil && s.Stamped.Kind == "Runnable" && strings.HasPrefix(s.Stamped.APIVersion, "carto.run/") {
		if u := runnables[RunnableKey(s.Stamped.Namespace, s.Stamped.Name)]; u != nil {
			rv := runnable(*s.Stamped, u)
			s.Runnable = &rv
		}
	}
	return s
}

func runnable(ref Ref, u *unstructured.Unstructured) Runnable {
	var status struct {
		Conditions             []metav1.Condition `json:"conditions"`
		Outputs                map[string]any     `json:"outputs"`
		LatestRunRef           *st.StampedRef     `json:"latestRunRef"`
		LatestSuccessfulRunRef *st.StampedRef     `json:"latestSuccessfulRunRef"`
	}
	b, _ := json.Marshal(u.Object["status"])
	_ = json.Unmarshal(b, &status)
	conds := conditions(status.Conditions)
	rv := Runnable{Ref: ref, Ready: find(conds, st.Ready)}
	if status.LatestRunRef != nil {
		r := stampedRef(*status.LatestRunRef)
		rv.LatestRun = &r
	}
	if status.LatestSuccessfulRunRef != nil {
		r := stampedRef(*status.LatestSuccessfulRunRef)
		rv.LatestSuccessfulRun = &r
	}
	if c, ok := lookup(conds, "StampedObjectCondition"); ok {
		rv.LatestRunSucceeded, rv.LatestRunMessage = c.Status, c.Message
	}
	if len(status.Outputs) > 0 {
		rv.Outputs = map[string]string{}
		for k, val := range status.Outputs {
			b, _ := json.Marshal(val)
			rv.Outputs[k] = string(b)
		}
	}
	return rv
}

func stampedRef(r st.StampedRef) Ref {
	return Ref{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Resource: r.Resource}
}

func conditions(in []metav1.Condition) []Condition {
	out := make([]Condition, 0, len(in))
	for _, c := range in {
		cond := Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		if !c.LastTransitionTime.IsZero() {
			cond.LastTransitionTime = c.LastTransitionTime.UTC().Format(timeFormat)
		}
		out = append(out, cond)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func lookup(conds []Condition, typ string) (Condition, bool) {
	for _, c := range conds {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{Type: typ, Status: string(st.Unknown)}, false
}

func find(conds []Condition, typ string) Condition {
	c, _ := lookup(conds, typ)
	return c
}

// NewList wraps owners, sorted by namespace and name.
func NewList(items []Owner) List {
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	if items == nil {
		items = []Owner{}
	}
	return List{APIVersion: APIVersion, Kind: KindList, Items: items}
}

// StepsReady counts the steps whose Ready is True.
func (o Owner) StepsReady() string {
	n := 0
	for _, s := range o.Steps {
		if s.Ready.Status == string(st.True) {
			n++
		}
	}
	return fmt.Sprintf("%d/%d", n, len(o.Steps))
}
