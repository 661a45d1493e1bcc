package reconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
)

// historyHook records the history of the owners of flavor f after their
// status writes, writing as the owner's service account, and hands them
// to Options.Spans (nil: neither is on).
func historyHook(m *Manager, f *api.Flavor) func(context.Context, *unstructured.Unstructured, string, api.ServiceAccountRef, []st.Resource, []st.Resource) {
	var rec *history.Recorder
	switch limit := m.opts.HistoryRevisions; {
	case limit == 0:
		rec = history.NewRecorder(history.DefaultRevisions)
	case limit > 0:
		rec = history.NewRecorder(limit)
	}
	sp := m.opts.Spans
	if rec == nil && sp == nil {
		return nil
	}
	return func(ctx context.Context, o *unstructured.Unstructured, chain string, sa api.ServiceAccountRef, prev, next []st.Resource) {
		if sp != nil {
			sp(spans.Owner{Kind: f.OwnerKind, Namespace: o.GetNamespace(), Name: o.GetName(), UID: string(o.GetUID()), Chain: chain}, prev, next)
		}
		if rec == nil {
			return
		}
		client, err := m.clients.For(sa.Namespace, sa.Name)
		if err != nil {
			return
		}
		rec.Record(ctx, client, history.Owner{APIVersion: o.GetAPIVersion(), Kind: f.OwnerKind, Namespace: o.GetNamespace(),
			Name: o.GetName(), UID: string(o.GetUID())}, prev, next)
	}
}
