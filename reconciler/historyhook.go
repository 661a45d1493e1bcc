package reconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// historyHook records the history of the owners of flavor f after their
// status writes (nil: off), writing as the owner's service account.
func historyHook(m *Manager, f *api.Flavor) func(context.Context, *unstructured.Unstructured, api.ServiceAccountRef, []st.Resource, []st.Resource) {
	limit := m.opts.HistoryRevisions
	switch {
	case limit < 0:
		return nil
	case limit == 0:
		limit = history.DefaultRevisions
	}
	rec := history.NewRecorder(limit)
	return func(ctx context.Context, o *unstructured.Unstructured, sa api.ServiceAccountRef, prev, next []st.Resource) {
		client, err := m.clients.For(sa.Namespace, sa.Name)
		if err != nil {
			return
		}
		rec.Record(ctx, client, history.Owner{APIVersion: o.GetAPIVersion(), Kind: f.OwnerKind, Namespace: o.GetNamespace(),
			Name: o.GetName(), UID: string(o.GetUID())}, prev, next)
	}
}
