package owner

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	"kontinue.dev/kontinue/reconciler/spans"
)

// recorded hands what ended between the previous status and the one just
// written to the owner's spans and history. The history is written as the
// account the owner's objects are written as, so it needs no rights of
// Kontinue's own; an owner without a usable account has none.
func recorded(ctx context.Context, obj *unstructured.Unstructured, op *pass) {
	if op.env.Written != nil {
		op.env.Written(written(obj, op)) // written.go
	}
	if op.noAccount {
		return
	}
	prev, next := op.prev.Resources, op.status.Resources
	if op.env.Spans != nil {
		o := spans.Owner{Kind: op.env.Flavor.OwnerKind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
			UID: string(obj.GetUID()), Chain: op.chainName}
		if o.Kind == api.KindDeliverable {
			o.Feed = feedOf(op.env.Tracker, obj)
		}
		op.env.Spans(o, prev, next)
	}
	if op.env.History == nil {
		return
	}
	sa := op.serviceAccount()
	client, err := op.env.Clients.For(sa.Namespace, sa.Name)
	if err != nil {
		return // the steps' writes, through the same account, report why
	}
	op.env.History.Record(ctx, client, history.Owner{APIVersion: obj.GetAPIVersion(), Kind: op.env.Flavor.OwnerKind,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID()), Object: obj, Status: &op.status}, prev, next)
}
