// Package api holds the plain Go structs that Kontinue decodes the specs of
// its carto.run/v1alpha1 objects into. Objects travel as unstructured on the
// wire; these structs exist only so that the deciding code takes typed values.
package api

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/jsonvalue"
)

// Group and version of every kind Kontinue serves.
const (
	Group   = "carto.run"
	Version = "v1alpha1"
)

// Kinds.
const (
	KindWorkload                  = "Workload"
	KindDeliverable               = "Deliverable"
	KindRunnable                  = "Runnable"
	KindClusterSupplyChain        = "ClusterSupplyChain"
	KindClusterDelivery           = "ClusterDelivery"
	KindClusterSourceTemplate     = "ClusterSourceTemplate"
	KindClusterImageTemplate      = "ClusterImageTemplate"
	KindClusterConfigTemplate     = "ClusterConfigTemplate"
	KindClusterTemplate           = "ClusterTemplate"
	KindClusterDeploymentTemplate = "ClusterDeploymentTemplate"
	KindClusterRunTemplate        = "ClusterRunTemplate"
)

// TemplateKinds are the kinds a chain step may reference.
var TemplateKinds = []string{
	KindClusterSourceTemplate, KindClusterImageTemplate, KindClusterConfigTemplate,
	KindClusterTemplate, KindClusterDeploymentTemplate,
}

// OwnerSpec is the part of a Workload or Deliverable spec that Kontinue
// decides on. Templates see the whole object, not just this.
type OwnerSpec struct {
	Params             []OwnerParam `json:"params,omitempty"`
	ServiceAccountName string       `json:"serviceAccountName,omitempty"`
}

// OwnerParam is a param given by the developer.
type OwnerParam struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// ChainSpec is the spec of a ClusterSupplyChain or ClusterDelivery.
type ChainSpec struct {
	Selector                 map[string]string                 `json:"selector,omitempty"`
	SelectorMatchExpressions []metav1.LabelSelectorRequirement `json:"selectorMatchExpressions,omitempty"`
	SelectorMatchFields      []FieldRequirement                `json:"selectorMatchFields,omitempty"`
	Params                   []Param                           `json:"params,omitempty"`
	ServiceAccountRef        *ServiceAccountRef                `json:"serviceAccountRef,omitempty"`
	Resources                []Step                            `json:"resources,omitempty"`
	// Rollout (a Kontinue addition) rolls a change of the chain's own
	// definitions out in waves (reconciler/rollout, docs/rollouts.md).
	Rollout *RolloutPolicy `json:"rollout,omitempty"`
}

// ServiceAccountRef names the account whose permissions stamp objects.
type ServiceAccountRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// Param is a chain or step param: exactly one of Value (protected: the owner
// cannot override it) or Default.
type Param struct {
	Name    string `json:"name"`
	Value   any    `json:"value,omitempty"`
	Default any    `json:"default,omitempty"`
	// HasValue distinguishes an explicit `value: null` or `value: ""` from no value.
	HasValue bool `json:"-"`
}

// UnmarshalJSON records whether `value` was given.
func (p *Param) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name    string          `json:"name"`
		Value   json.RawMessage `json:"value"`
		Default json.RawMessage `json:"default"`
	}
	if err := jsonvalue.Unmarshal(b, &raw); err != nil {
		return err
	}
	p.Name = raw.Name
	if raw.Value != nil {
		p.HasValue = true
		if err := jsonvalue.Unmarshal(raw.Value, &p.Value); err != nil {
			return fmt.Errorf("param %q: %w", raw.Name, err)
		}
	}
	if raw.Default != nil {
		if err := jsonvalue.Unmarshal(raw.Default, &p.Default); err != nil {
			return fmt.Errorf("param %q: %w", raw.Name, err)
		}
	}
	return nil
}

// Step is one entry of a chain's spec.resources.
type Step struct {
	Name        string          `json:"name"`
	TemplateRef StepTemplateRef `json:"templateRef"`
	Params      []Param         `json:"params,omitempty"`
	Sources     []StepInput     `json:"sources,omitempty"`
	Images      []StepInput     `json:"images,omitempty"`
	Configs     []StepInput     `json:"configs,omitempty"`
	Deployment  *DeploymentRef  `json:"deployment,omitempty"`
}

// StepTemplateRef names the template of a step: a name, or options chosen per owner.
type StepTemplateRef struct {
	Kind    string           `json:"kind"`
	Name    string           `json:"name,omitempty"`
	Options []TemplateOption `json:"options,omitempty"`
}

// TemplateOption is one candidate template of a step (seed 001).
type TemplateOption struct {
	Name        string         `json:"name,omitempty"`
	PassThrough string         `json:"passThrough,omitempty"`
	Selector    OptionSelector `json:"selector"`
}

// OptionSelector selects an option by the owner's labels and fields.
type OptionSelector struct {
	MatchLabels      map[string]string                 `json:"matchLabels,omitempty"`
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
	MatchFields      []FieldRequirement                `json:"matchFields,omitempty"`
}

// Field selector operators.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
)

// FieldRequirement matches a path on an object against JSON values.
type FieldRequirement struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Values   []any  `json:"values,omitempty"`
	// MessagePath (health rules only) names a path whose value explains the match.
	MessagePath string `json:"messagePath,omitempty"`
}

// StepInput wires an output of an earlier step into this one.
type StepInput struct {
	Name     string `json:"name"`
	Resource string `json:"resource"`
}

// DeploymentRef wires the deployment input of a delivery step.
type DeploymentRef struct {
	Resource string `json:"resource"`
}

// TemplateSpec is the spec shared by every template kind. Which output paths
// apply depends on the kind.
type TemplateSpec struct {
	// Render engines: exactly one is set (seed 003).
	Template   map[string]any `json:"template,omitempty"`
	GoTemplate string         `json:"goTemplate,omitempty"`
	Helm       *HelmSource    `json:"helm,omitempty"`
	Ytt        string         `json:"ytt,omitempty"`
	// Primary selects, among several rendered objects, the one outputs and
	// health are read from.
	Primary *ObjectSelector `json:"primary,omitempty"`

	Params []TemplateParam `json:"params,omitempty"`

	// Outputs.
	URLPath      string `json:"urlPath,omitempty"`
	RevisionPath string `json:"revisionPath,omitempty"`
	ImagePath    string `json:"imagePath,omitempty"`
	ConfigPath   string `json:"configPath,omitempty"`

	// Success and failure (Cartographer's healthRule; seed 002's rules).
	HealthRule         *HealthRule         `json:"healthRule,omitempty"`
	ObservedCompletion *ObservedCompletion `json:"observedCompletion,omitempty"`
	ObservedMatches    []ObservedMatch     `json:"observedMatches,omitempty"`
	AlwaysSuccessful   bool                `json:"alwaysSuccessful,omitempty"`

	// Immutable objects (issue 6, seed 000).
	Lifecycle       string           `json:"lifecycle,omitempty"`
	RetentionPolicy *RetentionPolicy `json:"retentionPolicy,omitempty"`
	Runnable        bool             `json:"runnable,omitempty"`

	// Shadow "last good" objects (seed 004); nil means enabled where possible.
	Shadow *bool `json:"shadow,omitempty"`

	// ProgressDeadline (a Go duration, e.g. "10m"): how long a gated
	// step's object may work on one input set before that set counts as
	// failed; empty means the default.
	ProgressDeadline string `json:"progressDeadline,omitempty"`
}

// Lifecycles.
const (
	LifecycleMutable   = "mutable"
	LifecycleImmutable = "immutable"
	LifecycleTekton    = "tekton"
)

// TemplateParam is a param a template declares, with its default.
type TemplateParam struct {
	Name    string `json:"name"`
	Default any    `json:"default,omitempty"`
}

// HelmSource is a chart rendered by the helm engine.
type HelmSource struct {
	Chart        *ChartRef      `json:"chart,omitempty"`
	ConfigMapRef *ConfigMapRef  `json:"configMapRef,omitempty"`
	Values       map[string]any `json:"values,omitempty"`
	ReleaseName  string         `json:"releaseName,omitempty"`
}

// ChartRef is a chart in an https or oci repository.
type ChartRef struct {
	Repository string `json:"repository"`
	Name       string `json:"name"`
	Version    string `json:"version,omitempty"`
	// SecretRef names a Secret of the owner's namespace with the
	// repository's credentials (username, password), read as the owner's
	// service account.
	SecretRef *SecretRef `json:"secretRef,omitempty"`
}

// SecretRef names a Secret in the owner's namespace.
type SecretRef struct {
	Name string `json:"name"`
}

// ConfigMapRef is a packaged chart stored in a ConfigMap key (binaryData).
type ConfigMapRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// ObjectSelector picks one rendered object by kind and name.
type ObjectSelector struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Name       string `json:"name,omitempty"`
}

// RetentionPolicy bounds how many finished runs are kept.
type RetentionPolicy struct {
	MaxFailedRuns     int64 `json:"maxFailedRuns"`
	MaxSuccessfulRuns int64 `json:"maxSuccessfulRuns"`
}

// HealthRule is Cartographer's health rule; exactly one field is set.
type HealthRule struct {
	AlwaysHealthy       *struct{}   `json:"alwaysHealthy,omitempty"`
	SingleConditionType string      `json:"singleConditionType,omitempty"`
	MultiMatch          *MultiMatch `json:"multiMatch,omitempty"`
}

// MultiMatch is a health rule with healthy and unhealthy matchers.
type MultiMatch struct {
	Healthy   MatchSet `json:"healthy"`
	Unhealthy MatchSet `json:"unhealthy"`
}

// MatchSet matches conditions and fields of the stamped object.
type MatchSet struct {
	MatchConditions []ConditionMatch   `json:"matchConditions,omitempty"`
	MatchFields     []FieldRequirement `json:"matchFields,omitempty"`
}

// ConditionMatch matches a status condition by type and status.
type ConditionMatch struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

// ObservedCompletion says when the stamped object has succeeded or failed.
// Cartographer writes a single {key, value}; seed 002 writes a list and
// nests and/or/not. Both decode into Rules.
type ObservedCompletion struct {
	Succeeded Rules `json:"succeeded"`
	Failed    Rules `json:"failed,omitempty"`
}

// Rules is a list of rules that all must hold (and). It decodes from a single
// rule object as well as from a list.
type Rules []Rule

// UnmarshalJSON accepts an object or a list of objects.
func (r *Rules) UnmarshalJSON(b []byte) error {
	var one Rule
	if len(b) > 0 && b[0] == '{' {
		if err := jsonvalue.Unmarshal(b, &one); err != nil {
			return err
		}
		*r = Rules{one}
		return nil
	}
	var many []Rule
	if err := jsonvalue.Unmarshal(b, &many); err != nil {
		return err
	}
	*r = many
	return nil
}

// Rule is a leaf {key, value} (the value at key equals value, compared as
// JSON values, with "True" and true equal) or one of and/or/not.
type Rule struct {
	Key   string `json:"key,omitempty"`
	Value any    `json:"value,omitempty"`
	And   Rules  `json:"and,omitempty"`
	Or    Rules  `json:"or,omitempty"`
	Not   *Rule  `json:"not,omitempty"`
}

// ObservedMatch holds when the value at Input equals the value at Output.
type ObservedMatch struct {
	Input  string `json:"input"`
	Output string `json:"output"`
}

// RunTemplateSpec is the spec of a ClusterRunTemplate.
type RunTemplateSpec struct {
	// Render engines: exactly one of Template ($(...)$ tags) or Ytt (a
	// Kontinue extension, Cartographer #214).
	Template map[string]any    `json:"template,omitempty"`
	Ytt      string            `json:"ytt,omitempty"`
	Outputs  map[string]string `json:"outputs,omitempty"`
	// Kontinue: what a run's success and failure are. A template with
	// runnable: true copies its rule here; unset, the run's Succeeded
	// condition decides, as in Cartographer.
	HealthRule         *HealthRule         `json:"healthRule,omitempty"`
	ObservedCompletion *ObservedCompletion `json:"observedCompletion,omitempty"`
	ObservedMatches    []ObservedMatch     `json:"observedMatches,omitempty"`
}

// Criterion is the run template's success rule as a template spec (nil:
// none, the Succeeded condition decides).
func (rt RunTemplateSpec) Criterion() *TemplateSpec {
	if rt.HealthRule == nil && rt.ObservedCompletion == nil && len(rt.ObservedMatches) == 0 {
		return nil
	}
	return &TemplateSpec{HealthRule: rt.HealthRule, ObservedCompletion: rt.ObservedCompletion, ObservedMatches: rt.ObservedMatches}
}

// RunnableSpec is the spec of a Runnable.
type RunnableSpec struct {
	RunTemplateRef     RunTemplateRef    `json:"runTemplateRef"`
	Inputs             map[string]any    `json:"inputs,omitempty"`
	Selector           *RunnableSelector `json:"selector,omitempty"`
	ServiceAccountName string            `json:"serviceAccountName,omitempty"`
	RetentionPolicy    *RetentionPolicy  `json:"retentionPolicy,omitempty"`
}

// RunTemplateRef names a ClusterRunTemplate.
type RunTemplateRef struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name"`
}

// RunnableSelector picks the one object a run template sees as `selected`.
type RunnableSelector struct {
	Resource       ResourceType      `json:"resource"`
	MatchingLabels map[string]string `json:"matchingLabels"`
}

// ResourceType is an apiVersion and kind.
type ResourceType struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// Decode converts an unstructured field (e.g. obj.Object["spec"]) into out
// as the API server decodes it: integers in an any stay int64, exact past
// 2^53 (jsonvalue.Remarshal).
func Decode(in any, out any) error { return jsonvalue.Remarshal(in, out) }
