package reconciler

import (
	"time"

	"kontinue.dev/kontinue/reconciler/dora"
	"kontinue.dev/kontinue/reconciler/owner"
)

// written is told of every owner's status write (owner.Env.Written): the
// DORA deployments it shows go to OnDeployment (the metrics), and the
// write to Options.Written (notifications). On the reconcile's worker:
// nothing here waits.
func (m *Manager) written(w owner.Written) {
	if m.OnDeployment != nil && w.Prev != nil && w.Next != nil {
		var steps map[string]bool
		if w.Spec != nil {
			steps = dora.Steps(w.Spec.Resources, w.Spec.DeploymentSteps)
		} else {
			steps = dora.StepsOf(w.Next.Resources, nil)
		}
		opted := ""
		if w.Owner.GetAnnotations()[dora.OwnerAnnotation] == "true" {
			opted = w.Owner.GetName()
		}
		for _, d := range m.dora.Observe(string(w.Owner.GetUID()), w.Prev.Resources, w.Next.Resources, steps, time.Now()) {
			m.OnDeployment(w.Chain, w.Owner.GetNamespace(), w.Kind, opted, d)
		}
	}
	if m.opts.Written != nil {
		m.opts.Written(w)
	}
}
