// Package reconciler wires Kontinue's controllers together (the Manager):
// the routing of watch events to queue keys and the reconcilers of owners,
// chains and runnables behind their Env hooks. Data flows one way: watch →
// queue (reconciler/loop) → reconcile (read from caches) → render → decide
// (reconciler/step, pure) → write (reconciler/stamp) → status. The picture
// is in docs/architecture.md.
package reconciler

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kontinue.dev/kontinue/reconciler/loop"
)

// The workqueue loop's names, for the Manager's users (cmd, e2e).
type (
	Key        = loop.Key
	Result     = loop.Result
	Reconciler = loop.Reconciler
	Observer   = loop.Observer
	Controller = loop.Controller
)

var (
	keyOf    = loop.KeyOf
	parseKey = loop.ParseKey
)

// Resources the Manager watches besides Kontinue's own kinds (those are
// the contract's: reconciler/api).
var (
	CRDGVR            = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	ServiceAccountGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	rbacGroupVersion  = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	RBACGVRs          = []schema.GroupVersionResource{rbacGroupVersion.WithResource("roles"), rbacGroupVersion.WithResource("rolebindings"), rbacGroupVersion.WithResource("clusterroles"), rbacGroupVersion.WithResource("clusterrolebindings")}
)
