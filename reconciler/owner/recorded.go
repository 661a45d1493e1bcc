package owner

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
)

// recorded hands what ended between the previous status and the one just
// written to the owner's spans and history. The history is written as the
// account the owner's objects are written as, so it needs no rights of
// Kontinue's own; an owner without a usable account has none.
func recorded(ctx context.Context, env *Env, obj *unstructured.Unstructured, l *loaded, status *st.OwnerStatus) {
	if env.Written != nil {
		env.Written(written(env, obj, l, status)) // written.go
	}
	if l.noAccount {
		return
	}
	prev, next := l.prev.Resources, status.Resources
	if env.Spans != nil {
		o := spans.Owner{Kind: env.Flavor.OwnerKind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
			UID: string(obj.GetUID()), Chain: l.chainName}
		if o.Kind == api.KindDeliverable {
			o.Feed = feedOf(env.Tracker, obj)
		}
		env.Spans(o, prev, next)
	}
	if env.History == nil {
		return
	}
	sa := l.account()
	client, err := env.Clients.For(sa.Namespace, sa.Name)
	if err != nil {
		return // the steps' writes, through the same account, report why
	}
	env.History.Record(ctx, client, history.Owner{APIVersion: obj.GetAPIVersion(), Kind: env.Flavor.OwnerKind,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID()), Object: obj, Status: status}, prev, next)
}
