package reconciler

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resources the Manager watches besides Kontinue's own kinds (those are
// the contract's: reconciler/api).
var (
	CRDGVR            = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ServiceAccountGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	rbacGroupVersion  = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	RBACGVRs          = []schema.GroupVersionResource{rbacGroupVersion.WithResource("roles"), rbacGroupVersion.WithResource("rolebindings"), rbacGroupVersion.WithResource("clusterroles"), rbacGroupVersion.WithResource("clusterrolebindings")}
)
