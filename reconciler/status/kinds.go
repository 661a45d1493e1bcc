package status

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RunnableStatus is the status of a Runnable.
type RunnableStatus struct {
	// The metadata.generation of the Runnable that the status describes.
	// When it is lower than metadata.generation, the controller has not yet
	// acted on the latest spec.
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: RunTemplateReady, StampedObjectCondition (mirrors the
	// Succeeded condition of the newest stamped object) and Ready.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// The run template's outputs, read from the newest stamped object whose
	// Succeeded condition is True.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Outputs map[string]any `json:"outputs,omitempty"`
	// The newest object stamped.
	LatestRunRef *RunRef `json:"latestRunRef,omitempty"`
	// The newest object whose Succeeded condition is True; the outputs come
	// from it.
	LatestSuccessfulRunRef *RunRef `json:"latestSuccessfulRunRef,omitempty"`
	// The value of the kontinue.dev/retry annotation the controller last
	// handled (a Kontinue addition). A new value asks for one more run of
	// the current inputs when the newest one failed, once.
	LastHandledRetry string `json:"lastHandledRetry,omitempty"`
}

// One object a Runnable stamped.
type RunRef struct {
	// API version of the object.
	APIVersion string `json:"apiVersion"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace of the object (the Runnable's namespace).
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
}

// ChainStatus is the status of a ClusterSupplyChain or ClusterDelivery
// (reconciler/chain writes it; reconciler/rollout its rollout).
type ChainStatus struct {
	// The metadata.generation of the chain that the status describes. When
	// it is lower than metadata.generation, the controller has not yet acted
	// on the latest spec.
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: TemplatesReady (Ready, or TemplatesNotFound listing the
	// steps whose template does not exist) and Ready; with a roll-out,
	// RolledOut; with a verify policy, VerifyPoliciesValid (Kontinue).
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// A Kontinue addition: the roll-out of this chain's definitions
	// (spec.rollout; docs/rollouts.md): the stable and target revisions, the
	// wave, the phase, the failing owners and the definitions of every
	// revision an owner may still render with.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Rollout map[string]any `json:"rollout,omitempty"`
}
