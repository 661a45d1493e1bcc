package reconciler

// Verification of steps' inputs (reconciler/verify, docs/verification.md):
// one check.Runner per Manager, fetching off the workers as each owner's
// service account, waking the owner that asked when its decision is in.

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"kontinue.dev/kontinue/reconciler/verify/check"
)

// newVerifier builds the Manager's verifier.
func (m *Manager) newVerifier() *check.Runner {
	edge := &check.Edge{Kontinue: m.dyn, As: m.clients.For, Key: m.opts.Verify.Key, Transport: m.opts.Verify.Transport}
	o := m.opts.Verify.Options
	o.OnDecision = m.opts.Verify.OnDecision
	return check.New(edge, m.verified, o)
}

// verified wakes the owner whose input was decided: its reconcile stopped
// at the step that waited for it, so it goes on before its namespace's
// next owner starts (a burst of new Workloads would otherwise finish
// each one a whole queue later).
func (m *Manager) verified(o check.Owner) {
	if r := m.owners[o.Kind]; r != nil {
		r.ctrl.EnqueueContinue(Key{Kind: o.Kind, NamespacedName: types.NamespacedName{Namespace: o.Namespace, Name: o.Name}})
	}
}

// runVerifier runs the verifier's workers until ctx ends.
func (m *Manager) runVerifier(ctx context.Context) {
	if m.verifier != nil {
		go m.verifier.Run(ctx)
	}
}
