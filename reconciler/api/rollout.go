package api

// A chain's roll-out policy (spec.rollout, a Kontinue addition): how a
// change of its own definitions reaches its owners in waves
// (reconciler/rollout decides, docs/rollouts.md).

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RolloutPolicy is a chain's spec.rollout.
type RolloutPolicy struct {
	// Waves admit owners in turn; each wave admits its owners and every
	// earlier wave's. A last wave of 100 percent is implied.
	Waves []RolloutWave `json:"waves,omitempty"`
	// PauseOnFailure (default true) halts the roll-out when an admitted
	// owner fails on the new revision; false lets a wave count as done when
	// every admitted owner has settled, Ready or not.
	PauseOnFailure *bool `json:"pauseOnFailure,omitempty"`
}

// RolloutWave admits the owners its selector matches, or a share of the
// owners (Percent: those whose bucket, a hash of namespace/name in 0..99,
// is below it). Exactly one of them is set.
type RolloutWave struct {
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	Percent  *int                  `json:"percent,omitempty"`
	// How many admitted owners may be not yet Ready on the new revision
	// when this wave counts as done (default 0): the roll-out holds at the
	// wave while more are.
	// +kubebuilder:validation:Minimum=0
	MaxUnavailable *int `json:"maxUnavailable,omitempty"`
}
