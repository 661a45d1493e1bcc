// Package notification holds the CustomResourceDefinitions of Kontinue's
// own notification kinds, notification.kontinue.dev/v1alpha1 Provider and
// Alert (docs/notifications.md). As package crds does for carto.run, the
// kinds are Go types here (their specs and statuses in notify/api), from
// which hack/crdgen writes the YAML files next to this one; they are
// embedded by package crds, whose All serves them with the carto.run ones.
//
// +groupName=notification.kontinue.dev
// +versionName=v1alpha1
package notification

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/notify/api"
)

// A Provider says where and how Kontinue sends notifications: a Slack or
// Microsoft Teams incoming webhook, a generic webhook, GitHub or GitLab
// commit statuses, or CDEvents. Its address and token may come from a
// Secret in its namespace, read as its service account.
//
// +kubebuilder:resource:categories={kontinue}
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=`.spec.type`,description="What the receiver is."
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=='Ready')].status`,description="Whether it can be used."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=`.metadata.creationTimestamp`,description="Time since the object was created."
type Provider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Where and how to send.
	Spec api.ProviderSpec `json:"spec"`
	// Observed state, written by Kontinue.
	Status api.ProviderStatus `json:"status,omitempty"`
}

// An Alert sends the events of some Workloads and Deliverables (a step
// failed, recovered, a deployment, ...) to a Provider of its namespace.
// It watches owners of its own namespace only, unless it is in a platform
// namespace Kontinue was started with.
//
// +kubebuilder:resource:categories={kontinue}
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kubebuilder:printcolumn:name="Provider",type="string",JSONPath=`.spec.providerRef.name`,description="The provider it sends to."
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=='Ready')].status`,description="Whether its provider can be used."
// +kubebuilder:printcolumn:name="Dropped",type="integer",JSONPath=`.status.dropped`,description="Events dropped."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=`.metadata.creationTimestamp`,description="Time since the object was created."
type Alert struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Which owners' events go where.
	Spec api.AlertSpec `json:"spec"`
	// Observed state, written by Kontinue.
	Status api.AlertStatus `json:"status,omitempty"`
}
