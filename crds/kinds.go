package crds

// The eleven kinds of carto.run/v1alpha1, as Go types: the source from which
// hack/crdgen (controller-gen's CRD generator) writes carto.run_*.yaml next
// to this file. A kind's spec and status are the types the controller
// decodes and writes (reconciler/api, reconciler/status); this file adds
// only what is a kind's own: its names, columns and subresources, the
// Workload's fields that only templates read, and how a kind narrows a type
// it shares with others (+kontinue:variant, hack/crdgen/markers.go).
//
// Nothing decodes into these types: objects travel as unstructured.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/status"
)

// Cartographer v0.8.11's columns, same names, order and paths, so that
// `kubectl get workloads` reads the same; Message only with -o wide.

// A Workload is an application a developer wants built and run. Kontinue
// selects the one ClusterSupplyChain whose selector matches the workload and
// stamps the objects of its steps in the workload's namespace, passing each
// step's outputs to the next.
//
// +kubebuilder:resource:shortName=wld,categories={all,carto}
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kubebuilder:printcolumn:name="Source",type="string",JSONPath=`.spec.source['git.url','image']`,description="Git URL or image of the source."
// +kubebuilder:printcolumn:name="SupplyChain",type="string",JSONPath=`.status.supplyChainRef.name`,description="The ClusterSupplyChain chosen for the workload."
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=='Ready')].status`,description="Status of the Ready condition of the workload: True, False or Unknown."
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=`.status.conditions[?(@.type=='Ready')].reason`,description="Reason of the Ready condition of the workload."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=`.metadata.creationTimestamp`,description="Time since the object was created."
// +kubebuilder:printcolumn:name="Message",type="string",priority=1,JSONPath=`.status.conditions[?(@.type=='Ready')].message`,description="Message of the Ready condition of the workload (kubectl get -o wide)."
// +kontinue:variant:path="status.deliveryRef",omit=true
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// What the developer wants built and run. A ClusterSupplyChain is chosen
	// by the workload's labels and fields; its templates read these values.
	Spec WorkloadSpec `json:"spec"`
	// Observed state of the workload, written by the controller.
	Status status.OwnerStatus `json:"status,omitempty"`
}

// WorkloadSpec is what the developer wants built and run: the owner's spec
// Kontinue decides on, and what only templates read.
type WorkloadSpec struct {
	api.OwnerSpec `json:",inline"`
	// Where the workload's source code comes from. Source templates read it
	// as $(workload.spec.source...)$. Set exactly one of git or image.
	// +nullable
	Source *Source `json:"source,omitempty"`
	// Settings for the build step.
	Build *Build `json:"build,omitempty"`
	// Environment variables, in the shape of a container's env (name with
	// value or valueFrom). Templates read them as $(workload.spec.env)$.
	Env []EnvVar `json:"env,omitempty"`
	// A prebuilt image to run, for supply chains that skip building from
	// source.
	// +nullable
	Image string `json:"image,omitempty"`
	// Compute resources for the running application, in the shape of a
	// container's resources (requests, limits).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Resources map[string]any `json:"resources,omitempty"`
	// Services the application binds to (e.g. a database), for templates
	// that create bindings.
	ServiceClaims []ServiceClaim `json:"serviceClaims,omitempty"`
}

// Where the owner's source code comes from.
// +kubebuilder:validation:XValidation:rule="has(self.git) != has(self.image)",message="spec.source must set exactly one of git or image"
type Source struct {
	// A git repository.
	// +nullable
	Git *GitSource `json:"git,omitempty"`
	// An OCI image that holds the source code (e.g. an imgpkg bundle), as
	// registry/repository:tag or @digest.
	// +nullable
	Image string `json:"image,omitempty"`
	// Folder inside the source to use instead of its root.
	// +nullable
	SubPath string `json:"subPath,omitempty"`
}

// A git repository.
type GitSource struct {
	// URL of the repository, e.g. https://github.com/org/app.git.
	// +nullable
	URL string `json:"url,omitempty"`
	// Which revision to use: a branch, a tag or a commit.
	// +nullable
	Ref *GitRef `json:"ref,omitempty"`
}

// Which revision to use.
type GitRef struct {
	// Branch to follow, e.g. main.
	// +nullable
	Branch string `json:"branch,omitempty"`
	// Tag to use, e.g. v1.2.3.
	// +nullable
	Tag string `json:"tag,omitempty"`
	// Commit SHA to use.
	// +nullable
	Commit string `json:"commit,omitempty"`
}

// Settings for the build step.
type Build struct {
	// Environment variables for the build, in the shape of a container's
	// env. Templates read them as $(workload.spec.build.env)$.
	Env []EnvVar `json:"env,omitempty"`
}

// One environment variable.
// +kubebuilder:pruning:PreserveUnknownFields
type EnvVar struct {
	// Name of the variable.
	Name string `json:"name"`
	// Value of the variable.
	Value string `json:"value,omitempty"`
	// Where the value comes from (secretKeyRef, configMapKeyRef, fieldRef,
	// resourceFieldRef), as in a container.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ValueFrom map[string]any `json:"valueFrom,omitempty"`
}

// One service claim.
type ServiceClaim struct {
	// Name of the claim, as the application sees it.
	Name string `json:"name"`
	// The object that provides the service.
	// +nullable
	Ref *ServiceRef `json:"ref,omitempty"`
}

// The object that provides a service.
type ServiceRef struct {
	// API version of the service object.
	APIVersion string `json:"apiVersion"`
	// Kind of the service object.
	Kind string `json:"kind"`
	// Name of the service object, in the workload's namespace.
	Name string `json:"name"`
}

// A Deliverable is configuration (usually produced by a supply chain) to
// deploy. Kontinue selects the one ClusterDelivery whose selector matches it
// and stamps the objects of its steps in the deliverable's namespace.
//
// +kubebuilder:resource:shortName=dlv,categories={all,carto}
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kubebuilder:printcolumn:name="Source",type="string",JSONPath=`.spec.source['git.url','image']`,description="Git URL or image of the source."
// +kubebuilder:printcolumn:name="Delivery",type="string",JSONPath=`.status.deliveryRef.name`,description="The ClusterDelivery chosen for the deliverable."
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=='Ready')].status`,description="Status of the Ready condition of the deliverable: True, False or Unknown."
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=`.status.conditions[?(@.type=='Ready')].reason`,description="Reason of the Ready condition of the deliverable."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=`.metadata.creationTimestamp`,description="Time since the object was created."
// +kubebuilder:printcolumn:name="Message",type="string",priority=1,JSONPath=`.status.conditions[?(@.type=='Ready')].message`,description="Message of the Ready condition of the deliverable (kubectl get -o wide)."
// +kontinue:variant:path="status.supplyChainRef",omit=true
type Deliverable struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// What should be delivered (deployed). A ClusterDelivery is chosen by
	// the deliverable's labels and fields; its templates read these values.
	Spec DeliverableSpec `json:"spec"`
	// Observed state of the deliverable, written by the controller.
	Status status.OwnerStatus `json:"status,omitempty"`
}

// DeliverableSpec is what should be delivered.
type DeliverableSpec struct {
	api.OwnerSpec `json:",inline"`
	// Where the deliverable's source code comes from. Source templates read
	// it as $(deliverable.spec.source...)$. Set exactly one of git or image.
	// +nullable
	Source *Source `json:"source,omitempty"`
}

// A supply chain has no deployment steps; each input names a step of the
// input's kind.

// A ClusterSupplyChain is a path to production for workloads: a selector
// choosing the workloads it serves and an ordered list of steps, each
// stamping a template. Among the chains whose whole selector matches a
// workload, the most specific wins; a tie is MultipleSupplyChainMatches,
// none is SupplyChainNotFound.
//
// +kubebuilder:resource:scope=Cluster,shortName=csc,categories=carto
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Status of the Ready condition of the ClusterSupplyChain: True, False or Unknown."
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Reason of the Ready condition of the ClusterSupplyChain."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=`.metadata.creationTimestamp`,description="Time since the object was created."
// +kontinue:variant:path="spec.selectorMatchFields[].messagePath",omit=true
// +kontinue:variant:path="spec.resources[].templateRef.options[].selector.matchFields[].messagePath",omit=true
// +kontinue:variant:path="spec.resources[].templateRef.kind",enum={ClusterSourceTemplate,ClusterImageTemplate,ClusterConfigTemplate,ClusterTemplate}
// +kontinue:variant:path="spec.resources[]",rule="!has(self.deployment)",message="a ClusterSupplyChain step cannot receive deployment; only ClusterDelivery steps do",messageExpression="'step ' + self.name + ': a ClusterSupplyChain step cannot receive deployment; only ClusterDelivery steps do'"
// +kontinue:variant:path="spec.resources",rule="self.all(s, !has(s.sources) || s.sources.all(i, self.exists(o, o.name == i.resource && (o.templateRef.kind == 'ClusterSourceTemplate'))))",message="every sources[].resource must name a step of this chain whose templateRef.kind is ClusterSourceTemplate"
// +kontinue:variant:path="spec.resources",rule="self.all(s, !has(s.images) || s.images.all(i, self.exists(o, o.name == i.resource && (o.templateRef.kind == 'ClusterImageTemplate'))))",message="every images[].resource must name a step of this chain whose templateRef.kind is ClusterImageTemplate"
// +kontinue:variant:path="spec.resources",rule="self.all(s, !has(s.configs) || s.configs.all(i, self.exists(o, o.name == i.resource && (o.templateRef.kind == 'ClusterConfigTemplate'))))",message="every configs[].resource must name a step of this chain whose templateRef.kind is ClusterConfigTemplate"
type ClusterSupplyChain struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Which workloads this ClusterSupplyChain serves and the steps it runs
	// for each.
	Spec api.ChainSpec `json:"spec"`
	// Observed state of the ClusterSupplyChain, written by the controller.
	Status status.ChainStatus `json:"status,omitempty"`
}

// A delivery has no image steps; a ClusterDeploymentTemplate step, and only
// it, receives deployment.

// A ClusterDelivery is a path to production for deliverables: a selector
// choosing the deliverables it serves and an ordered list of steps, each
// stamping a template. Among the chains whose whole selector matches a
// deliverable, the most specific wins; a tie is MultipleDeliveryMatches,
// none is DeliveryNotFound.
//
// +kubebuilder:resource:scope=Cluster,shortName=cd,categories=carto
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Status of the Ready condition of the ClusterDelivery: True, False or Unknown."
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Reason of the Ready condition of the ClusterDelivery."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=`.metadata.creationTimestamp`,description="Time since the object was created."
// +kontinue:variant:path="spec.selectorMatchFields[].messagePath",omit=true
// +kontinue:variant:path="spec.resources[].templateRef.options[].selector.matchFields[].messagePath",omit=true
// +kontinue:variant:path="spec.resources[].templateRef.kind",enum={ClusterSourceTemplate,ClusterDeploymentTemplate,ClusterConfigTemplate,ClusterTemplate}
// +kontinue:variant:path="spec.resources[]",rule="!has(self.images)",message="a ClusterDelivery step cannot read images; use sources, configs or deployment",messageExpression="'step ' + self.name + ': a ClusterDelivery step cannot read images; use sources, configs or deployment'"
// +kontinue:variant:path="spec.resources[]",rule="!has(self.deployment) || self.templateRef.kind == 'ClusterDeploymentTemplate'",message="only a ClusterDeploymentTemplate step receives deployment",messageExpression="'step ' + self.name + ': only a ClusterDeploymentTemplate step receives deployment'"
// +kontinue:variant:path="spec.resources[]",rule="self.templateRef.kind != 'ClusterDeploymentTemplate' || has(self.deployment)",message="a ClusterDeploymentTemplate step must set deployment (the step whose source it deploys)",messageExpression="'step ' + self.name + ': a ClusterDeploymentTemplate step must set deployment (the step whose source it deploys)'"
// +kontinue:variant:path="spec.resources",rule="self.all(s, !has(s.sources) || s.sources.all(i, self.exists(o, o.name == i.resource && (o.templateRef.kind == 'ClusterSourceTemplate' || o.templateRef.kind == 'ClusterDeploymentTemplate'))))",message="every sources[].resource must name a step of this chain whose templateRef.kind is ClusterSourceTemplate or ClusterDeploymentTemplate"
// +kontinue:variant:path="spec.resources",rule="self.all(s, !has(s.configs) || s.configs.all(i, self.exists(o, o.name == i.resource && (o.templateRef.kind == 'ClusterConfigTemplate'))))",message="every configs[].resource must name a step of this chain whose templateRef.kind is ClusterConfigTemplate"
// +kontinue:variant:path="spec.resources",rule="self.all(s, !has(s.deployment) || self.exists(o, o.name == s.deployment.resource && (o.templateRef.kind == 'ClusterSourceTemplate' || o.templateRef.kind == 'ClusterDeploymentTemplate')))",message="every deployment.resource must name a step of this chain whose templateRef.kind is ClusterSourceTemplate or ClusterDeploymentTemplate"
type ClusterDelivery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Which deliverables this ClusterDelivery serves and the steps it runs
	// for each.
	Spec api.ChainSpec `json:"spec"`
	// Observed state of the ClusterDelivery, written by the controller.
	Status status.ChainStatus `json:"status,omitempty"`
}

// The five template kinds share api.TemplateSpec; each keeps only its own
// output paths, which it requires.

// A ClusterSourceTemplate stamps an object that provides source code (e.g. a
// GitRepository) and passes on its URL and revision, which later steps read
// as $(sources.<step>.url)$ and $(sources.<step>.revision)$.
//
// +kubebuilder:resource:scope=Cluster,shortName=cst,categories=carto
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kontinue:variant:path="spec.imagePath",omit=true
// +kontinue:variant:path="spec.configPath",omit=true
// +kontinue:variant:path="spec.urlPath",required=true
// +kontinue:variant:path="spec.revisionPath",required=true
type ClusterSourceTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// How the ClusterSourceTemplate stamps its object and reads its outputs
	// and health.
	Spec api.TemplateSpec `json:"spec"`
}

// A ClusterImageTemplate stamps an object that builds an image (e.g. a kpack
// Image) and passes on the image reference, which later steps read as
// $(images.<step>.image)$.
//
// +kubebuilder:resource:scope=Cluster,shortName=cit,categories=carto
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kontinue:variant:path="spec.urlPath",omit=true
// +kontinue:variant:path="spec.revisionPath",omit=true
// +kontinue:variant:path="spec.configPath",omit=true
// +kontinue:variant:path="spec.imagePath",required=true
type ClusterImageTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// How the ClusterImageTemplate stamps its object and reads its outputs
	// and health.
	Spec api.TemplateSpec `json:"spec"`
}

// A ClusterConfigTemplate stamps an object that produces configuration (e.g.
// a ConfigMap holding a PodSpec) and passes it on, which later steps read as
// $(configs.<step>.config)$.
//
// +kubebuilder:resource:scope=Cluster,shortName=cct,categories=carto
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kontinue:variant:path="spec.urlPath",omit=true
// +kontinue:variant:path="spec.revisionPath",omit=true
// +kontinue:variant:path="spec.imagePath",omit=true
// +kontinue:variant:path="spec.configPath",required=true
type ClusterConfigTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// How the ClusterConfigTemplate stamps its object and reads its outputs
	// and health.
	Spec api.TemplateSpec `json:"spec"`
}

// A ClusterTemplate stamps an object and passes nothing on, e.g. the object
// that commits configuration to git or runs the application.
//
// +kubebuilder:resource:scope=Cluster,shortName=ct,categories=carto
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kontinue:variant:path="spec.urlPath",omit=true
// +kontinue:variant:path="spec.revisionPath",omit=true
// +kontinue:variant:path="spec.imagePath",omit=true
// +kontinue:variant:path="spec.configPath",omit=true
type ClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// How the ClusterTemplate stamps its object and reads its outputs and
	// health.
	Spec api.TemplateSpec `json:"spec"`
}

// A deployment's outputs are its input passed through: it has no output
// paths, no runnable (it judges one long-lived object, not a run per input
// set) and its own rules instead of TemplateSpec's on success and shadows
// (TemplateSpec's render engines' rule stays): a template with only a
// healthRule, or nothing, is valid (Cartographer's API) and passes its input
// through at once.

// A ClusterDeploymentTemplate is a ClusterDelivery step that deploys the
// step's deployment input ($(deployment.url)$, $(deployment.revision)$) and
// passes it on as its own output once observedMatches or observedCompletion
// says the deployment succeeded.
//
// +kubebuilder:resource:scope=Cluster,shortName=cdt,categories=carto
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kontinue:variant:path="spec.urlPath",omit=true
// +kontinue:variant:path="spec.revisionPath",omit=true
// +kontinue:variant:path="spec.imagePath",omit=true
// +kontinue:variant:path="spec.configPath",omit=true
// +kontinue:variant:path="spec.runnable",omit=true
// +kontinue:variant:path="spec",dropRule="set at most one of healthRule"
// +kontinue:variant:path="spec",dropRule="runnable: true"
// +kontinue:variant:path="spec",dropRule="shadow: true"
// +kontinue:variant:path="spec",rule="!(has(self.observedMatches) && size(self.observedMatches) > 0 && has(self.observedCompletion))",message="a ClusterDeploymentTemplate may set only one of observedMatches or observedCompletion"
// +kontinue:variant:path="spec",rule="!has(self.alwaysSuccessful) || !self.alwaysSuccessful",message="alwaysSuccessful is not allowed on a ClusterDeploymentTemplate; use observedMatches or observedCompletion"
// +kontinue:variant:path="spec",rule="!has(self.shadow) || !self.shadow",message="shadow: true is not used on a ClusterDeploymentTemplate: a deployment passes its input through, so a copy would add nothing"
type ClusterDeploymentTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// How the ClusterDeploymentTemplate stamps its object and reads its
	// outputs and health.
	Spec api.TemplateSpec `json:"spec"`
}

// A Runnable stamps a new object from a ClusterRunTemplate for every new set
// of inputs (e.g. a Tekton PipelineRun per commit), keeps a bounded history
// of them and exposes the outputs of the newest successful one.
//
// +kubebuilder:resource:shortName=run,categories=carto
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
// +kubebuilder:printcolumn:name="RunTemplate",type="string",JSONPath=`.spec.runTemplateRef.name`,description="The ClusterRunTemplate the Runnable stamps."
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Status of the Ready condition of the Runnable: True, False or Unknown."
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Reason of the Ready condition of the Runnable."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=`.metadata.creationTimestamp`,description="Time since the object was created."
type Runnable struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Which ClusterRunTemplate to stamp and with which inputs.
	Spec api.RunnableSpec `json:"spec"`
	// Observed state of the Runnable, written by the controller.
	Status status.RunnableStatus `json:"status,omitempty"`
}

// A ClusterRunTemplate is the object a Runnable stamps anew for each new set
// of inputs, and the outputs read from it.
//
// +kubebuilder:resource:scope=Cluster,shortName=crt,categories=carto
// +kubebuilder:metadata:labels="app.kubernetes.io/part-of=kontinue"
type ClusterRunTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// The object a Runnable stamps and the outputs read from it.
	Spec api.RunTemplateSpec `json:"spec"`
}
