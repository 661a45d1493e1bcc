// Package api holds the spec and status structs of Kontinue's own
// notification kinds, Provider and Alert, in the group
// notification.kontinue.dev/v1alpha1 (not carto.run: Cartographer's
// contract has no such kinds). As reconciler/api does for the carto.run
// kinds, they are both what the notifier decodes and the CRDs' schema:
// hack/crdgen writes crds/notification/*.yaml from them and the kinds of
// crds/notification/kinds.go. A field's doc comment is its description in
// `kubectl explain` and docs/crds.md.
package api

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Group and version of the notification kinds.
const (
	Group     = "notification.kontinue.dev"
	Version   = "v1alpha1"
	KindAlert = "Alert"
	// KindProvider is where and how notifications are sent.
	KindProvider = "Provider"
)

// Provider types.
const (
	TypeGeneric  = "generic"
	TypeSlack    = "slack"
	TypeMSTeams  = "msteams"
	TypeGitHub   = "github"
	TypeGitLab   = "gitlab"
	TypeCDEvents = "cdevents"
)

// Event types an Alert can ask for.
const (
	EventSourceChanged     = "SourceChanged"
	EventStepStarted       = "StepStarted"
	EventStepSucceeded     = "StepSucceeded"
	EventStepFailed        = "StepFailed"
	EventStepRecovered     = "StepRecovered"
	EventArtifactPublished = "ArtifactPublished"
	EventDeployed          = "Deployed"
	EventRolledBack        = "RolledBack"
)

// Severities.
const (
	SeverityInfo  = "info"
	SeverityError = "error"
)

// ProviderSpec says where and how notifications are sent.
// +kubebuilder:validation:XValidation:rule="self.type in ['github', 'gitlab'] || has(self.address) || has(self.secretRef)",message="set address, or secretRef to a Secret whose address key holds it"
type ProviderSpec struct {
	// What the receiver is: generic (a JSON POST, signed with HMAC-SHA256
	// when the Secret has a token), slack and msteams (incoming webhooks),
	// github and gitlab (commit statuses), cdevents (CDEvents as
	// CloudEvents over HTTP).
	// +kubebuilder:validation:Enum=generic;slack;msteams;github;gitlab;cdevents
	Type string `json:"type"`
	// The receiver's URL (an incoming webhook's, a CDEvents broker's), or
	// for github and gitlab the API's base URL (default
	// https://api.github.com, https://gitlab.com). The Secret's address
	// key, when present, wins (a Slack webhook URL is a secret). Addresses
	// of the cluster's API server and link-local ones (cloud metadata
	// endpoints) are refused, loopback and private ones too unless
	// Kontinue runs with --notification-allow-private-networks.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	Address string `json:"address,omitempty"`
	// A Secret in the provider's namespace: its address key (the URL), its
	// token key (GitHub or GitLab token; generic: the HMAC-SHA256 key). It
	// is read as the provider's service account, never with Kontinue's
	// own rights.
	SecretRef *LocalRef `json:"secretRef,omitempty"`
	// The service account (in the provider's namespace) whose rights read
	// the Secret. Default: default.
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// github and gitlab: the repository (owner/name, or a GitLab project's
	// path) whose commits get statuses. Default: the one the owner's
	// source step took its revision from (its url).
	// +kubebuilder:validation:MaxLength=512
	Repository string `json:"repository,omitempty"`
	// Stop sending: events for this provider are dropped (and counted).
	Suspend bool `json:"suspend,omitempty"`
}

// LocalRef names an object in the same namespace.
type LocalRef struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// AlertSpec says which owners' events go to a provider.
type AlertSpec struct {
	// The Provider, in the alert's namespace, to send to.
	ProviderRef LocalRef `json:"providerRef"`
	// The owners to watch, by kind and name or labels; empty: every
	// Workload and Deliverable the alert may watch. An owner matches when
	// one selector does.
	// +kubebuilder:validation:MaxItems=100
	Owners []OwnerSelector `json:"owners,omitempty"`
	// Only owners on these chains (ClusterSupplyChain or ClusterDelivery
	// names); empty: any.
	// +kubebuilder:validation:MaxItems=100
	Chains []string `json:"chains,omitempty"`
	// Only these steps; empty: any.
	// +kubebuilder:validation:MaxItems=100
	Steps []string `json:"steps,omitempty"`
	// Namespaces of the owners to watch, honoured only for an alert in a
	// platform namespace (Kontinue's --notification-platform-namespaces);
	// empty there: every namespace. An alert anywhere else watches its own
	// namespace only, whatever this says.
	// +kubebuilder:validation:MaxItems=100
	Namespaces []string `json:"namespaces,omitempty"`
	// The events to send; empty: all.
	// +kubebuilder:validation:items:Enum=SourceChanged;StepStarted;StepSucceeded;StepFailed;StepRecovered;ArtifactPublished;Deployed;RolledBack
	// +kubebuilder:validation:MaxItems=8
	Events []string `json:"events,omitempty"`
	// info: every event; error: failures only (StepFailed, RolledBack).
	// Default: info.
	// +kubebuilder:validation:Enum=info;error
	Severity string `json:"severity,omitempty"`
	// A line every message of this alert starts with, e.g. the team or
	// the cluster.
	// +kubebuilder:validation:MaxLength=255
	Summary string `json:"summary,omitempty"`
	// Stop sending this alert's events.
	Suspend bool `json:"suspend,omitempty"`
}

// OwnerSelector picks owners by kind and name, or by labels.
type OwnerSelector struct {
	// Workload or Deliverable; empty: both.
	// +kubebuilder:validation:Enum=Workload;Deliverable
	Kind string `json:"kind,omitempty"`
	// The owner's name; empty: any.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Labels the owner must have.
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// AlertStatus is what Kontinue observed of an alert.
type AlertStatus struct {
	// The generation the status was written for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Ready: True when its events were delivered; False with why, as of
	// the last delivery (ProviderNotFound, ProviderInvalid,
	// ProviderSuspended, AddressRefused, SecretNotReadable,
	// DeliveryFailing, QueueFull).
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Events of this alert that were sent (a grouped message counts each
	// event), since the alert was created.
	Sent int64 `json:"sent,omitempty"`
	// Events of this alert that were dropped: the provider's queue was
	// full, the receiver refused them or stayed down past the retries, or
	// the provider could not be used.
	Dropped int64 `json:"dropped,omitempty"`
	// When an event was last dropped.
	LastDropped *metav1.Time `json:"lastDropped,omitempty"`
}

// ProviderStatus is what Kontinue observed of a provider.
type ProviderStatus struct {
	// The generation the status was written for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Ready: True when it can be used; False with why
	// (ProviderInvalid, ProviderSuspended, SecretNotReadable,
	// AddressRefused). Checked when the provider appears or its spec
	// changes, and at each delivery; written only when it changes.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
