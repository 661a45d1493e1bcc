package reconciler

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/stamp"
)

// Resources of Kontinue's own kinds.
var (
	WorkloadGVR       = api.WorkloadGVR
	DeliverableGVR    = api.DeliverableGVR
	RunnableGVR       = api.RunnableGVR
	SupplyChainGVR    = api.SupplyChainGVR
	DeliveryGVR       = api.DeliveryGVR
	RunTemplateGVR    = api.RunTemplateGVR
	CRDGVR            = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ServiceAccountGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	rbacGroupVersion  = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	RBACGVRs          = []schema.GroupVersionResource{rbacGroupVersion.WithResource("roles"), rbacGroupVersion.WithResource("rolebindings"), rbacGroupVersion.WithResource("clusterroles"), rbacGroupVersion.WithResource("clusterrolebindings")}
)

// The contract (reconciler/api), as this package names it.
const (
	StampedLabel         = api.StampedLabel
	StampedSelector      = api.StampedSelector
	LabelResourceName    = api.LabelResourceName
	LabelRunnableName    = api.LabelRunnableName
	LabelRunTemplateName = api.LabelRunTemplateName
	AnnotationDigest     = api.AnnotationDigest
	// FieldManager owns every field Kontinue applies.
	FieldManager = stamp.FieldManager
)

// Flavor is what differs between the two owner kinds (api.Flavor).
type Flavor = api.Flavor

// Flavors of owners.
var (
	WorkloadFlavor    = api.WorkloadFlavor
	DeliverableFlavor = api.DeliverableFlavor
)
