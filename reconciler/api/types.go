// Package api holds the plain Go structs that Kontinue decodes the specs of
// its carto.run/v1alpha1 objects into. Objects travel as unstructured on the
// wire; these structs exist only so that the deciding code takes typed values.
//
// They are also the schema the API server enforces: hack/crdgen generates
// the CRDs (crds/) from them and the kinds of crds/kinds.go. A field's doc
// comment is its description in `kubectl explain` and docs/crds.md, so it
// speaks to users; notes for developers go in comments that are not a
// field's doc (after a blank line, or at the end of the line). The
// +kubebuilder markers are controller-gen's; the few +kontinue ones are
// explained in hack/crdgen/markers.go.
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
	// Params for the templates of this owner's steps. An owner param overrides
	// a template's default and a chain or step param given as default; it
	// cannot override a chain or step param given as value. Templates read
	// them as $(params.<name>)$.
	Params []OwnerParam `json:"params,omitempty"`
	// Service account in the owner's namespace whose permissions are used to
	// create, update and read the objects of every step. When empty, the
	// chain's serviceAccountRef is used, else the account named default in
	// this namespace.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// One param.
type OwnerParam struct {
	// Name of the param, as templates read it.
	Name string `json:"name"`
	// Value of the param: any JSON value (string, number, boolean, list,
	// object).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	Value any `json:"value"`
}

// ChainSpec is the spec of a ClusterSupplyChain or ClusterDelivery.
// (Both kinds' steps share one schema; crds/kinds.go narrows it per kind.)
// +kubebuilder:validation:XValidation:rule="(has(self.selector) && size(self.selector) > 0) || (has(self.selectorMatchExpressions) && size(self.selectorMatchExpressions) > 0) || (has(self.selectorMatchFields) && size(self.selectorMatchFields) > 0)",message="set at least one of selector, selectorMatchExpressions or selectorMatchFields"
type ChainSpec struct {
	// Labels an owner must have, with these values, to be served by this
	// chain.
	Selector map[string]string `json:"selector,omitempty"`
	// Label requirements on the owner, all of which must hold.
	// +kubebuilder:validation:items:XValidation:rule="self.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist']",message="operator must be one of In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:items:XValidation:rule="self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)",message="values is required (non-empty) for operators In and NotIn and must be empty for Exists and DoesNotExist"
	SelectorMatchExpressions []metav1.LabelSelectorRequirement `json:"selectorMatchExpressions,omitempty"`
	// Field requirements on the owner, all of which must hold. A key is a
	// path on the owner, e.g. spec.source.git.url.
	SelectorMatchFields []FieldRequirement `json:"selectorMatchFields,omitempty"`
	// Params for every step's template, overriding the templates' defaults.
	// Step params override them. A param given as value cannot be overridden
	// by the owner; one given as default can.
	// +kubebuilder:validation:MaxItems=50
	Params []Param `json:"params,omitempty"`
	// Service account used to stamp objects for an owner that names none in
	// spec.serviceAccountName.
	ServiceAccountRef *ServiceAccountRef `json:"serviceAccountRef,omitempty"`
	// The steps, run in this order. Each stamps one template for the owner
	// and may read outputs of other steps.
	// +required
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.name == a.name))",message="step names (spec.resources[].name) must be unique"
	Resources []Step `json:"resources,omitempty"`
	// A Kontinue addition: roll a change of this chain's own definitions (the
	// chain, or a template it uses) out to its owners in health-gated waves
	// (docs/rollouts.md). Without it every owner renders with the new
	// definitions at once.
	Rollout *RolloutPolicy `json:"rollout,omitempty"` // reconciler/rollout decides
	// A Kontinue addition: the steps whose success is a deployment for the
	// DORA metrics (docs/dora.md): deployment frequency, lead time for
	// changes, change failure rate and time to restore. A revision is
	// deployed when every one of them succeeded with it, and a failed
	// deployment when one of them failed with it. Default: the
	// ClusterDeploymentTemplate steps and the chain's last step.
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	DeploymentSteps []string `json:"deploymentSteps,omitempty"` // reconciler/dora decides
}

// The service account whose permissions stamp objects.
type ServiceAccountRef struct {
	// Name of the service account.
	Name string `json:"name"`
	// Namespace of the service account; defaults to the owner's namespace.
	Namespace string `json:"namespace,omitempty"`
}

// One param: a name and exactly one of value or default.
// +kontinue:validation:OneOf=`{"required":["value"]}`
// +kontinue:validation:OneOf=`{"required":["default"]}`
type Param struct {
	// Name of the param, as templates read it ($(params.<name>)$).
	Name string `json:"name"`
	// A fixed value: any JSON value. The owner cannot override it; a step
	// param overrides a chain param.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	Value any `json:"value,omitempty"`
	// A default: any JSON value. Step params and the owner's spec.params
	// override it.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	Default any `json:"default,omitempty"`

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

// One step of the chain.
type Step struct {
	// Name of the step, unique in the chain. It names the step in the owner's
	// status and in the carto.run/resource-name label of the stamped object.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// The template this step stamps: a kind and either a name or a list of
	// options.
	TemplateRef StepTemplateRef `json:"templateRef"`
	// Params for this step's template, overriding the chain's params. A param
	// given as value cannot be overridden by the owner; one given as default
	// can.
	// +kubebuilder:validation:MaxItems=50
	Params []Param `json:"params,omitempty"`
	// Source outputs (url, revision) of other steps that this step reads,
	// under $(sources.<name>.url)$ and $(sources.<name>.revision)$. When the
	// step has a single source input it is also $(source.url)$ and
	// $(source.revision)$.
	// +kubebuilder:validation:MaxItems=10
	Sources []StepInput `json:"sources,omitempty"`
	// Image outputs of other steps that this step reads, under
	// $(images.<name>.image)$. When the step has a single image input it is
	// also $(image)$. Not in a ClusterDelivery.
	// +kubebuilder:validation:MaxItems=10
	Images []StepInput `json:"images,omitempty"`
	// Config outputs of other steps that this step reads, under
	// $(configs.<name>.config)$. When the step has a single config input it
	// is also $(config)$.
	// +kubebuilder:validation:MaxItems=10
	Configs []StepInput `json:"configs,omitempty"`
	// The step whose source output (url, revision) is deployed. Required for,
	// and only allowed on, a ClusterDeploymentTemplate step of a
	// ClusterDelivery; the template reads it as $(deployment.url)$ and
	// $(deployment.revision)$.
	Deployment *DeploymentRef `json:"deployment,omitempty"`
	// A Kontinue addition: what must hold of this step's inputs before the
	// step renders with them: signatures, attestations, or that Kontinue's
	// own chain produced them (docs/verification.md). An input that fails
	// is held: the step keeps the object and outputs it has, its
	// ResourceSubmitted condition says InputNotVerified with the rule, the
	// input and the digest, and a later input that passes goes in. Only the
	// chain (the platform team's, cluster-scoped) sets it; an owner cannot
	// weaken it.
	Verify *StepVerify `json:"verify,omitempty"` // reconciler/verify decides
}

// What the inputs of one step must pass, per input. An input without an
// entry is taken as it comes.
type StepVerify struct {
	// Rules for image inputs (images[].name of this step). The image is
	// checked by its digest: an image given by tag is resolved once, and
	// the step renders with the digest that was checked
	// (registry/app@sha256:...).
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.name == a.name))",message="verify.images names each input once"
	Images []InputVerify `json:"images,omitempty"`
	// Rules for source inputs (sources[].name of this step). Signatures and
	// attestations are looked up for a source whose revision names an OCI
	// digest (sha256:...), in the registry of its url; any source can
	// require kontinue.
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.name == a.name))",message="verify.sources names each input once"
	Sources []InputVerify `json:"sources,omitempty"`
	// Rules for config inputs (configs[].name of this step): only kontinue
	// applies to a config.
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.name == a.name))",message="verify.configs names each input once"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !has(a.keys) && !has(a.keyless) && !has(a.attestations))",message="a config has no signature: verify.configs take only kontinue"
	Configs []InputVerify `json:"configs,omitempty"`
	// Rules for the deployment input of a ClusterDeploymentTemplate step,
	// as for a source; its name, when given, must be deployment.
	Deployment *InputVerify `json:"deployment,omitempty"`
}

// The rules one input must pass, all of them: a signature by one of keys or
// keyless (when either is given), each attestation, and kontinue.
// +kubebuilder:validation:XValidation:rule="has(self.keys) || has(self.keyless) || has(self.attestations) || has(self.kontinue)",message="give at least one rule: keys, keyless, attestations or kontinue"
// +kubebuilder:validation:XValidation:rule="!has(self.attestations) || has(self.keys) || has(self.keyless)",message="attestations must be signed: give keys or keyless to say by whom"
type InputVerify struct {
	// Name of the input, as the step names it (images[].name,
	// sources[].name, configs[].name; deployment).
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Public keys: a signature by any one of them passes (or by a keyless
	// identity). Signatures are found where cosign keeps them: the
	// sha256-<digest>.sig tag of the image's repository, or a Sigstore
	// bundle attached as an OCI 1.1 referrer.
	// +kubebuilder:validation:MaxItems=10
	Keys []VerifyKey `json:"keys,omitempty"`
	// Keyless signers: a signature whose Fulcio certificate names one of
	// these identities passes (or one by a key).
	// +kubebuilder:validation:MaxItems=10
	Keyless []KeylessIdentity `json:"keyless,omitempty"`
	// In-toto attestations that must exist for the input's digest, each
	// signed by one of keys or keyless.
	// +kubebuilder:validation:MaxItems=10
	Attestations []AttestationRule `json:"attestations,omitempty"`
	// The input was produced by this cluster's chains: a statement
	// Kontinue signed (its --attestation-key, docs/attestation.md) names
	// the input's digest among the outputs of an earlier step of this
	// owner, or of the Workload that stamped this Deliverable. Write
	// kontinue: {}.
	Kontinue *KontinueRule `json:"kontinue,omitempty"`
}

// A public key: exactly one of publicKey, secretRef or configMapRef.
// +kubebuilder:validation:XValidation:rule="[has(self.publicKey), has(self.secretRef), has(self.configMapRef)].filter(x, x).size() == 1",message="a key sets exactly one of publicKey, secretRef or configMapRef"
type VerifyKey struct {
	// A PEM public key (PKIX): ECDSA P-256, ed25519 or RSA (2048 bits or
	// more).
	// +kubebuilder:validation:MaxLength=16384
	PublicKey string `json:"publicKey,omitempty"`
	// A key of a Secret holding the PEM public key, read by Kontinue.
	SecretRef *VerifyDataRef `json:"secretRef,omitempty"`
	// A key of a ConfigMap holding the PEM public key, read by Kontinue.
	ConfigMapRef *VerifyDataRef `json:"configMapRef,omitempty"`
}

// A key of a Secret or ConfigMap in a namespace the platform team names
// (not the owner's: an app team must not be able to change it).
type VerifyDataRef struct {
	// Namespace of the object.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the object.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// The key of its data.
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// A keyless signer: the identity and issuer its Fulcio certificate must
// name, and the trusted root that certificate must chain to.
// +kubebuilder:validation:XValidation:rule="has(self.subject) != has(self.subjectRegExp)",message="keyless sets exactly one of subject or subjectRegExp"
// +kubebuilder:validation:XValidation:rule="has(self.issuer) != has(self.issuerRegExp)",message="keyless sets exactly one of issuer or issuerRegExp"
type KeylessIdentity struct {
	// The certificate's subject (its SAN: an email, a workflow URI), exactly.
	// +kubebuilder:validation:MaxLength=1024
	Subject string `json:"subject,omitempty"`
	// A regular expression (Go syntax, anchored by you) the subject matches.
	// +kubebuilder:validation:MaxLength=1024
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
	// The OIDC issuer the certificate names, exactly, e.g.
	// https://token.actions.githubusercontent.com.
	// +kubebuilder:validation:MaxLength=1024
	Issuer string `json:"issuer,omitempty"`
	// A regular expression the issuer matches.
	// +kubebuilder:validation:MaxLength=1024
	IssuerRegExp string `json:"issuerRegExp,omitempty"`
	// The Sigstore trusted root (trusted_root.json: Fulcio CAs, Rekor logs,
	// timestamp authorities) that certificates must chain to, from a key
	// of a ConfigMap or Secret. When the root has a transparency log, each
	// signature must carry its inclusion in that log; without one, the
	// certificate must be valid now.
	TrustedRoot TrustedRootRef `json:"trustedRoot"`
}

// Where a trusted root is kept: exactly one of configMapRef or secretRef.
// +kubebuilder:validation:XValidation:rule="has(self.configMapRef) != has(self.secretRef)",message="trustedRoot sets exactly one of configMapRef or secretRef"
type TrustedRootRef struct {
	// A key of a ConfigMap holding trusted_root.json.
	ConfigMapRef *VerifyDataRef `json:"configMapRef,omitempty"`
	// A key of a Secret holding trusted_root.json.
	SecretRef *VerifyDataRef `json:"secretRef,omitempty"`
}

// An in-toto attestation the input's digest must have.
type AttestationRule struct {
	// The statement's predicateType, e.g. https://slsa.dev/provenance/v1.
	// +kubebuilder:validation:MaxLength=1024
	PredicateType string `json:"predicateType"`
	// For SLSA provenance (v0.2 or v1): the builder id it must name.
	// +kubebuilder:validation:MaxLength=1024
	BuilderID string `json:"builderID,omitempty"`
	// For a vulnerability scan (the in-toto vulns predicate): no finding
	// may be above this severity. A finding whose severity cannot be read
	// counts as critical.
	// +kubebuilder:validation:Enum=none;low;medium;high
	MaxSeverity string `json:"maxSeverity,omitempty"`
}

// Kontinue's own statements; no settings yet.
type KontinueRule struct{}

// The template a step stamps: a kind and either a name or a list of options.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.options)",message="templateRef must set exactly one of name or options"
type StepTemplateRef struct {
	// Kind of the template.
	// +kubebuilder:validation:Enum=ClusterSourceTemplate;ClusterImageTemplate;ClusterConfigTemplate;ClusterTemplate;ClusterDeploymentTemplate
	Kind string `json:"kind"`
	// Name of the template.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Candidate templates, chosen per owner: the option whose whole selector
	// matches and is the most specific (label terms + expressions + field
	// terms) wins. If not exactly one option wins, the step fails with
	// TemplateOptionsMatchError. Give at least two options, each with a
	// unique name, and at most one passThrough.
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:XValidation:rule="self.filter(o, has(o.passThrough)).size() <= 1",message="at most one option may be a passThrough"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !has(a.name) || self.exists_one(b, has(b.name) && b.name == a.name))",message="option names must be unique"
	Options []TemplateOption `json:"options,omitempty"`
}

// One candidate: a template name, or passThrough.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.passThrough)",message="an option must set exactly one of name or passThrough"
type TemplateOption struct {
	// Name of a template of templateRef.kind.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Stamp nothing and pass the named input of this step on as the step's
	// output (the step's reason is PassThrough).
	// +kubebuilder:validation:MaxLength=63
	PassThrough string `json:"passThrough,omitempty"`
	// Which owners this option is for. All given parts must match; an empty
	// selector matches every one (useful as a fallback, since the most
	// specific match wins).
	Selector OptionSelector `json:"selector"`
} // seed 001

// Which owners an option is for.
type OptionSelector struct {
	// Labels the owner must have, with these values.
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// Label requirements on the owner, all of which must hold.
	// +kubebuilder:validation:items:XValidation:rule="self.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist']",message="operator must be one of In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:items:XValidation:rule="self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)",message="values is required (non-empty) for operators In and NotIn and must be empty for Exists and DoesNotExist"
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
	// Field requirements on the owner, all of which must hold. A key is a
	// path on the owner; it may start with workload. or deliverable. (e.g.
	// workload.spec.source.git) or be relative to the owner
	// (spec.source.git).
	MatchFields []FieldRequirement `json:"matchFields,omitempty"`
}

// Field selector operators.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
)

// A requirement on a field, addressed by a path. values is required
// (non-empty) for In and NotIn and must be empty for Exists and
// DoesNotExist.
// +kontinue:validation:AnyOf=`{"properties":{"operator":{"enum":["In","NotIn"]},"values":{"minItems":1}},"required":["values"]}`
// +kontinue:validation:AnyOf=`{"properties":{"operator":{"enum":["Exists","DoesNotExist"]},"values":{"maxItems":0}}}`
type FieldRequirement struct {
	// Path on the object. Path syntax: the JSONPath subset Cartographer
	// uses, leading dot optional, e.g.
	// status.conditions[?(@.type=="Ready")].status or
	// metadata.labels['app.kubernetes.io/name']; it must yield exactly one
	// value.
	Key string `json:"key"`
	// In: the value at key equals one of values. NotIn: it equals none of
	// them (or nothing is at key). Exists: key yields a value. DoesNotExist:
	// it does not.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator string `json:"operator"`
	// JSON values compared with the value at key (strings, numbers,
	// booleans, objects). Required and non-empty for In and NotIn; must be
	// empty for Exists and DoesNotExist.
	// +kubebuilder:validation:Schemaless
	// +kontinue:schema=`{"type":"array","items":{"description":"A JSON value.","nullable":true,"x-kubernetes-preserve-unknown-fields":true}}`
	Values []any `json:"values,omitempty"`
	// Path on the stamped object whose value is copied into the step's
	// Healthy condition message when this field matches, e.g. status.message.
	// Health rules only.
	MessagePath string `json:"messagePath,omitempty"`
}

// One input: an output of another step.
type StepInput struct {
	// Name under which the template reads the input.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Name of the step (in this chain) whose output is read.
	// +kubebuilder:validation:MaxLength=63
	Resource string `json:"resource"`
}

// The deployment input of a delivery step.
type DeploymentRef struct {
	// Name of the step (in this chain) whose source output is deployed.
	// +kubebuilder:validation:MaxLength=63
	Resource string `json:"resource"`
}

// TemplateSpec is the spec shared by every template kind. Which output paths
// apply depends on the kind (crds/kinds.go keeps each kind's own).
// Render engines: exactly one is set (seed 003). Success and failure:
// Cartographer's healthRule and seed 002's rules. Immutable objects: issue
// 6, seed 000. Shadow "last good" objects: seed 004.
// +kubebuilder:validation:XValidation:rule="[has(self.template), has(self.goTemplate), has(self.helm), has(self.ytt)].filter(x, x).size() == 1",message="set exactly one of template, goTemplate, helm or ytt"
// +kubebuilder:validation:XValidation:rule="[has(self.healthRule), has(self.observedCompletion), has(self.observedMatches) && size(self.observedMatches) > 0, has(self.alwaysSuccessful) && self.alwaysSuccessful].filter(x, x).size() <= 1",message="set at most one of healthRule, observedCompletion, observedMatches or alwaysSuccessful"
// +kubebuilder:validation:XValidation:rule="!has(self.runnable) || !self.runnable || !has(self.lifecycle) || self.lifecycle == 'mutable'",message="runnable: true already makes immutable objects; use it only with lifecycle unset or mutable"
// +kubebuilder:validation:XValidation:rule="!has(self.runnable) || !self.runnable || has(self.healthRule) || has(self.observedCompletion) || (has(self.observedMatches) && size(self.observedMatches) > 0)",message="runnable: true needs a rule that says when a run has succeeded: set healthRule, observedCompletion or observedMatches (for Tekton runs, healthRule: {singleConditionType: Succeeded})"
// +kubebuilder:validation:XValidation:rule="!has(self.shadow) || !self.shadow || has(self.healthRule) || has(self.observedCompletion) || (has(self.observedMatches) && size(self.observedMatches) > 0)",message="shadow: true needs a rule that says when the object has failed: set healthRule, observedCompletion or observedMatches"
// +kubebuilder:validation:XValidation:rule="!has(self.shadow) || !self.shadow || ((!has(self.lifecycle) || self.lifecycle == 'mutable') && (!has(self.runnable) || !self.runnable))",message="shadow: true is for objects updated in place, not with lifecycle immutable or tekton or runnable: true (there the newest run that succeeded keeps serving the outputs)"
type TemplateSpec struct {
	// The Kubernetes object to stamp, with $(...)$ tags replaced from the
	// template context: $(workload...)$ or $(deliverable...)$ (the owner),
	// $(params.<name>)$, $(sources.<step>.url)$, $(images.<step>.image)$,
	// $(configs.<step>.config)$, $(deployment.url)$, $(labels...)$, and
	// $(source...)$, $(image...)$, $(config...)$ when the step has exactly
	// one input of that type. A string that is exactly one tag takes the
	// value's own type (object, list, number); a tag inside a longer string
	// is interpolated. A tag that resolves to nothing fails the step
	// (TemplateStampFailure). The object always lands in the owner's
	// namespace. Set exactly one of template, goTemplate, helm or ytt.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Template map[string]any `json:"template,omitempty"`
	// A Go text/template (with the Sprig functions) that renders one or more
	// YAML documents; the template context is its data ({{
	// .workload.metadata.name }}, {{ .params.foo }}, ...). Set exactly one of
	// template, goTemplate, helm or ytt.
	GoTemplate string `json:"goTemplate,omitempty"`
	// Render a Helm chart; every object it renders is stamped. Set exactly
	// one of chart or configMapRef. Set exactly one of template, goTemplate,
	// helm or ytt.
	Helm *HelmSource `json:"helm,omitempty"`
	// A ytt template (as in Cartographer) that renders one or more objects;
	// the template context is given as data values (data.values.workload,
	// data.values.params, ...). Set exactly one of template, goTemplate, helm
	// or ytt.
	Ytt string `json:"ytt,omitempty"`
	// When the template renders several objects, the one whose outputs and
	// health are read. Not needed when it renders one.
	Primary *ObjectSelector `json:"primary,omitempty"`

	// Params the template reads as $(params.<name>)$, with their defaults.
	// Chain params, step params and the owner's spec.params override a
	// default, in that order. Params not declared here are passed too.
	Params []TemplateParam `json:"params,omitempty"`

	// Path on the stamped object of the source URL passed on as
	// sources.<step>.url, e.g. .status.artifact.url. Path syntax: the JSONPath subset Cartographer uses, leading dot
	// optional, e.g. status.conditions[?(@.type=="Ready")].status or
	// metadata.labels['app.kubernetes.io/name']; it must yield exactly one
	// value.
	URLPath string `json:"urlPath,omitempty"`
	// Path on the stamped object of the source revision passed on as
	// sources.<step>.revision, e.g. .status.artifact.revision. Path syntax: the JSONPath subset Cartographer uses, leading dot
	// optional, e.g. status.conditions[?(@.type=="Ready")].status or
	// metadata.labels['app.kubernetes.io/name']; it must yield exactly one
	// value.
	RevisionPath string `json:"revisionPath,omitempty"`
	// Path on the stamped object of the image passed on as
	// images.<step>.image, e.g. .status.latestImage. Path syntax: the JSONPath subset Cartographer uses, leading dot
	// optional, e.g. status.conditions[?(@.type=="Ready")].status or
	// metadata.labels['app.kubernetes.io/name']; it must yield exactly one
	// value.
	ImagePath string `json:"imagePath,omitempty"`
	// Path on the stamped object of the configuration passed on as
	// configs.<step>.config, e.g. .data. Path syntax: the JSONPath subset Cartographer uses, leading dot
	// optional, e.g. status.conditions[?(@.type=="Ready")].status or
	// metadata.labels['app.kubernetes.io/name']; it must yield exactly one
	// value.
	ConfigPath string `json:"configPath,omitempty"`

	// When the stamped object is healthy (Cartographer's health rule);
	// drives the step's Healthy condition. Set exactly one of alwaysHealthy,
	// singleConditionType or multiMatch.
	HealthRule *HealthRule `json:"healthRule,omitempty"`
	// When the stamped object has succeeded or failed; drives the step's
	// Healthy condition.
	ObservedCompletion *ObservedCompletion `json:"observedCompletion,omitempty"`
	// Pairs of paths on the stamped object; it has succeeded when, for every
	// pair, the value at input equals the value at output (e.g. input:
	// spec.image, output: status.image); drives the step's Healthy
	// condition.
	ObservedMatches []ObservedMatch `json:"observedMatches,omitempty"`
	// The stamped object succeeds as soon as it is applied, for objects
	// nothing reconciles, such as a ConfigMap.
	AlwaysSuccessful bool `json:"alwaysSuccessful,omitempty"`

	// mutable (the default): one object, updated in place when inputs
	// change. immutable: every new set of inputs creates a new object (give
	// it metadata.generateName); outputs come from the newest healthy one,
	// downstream steps wait until one exists, and old ones are pruned per
	// retentionPolicy. tekton: like immutable, and without a rule an object
	// is healthy when its Succeeded condition is True (Tekton PipelineRun,
	// TaskRun).
	// +kubebuilder:validation:Enum=mutable;immutable;tekton
	Lifecycle string `json:"lifecycle,omitempty"`
	// How many finished objects an immutable, tekton or runnable template
	// keeps; without it, 10 failed and 10 successful are kept.
	RetentionPolicy *RetentionPolicy `json:"retentionPolicy,omitempty"`
	// Stamp the object through a generated ClusterRunTemplate and Runnable,
	// so each new set of inputs creates a new object (as with lifecycle
	// immutable) and the outputs are read from the newest object that
	// succeeded. Needs healthRule, observedCompletion or observedMatches,
	// which decides each object's success and failure (it is copied to the
	// generated ClusterRunTemplate). Only with lifecycle unset or mutable.
	Runnable bool `json:"runnable,omitempty"`

	// Keep a 'last good' shadow object: when the object stamped from the
	// newest inputs fails, an object stamped from the last inputs that
	// succeeded keeps receiving outside updates (e.g. base-image rebuilds)
	// and its outputs are passed on until the primary object succeeds again.
	// Needs observedCompletion or observedMatches (a failure is the failed
	// rule or the progressDeadline passing); not used for
	// ClusterDeploymentTemplates or immutable lifecycles. Unset means on
	// where possible; false turns it off. With only a healthRule, true opts
	// in: the healthRule becomes the success rule (healthy is success,
	// unhealthy failure, unknown processing; inputs are held as with
	// observedCompletion) and an unhealthy object gets a shadow; unset keeps
	// Cartographer's behaviour (no gating, no shadow).
	Shadow *bool `json:"shadow,omitempty"` // nil: enabled where possible

	// How long the object may work on one set of inputs (neither succeeding
	// nor failing) before that set counts as failed, reason
	// ProgressDeadlineExceeded: then the newest held inputs are applied and,
	// where the template can have one, a shadow is stamped. Applies to gated
	// templates (observedCompletion, observedMatches, a healthRule with
	// shadow: true). A duration such as 90s, 10m or 1h; default 10m.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="progressDeadline must be a positive duration such as 90s, 10m or 1h"
	ProgressDeadline string `json:"progressDeadline,omitempty"` // a Go duration; empty: the default
}

// Lifecycles.
const (
	LifecycleMutable   = "mutable"
	LifecycleImmutable = "immutable"
	LifecycleTekton    = "tekton"
)

// Lifecycles are the names spec.lifecycle takes, the default first: its
// enum (crds tests it) and reconciler/step's lifecycles (step tests it).
var Lifecycles = []string{LifecycleMutable, LifecycleImmutable, LifecycleTekton}

// One param.
type TemplateParam struct {
	// Name of the param.
	Name string `json:"name"`
	// Default value: any JSON value.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +nullable
	Default any `json:"default,omitempty"`
}

// A chart rendered by the helm engine.
// +kubebuilder:validation:XValidation:rule="has(self.chart) != has(self.configMapRef)",message="helm must set exactly one of chart or configMapRef"
type HelmSource struct {
	// A chart in an https or oci:// repository.
	Chart *ChartRef `json:"chart,omitempty"`
	// A packaged chart (.tgz) stored in a ConfigMap key (binaryData).
	ConfigMapRef *ConfigMapRef `json:"configMapRef,omitempty"`
	// Values for the chart, like a values.yaml; $(...)$ tags are replaced as
	// in template.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Values map[string]any `json:"values,omitempty"`
	// Release name the chart is rendered with; defaults to the owner's name.
	ReleaseName string `json:"releaseName,omitempty"`
}

// A chart in an https or oci repository.
type ChartRef struct {
	// Repository URL, e.g. https://charts.example.com or
	// oci://registry.example.com/charts.
	Repository string `json:"repository"`
	// Name of the chart.
	Name string `json:"name"`
	// Version of the chart; the latest when empty.
	Version string `json:"version,omitempty"`
	// Credentials of a private repository or registry, read as the owner's
	// service account from a Secret in the owner's namespace with keys
	// username and password (type kubernetes.io/basic-auth). They are sent
	// only to the repository's host (https) or the registry and the token
	// service it names (oci).
	SecretRef *SecretRef `json:"secretRef,omitempty"`
}

// A Secret in the owner's namespace.
type SecretRef struct {
	// Name of the Secret.
	Name string `json:"name"`
}

// A packaged chart stored in a ConfigMap key (binaryData).
type ConfigMapRef struct {
	// Namespace of the ConfigMap.
	Namespace string `json:"namespace"`
	// Name of the ConfigMap.
	Name string `json:"name"`
	// Key that holds the packaged chart.
	Key string `json:"key"`
}

// One rendered object, picked by kind and name.
type ObjectSelector struct {
	// API version of the object, when kind alone is ambiguous.
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Name of the object, when kind alone is ambiguous.
	Name string `json:"name,omitempty"`
}

// How many finished objects to keep.
type RetentionPolicy struct {
	// How many failed objects to keep.
	// +kubebuilder:validation:Minimum=0
	MaxFailedRuns int64 `json:"maxFailedRuns"`
	// How many successful objects to keep.
	// +kubebuilder:validation:Minimum=0
	MaxSuccessfulRuns int64 `json:"maxSuccessfulRuns"`
}

// Cartographer's health rule; exactly one field is set.
// +kubebuilder:validation:XValidation:rule="[has(self.alwaysHealthy), has(self.singleConditionType), has(self.multiMatch)].filter(x, x).size() == 1",message="healthRule must set exactly one of alwaysHealthy, singleConditionType or multiMatch"
type HealthRule struct {
	// Healthy as soon as it is applied: write alwaysHealthy: {}.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	AlwaysHealthy *struct{} `json:"alwaysHealthy,omitempty"`
	// Type of a condition of the stamped object: healthy when it is True,
	// unhealthy when False, unknown otherwise (reason <Type>Condition).
	SingleConditionType string `json:"singleConditionType,omitempty"`
	// Explicit matchers for healthy and unhealthy.
	MultiMatch *MultiMatch `json:"multiMatch,omitempty"`
}

// Explicit matchers for healthy and unhealthy.
type MultiMatch struct {
	// Matchers for healthy. Set matchConditions, matchFields, or both.
	// +kubebuilder:validation:XValidation:rule="(has(self.matchConditions) && size(self.matchConditions) > 0) || (has(self.matchFields) && size(self.matchFields) > 0)",message="healthy needs at least one matchCondition or matchField"
	Healthy MatchSet `json:"healthy"`
	// Matchers for unhealthy. Set matchConditions, matchFields, or both.
	// +kubebuilder:validation:XValidation:rule="(has(self.matchConditions) && size(self.matchConditions) > 0) || (has(self.matchFields) && size(self.matchFields) > 0)",message="unhealthy needs at least one matchCondition or matchField"
	Unhealthy MatchSet `json:"unhealthy"`
}

// Conditions and fields of the stamped object to match.
type MatchSet struct {
	// Conditions of the stamped object that match.
	MatchConditions []ConditionMatch `json:"matchConditions,omitempty"`
	// Fields of the stamped object that match; a key is a path on the
	// stamped object.
	MatchFields []FieldRequirement `json:"matchFields,omitempty"`
}

// A condition to match.
type ConditionMatch struct {
	// Type of the condition, e.g. Ready.
	Type string `json:"type"`
	// Status it must have: True, False or Unknown.
	Status string `json:"status"`
}

// When the stamped object has succeeded or failed. Cartographer writes a
// single {key, value}; seed 002 writes a list and nests and/or/not. Both
// decode into Rules.
type ObservedCompletion struct {
	// When the object has succeeded. Either one rule {key, value}
	// (Cartographer's form) or a list of rules that must all hold
	// (Kontinue's form). A list item is a rule {key, value}, or {and:
	// [rules]}, {or: [rules]} or {not: rule}, nested as deep as needed. key
	// is a path on the stamped object; value is the JSON value it must
	// equal, where the string "True" and the boolean true are equal. Path syntax: the JSONPath subset Cartographer uses, leading dot
	// optional, e.g. status.conditions[?(@.type=="Ready")].status or
	// metadata.labels['app.kubernetes.io/name']; it must yield exactly one
	// value.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Succeeded Rules `json:"succeeded"`
	// When the object has failed (optional), in the form of succeeded.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Failed Rules `json:"failed,omitempty"`
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

// One pair of paths: it holds when the value at input equals the value at
// output.
type ObservedMatch struct {
	// Path of a value the template wrote, e.g. spec.source.revision. Path syntax: the JSONPath subset Cartographer uses, leading dot
	// optional, e.g. status.conditions[?(@.type=="Ready")].status or
	// metadata.labels['app.kubernetes.io/name']; it must yield exactly one
	// value.
	Input string `json:"input"`
	// Path of the value the object's controller reports when it has caught
	// up, e.g. status.lastAppliedRevision.
	Output string `json:"output"`
}

// RunTemplateSpec is the spec of a ClusterRunTemplate. Render engines:
// exactly one of Template ($(...)$ tags) or Ytt (a Kontinue extension,
// Cartographer #214).
// +kubebuilder:validation:XValidation:rule="[has(self.template), has(self.ytt)].filter(x, x).size() == 1",message="set exactly one of template or ytt"
type RunTemplateSpec struct {
	// The object to stamp, once per new set of inputs; give it
	// metadata.generateName. $(runnable...)$ tags read the Runnable (its
	// inputs are $(runnable.spec.inputs...)$) and $(selected...)$ tags read
	// the object picked by the Runnable's selector. Set exactly one of
	// template or ytt.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Template map[string]any `json:"template,omitempty"`
	// Kontinue: a ytt template that renders the object to stamp, exactly
	// one, once per new set of inputs; give it metadata.generateName. Its
	// data values are data.values.runnable (the Runnable without its status;
	// its inputs are data.values.runnable.spec.inputs) and
	// data.values.selected (the object picked by the Runnable's selector,
	// null without a selector). Set exactly one of template or ytt.
	Ytt string `json:"ytt,omitempty"`
	// Output name to path on the stamped object. The Runnable reports each
	// in status.outputs.<name>, read from its newest object that succeeded
	// (by healthRule, observedCompletion or observedMatches when set, else
	// its Succeeded condition is True). Path syntax: the JSONPath subset Cartographer uses, leading dot
	// optional, e.g. status.conditions[?(@.type=="Ready")].status or
	// metadata.labels['app.kubernetes.io/name']; it must yield exactly one
	// value.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Kontinue: when a stamped object has succeeded (healthy) or failed
	// (unhealthy), instead of its Succeeded condition. Set exactly one of
	// alwaysHealthy, singleConditionType or multiMatch. A template with
	// runnable: true copies its own here.
	HealthRule *HealthRule `json:"healthRule,omitempty"`
	// Kontinue: when a stamped object has succeeded or failed, instead of
	// its Succeeded condition. A template with runnable: true copies its own
	// here.
	ObservedCompletion *ObservedCompletion `json:"observedCompletion,omitempty"`
	// Pairs of paths on the stamped object; it has succeeded when, for every
	// pair, the value at input equals the value at output (e.g. input:
	// spec.image, output: status.image). Kontinue: used instead of the
	// Succeeded condition; a template with runnable: true copies its own
	// here.
	ObservedMatches []ObservedMatch `json:"observedMatches,omitempty"`
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
	// The ClusterRunTemplate to stamp.
	RunTemplateRef RunTemplateRef `json:"runTemplateRef"`
	// Values the run template reads as $(runnable.spec.inputs...)$. A change
	// of inputs stamps a new object; identical inputs never stamp a second
	// one.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Inputs map[string]any `json:"inputs,omitempty"`
	// Picks one existing object in the Runnable's namespace that the run
	// template reads as $(selected...)$. Exactly one object must match.
	// +nullable
	Selector *RunnableSelector `json:"selector,omitempty"`
	// Service account in the Runnable's namespace whose permissions are used
	// to create and read the stamped objects; default when empty.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// How many finished objects this Runnable stamped to keep; without it,
	// 10 failed and 10 successful are kept.
	RetentionPolicy *RetentionPolicy `json:"retentionPolicy,omitempty"`
}

// The ClusterRunTemplate a Runnable stamps.
type RunTemplateRef struct {
	// Kind of the template: ClusterRunTemplate.
	// +kubebuilder:validation:Enum=ClusterRunTemplate
	// +kubebuilder:default=ClusterRunTemplate
	Kind string `json:"kind,omitempty"`
	// Name of the ClusterRunTemplate.
	Name string `json:"name"`
}

// The one object a run template sees as `selected`.
type RunnableSelector struct {
	// Type of the object to select.
	Resource ResourceType `json:"resource"`
	// Labels the object must have, with these values.
	MatchingLabels map[string]string `json:"matchingLabels"`
}

// An apiVersion and kind.
type ResourceType struct {
	// API version, e.g. tekton.dev/v1beta1.
	APIVersion string `json:"apiVersion"`
	// Kind, e.g. Pipeline.
	Kind string `json:"kind"`
}

// Decode converts an unstructured field (e.g. obj.Object["spec"]) into out
// as the API server decodes it: integers in an any stay int64, exact past
// 2^53 (jsonvalue.Remarshal).
func Decode(in any, out any) error { return jsonvalue.Remarshal(in, out) }
