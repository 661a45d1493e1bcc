package api

// A chain's roll-out policy (spec.rollout, a Kontinue addition): how a
// change of its own definitions reaches its owners in waves
// (reconciler/rollout decides, docs/rollouts.md).

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RolloutPolicy is a chain's spec.rollout.
type RolloutPolicy struct {
	// The waves, in order; each admits its owners and those of every earlier
	// wave. A last wave of 100 percent is implied. Each wave gives exactly
	// one of selector and percent.
	Waves []RolloutWave `json:"waves,omitempty"`
	// Halt when an admitted owner fails (Ready False) on the new revision
	// (default true); false counts a wave done once every admitted owner has
	// settled.
	PauseOnFailure *bool `json:"pauseOnFailure,omitempty"`
}

// One wave: a selector or a percent. Percent admits the owners whose
// bucket, a hash of namespace/name in 0..99, is below it.
type RolloutWave struct {
	// The owners whose labels match (a canary wave): matchLabels and
	// matchExpressions.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// A share of the owners: those whose bucket (a hash of namespace/name,
	// 0..99) is below it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Percent *int `json:"percent,omitempty"`
}
