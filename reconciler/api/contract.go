package api

import "k8s.io/apimachinery/pkg/runtime/schema"

// The contract with everyone who reads what Kontinue stamps: resources of
// its own kinds, the labels and annotations it puts on stamped objects, and
// what differs between the two owner kinds. The controller and the CLI both
// take them from here.

// GVR is the resource of one of Kontinue's own kinds.
func GVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: resource}
}

// Resources of the owner, chain and Runnable kinds.
var (
	WorkloadGVR    = GVR("workloads")
	DeliverableGVR = GVR("deliverables")
	SupplyChainGVR = GVR("clustersupplychains")
	DeliveryGVR    = GVR("clusterdeliveries")
	RunnableGVR    = GVR("runnables")
	RunTemplateGVR = GVR("clusterruntemplates")
)

// Labels Kontinue puts on what it stamps.
const (
	// StampedLabel marks every object Kontinue stamps; informers of stamped
	// kinds are filtered by it, so Kontinue caches only its own objects.
	StampedLabel = "kontinue.dev/stamped"
	// StampedSelector selects what StampedLabel marks.
	StampedSelector = StampedLabel + "=true"

	LabelWorkloadName         = "carto.run/workload-name"
	LabelWorkloadNamespace    = "carto.run/workload-namespace"
	LabelSupplyChainName      = "carto.run/supply-chain-name"
	LabelDeliverableName      = "carto.run/deliverable-name"
	LabelDeliverableNamespace = "carto.run/deliverable-namespace"
	LabelDeliveryName         = "carto.run/delivery-name"
	LabelResourceName         = "carto.run/resource-name"
	LabelTemplateKind         = "carto.run/template-kind"
	LabelTemplateName         = "carto.run/cluster-template-name"
	LabelTemplateLifecycle    = "carto.run/template-lifecycle"
	LabelRunnableName         = "carto.run/runnable-name"
	LabelRunTemplateName      = "carto.run/run-template-name"

	// AnnotationDigest holds the digest of the object Kontinue last applied
	// (its input set), so that an unchanged reconcile can skip the API
	// call, also after a restart.
	AnnotationDigest = "kontinue.dev/applied-digest"

	// AnnotationTraceParent holds, when traces are exported, the W3C
	// traceparent of the step's span in the trace of the revision whose
	// input set the object was stamped for (reconciler/spans), so that
	// whoever acts on the object can continue that trace. It is outside
	// the digest and never compared: it changes only when the object is
	// written anyway.
	AnnotationTraceParent = "kontinue.dev/traceparent"

	// AnnotationInputSet names the provenance input set a step's object
	// (its primary, its run, its Runnable) was written for
	// (status.resources[].provenance's digest). It is the
	// applied digest of the set's first render: a re-render with the
	// same input values and owner generation (a template or chain edit)
	// is the same set, so what was stamped from it still names it when
	// its applied digest has moved on. Like the traceparent, it is outside
	// the digest; it is compared only once the live object names a set
	// (reconciler/stamp/riders.go).
	AnnotationInputSet = "kontinue.dev/input-set"

	// AnnotationDeploymentInputs holds, on a deployment step's primary,
	// the deployment inputs (url, revision, as JSON) its input set was
	// applied with: the outputs that set publishes when it succeeds. It is
	// written in the same write as the set, so the record survives a
	// status write lost after it (a stale copy, a kill, a failover);
	// the step's status (appliedOutputValues) is read first. A rider
	// like the traceparent: outside the digest, never compared.
	AnnotationDeploymentInputs = "kontinue.dev/deployment-inputs"
)

// Flavor is what differs between the two owner kinds: a Workload walks a
// ClusterSupplyChain, a Deliverable a ClusterDelivery. The machine is one.
type Flavor struct {
	OwnerKind, ChainKind         string
	OwnerGVR, ChainGVR           schema.GroupVersionResource
	ChainReadyCondition          string
	LabelOwnerName, LabelOwnerNS string
	LabelChainName               string
	ReasonLabelsMissing          string
	ReasonNotFound               string
	ReasonMultiple               string
	ChainNoun                    string // in messages: "supply chain" or "delivery"
}

// Flavors of owners.
var (
	WorkloadFlavor = &Flavor{
		OwnerKind: KindWorkload, ChainKind: KindClusterSupplyChain,
		OwnerGVR: WorkloadGVR, ChainGVR: SupplyChainGVR,
		ChainReadyCondition: "SupplyChainReady",
		LabelOwnerName:      LabelWorkloadName, LabelOwnerNS: LabelWorkloadNamespace, LabelChainName: LabelSupplyChainName,
		ReasonLabelsMissing: "WorkloadLabelsMissing", ReasonNotFound: "SupplyChainNotFound", ReasonMultiple: "MultipleSupplyChainMatches",
		ChainNoun: "supply chain",
	}
	DeliverableFlavor = &Flavor{
		OwnerKind: KindDeliverable, ChainKind: KindClusterDelivery,
		OwnerGVR: DeliverableGVR, ChainGVR: DeliveryGVR,
		ChainReadyCondition: "DeliveryReady",
		LabelOwnerName:      LabelDeliverableName, LabelOwnerNS: LabelDeliverableNamespace, LabelChainName: LabelDeliveryName,
		ReasonLabelsMissing: "DeliverableLabelsMissing", ReasonNotFound: "DeliveryNotFound", ReasonMultiple: "MultipleDeliveryMatches",
		ChainNoun: "delivery",
	}
)

// FlavorOf is the flavor of an owner kind (a Workload's when kind is not a
// Deliverable).
func FlavorOf(ownerKind string) *Flavor {
	if ownerKind == KindDeliverable {
		return DeliverableFlavor
	}
	return WorkloadFlavor
}
