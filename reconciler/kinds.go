package reconciler

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/stamp"
	"kontinue.dev/kontinue/reconciler/step"
)

func cartoGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: resource}
}

// Resources of Kontinue's own kinds.
var (
	WorkloadGVR       = cartoGVR("workloads")
	DeliverableGVR    = cartoGVR("deliverables")
	RunnableGVR       = cartoGVR("runnables")
	SupplyChainGVR    = cartoGVR("clustersupplychains")
	DeliveryGVR       = cartoGVR("clusterdeliveries")
	RunTemplateGVR    = cartoGVR("clusterruntemplates")
	CRDGVR            = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ServiceAccountGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	rbacGroupVersion  = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	RBACGVRs          = []schema.GroupVersionResource{rbacGroupVersion.WithResource("roles"), rbacGroupVersion.WithResource("rolebindings"), rbacGroupVersion.WithResource("clusterroles"), rbacGroupVersion.WithResource("clusterrolebindings")}
	templateGVRByKind = map[string]schema.GroupVersionResource{}
	templateKindByGVR = map[schema.GroupVersionResource]string{}
)

func init() {
	for kind, res := range map[string]string{
		api.KindClusterSourceTemplate:     "clustersourcetemplates",
		api.KindClusterImageTemplate:      "clusterimagetemplates",
		api.KindClusterConfigTemplate:     "clusterconfigtemplates",
		api.KindClusterTemplate:           "clustertemplates",
		api.KindClusterDeploymentTemplate: "clusterdeploymenttemplates",
	} {
		templateGVRByKind[kind] = cartoGVR(res)
		templateKindByGVR[cartoGVR(res)] = kind
	}
}

// Labels Kontinue puts on what it stamps.
const (
	// StampedLabel marks every object Kontinue stamps; informers of stamped
	// kinds are filtered by it, so Kontinue caches only its own objects.
	StampedLabel    = "kontinue.dev/stamped"
	StampedSelector = stamp.StampedSelector

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

	// AnnotationDigest holds the digest of the object Kontinue last applied, so
	// that an unchanged reconcile can skip the API call, also after a restart.
	AnnotationDigest = step.AnnotationDigest
	// FieldManager owns every field Kontinue applies.
	FieldManager = stamp.FieldManager
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
		OwnerKind: api.KindWorkload, ChainKind: api.KindClusterSupplyChain,
		OwnerGVR: WorkloadGVR, ChainGVR: SupplyChainGVR,
		ChainReadyCondition: "SupplyChainReady",
		LabelOwnerName:      LabelWorkloadName, LabelOwnerNS: LabelWorkloadNamespace, LabelChainName: LabelSupplyChainName,
		ReasonLabelsMissing: "WorkloadLabelsMissing", ReasonNotFound: "SupplyChainNotFound", ReasonMultiple: "MultipleSupplyChainMatches",
		ChainNoun: "supply chain",
	}
	DeliverableFlavor = &Flavor{
		OwnerKind: api.KindDeliverable, ChainKind: api.KindClusterDelivery,
		OwnerGVR: DeliverableGVR, ChainGVR: DeliveryGVR,
		ChainReadyCondition: "DeliveryReady",
		LabelOwnerName:      LabelDeliverableName, LabelOwnerNS: LabelDeliverableNamespace, LabelChainName: LabelDeliveryName,
		ReasonLabelsMissing: "DeliverableLabelsMissing", ReasonNotFound: "DeliveryNotFound", ReasonMultiple: "MultipleDeliveryMatches",
		ChainNoun: "delivery",
	}
)
