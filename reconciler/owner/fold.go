package owner

// The fold stage of an owner's reconcile: the owner's conditions summed up
// from its steps'.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/health"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
)

// fold is the owner's status once its steps ran (w): their statuses, and
// the owner's conditions from theirs, in the contract's order, Ready last.
// An owner whose steps did not run keeps the status load left.
func fold(env *Env, l *loaded, w walked) st.OwnerStatus {
	status := l.status
	if !l.walk {
		return status
	}
	status.Resources, status.GeneratedRunTemplates = w.resources, w.records
	var submitted []metav1.Condition
	for _, r := range w.resources {
		if c := st.Find(r.Conditions, st.ResourceSubmitted); c != nil {
			submitted = append(submitted, *c)
		}
	}
	sub := st.Summarize(st.ResourcesSubmitted, step.ReasonSubmitted, submitted...)
	hl := healthySummary(w.resources)
	ready := st.Summarize(st.Ready, "Ready", l.chainReady, sub, hl)
	setConditions(env, l, &status, l.chainReady, sub, hl, ready)
	return status
}

// healthySummary is the owner's ResourcesHealthy: the steps' Healthy
// conditions summed up as Cartographer does: False with the message of the
// last unhealthy step, else Unknown with the first unknown one's, else
// True; its message is the step's own (the step's conditions name it), or
// none where Cartographer's step says none (silent), and its reason always
// HealthyConditionRule (the steps keep their own).
func healthySummary(resources []st.Resource) metav1.Condition {
	hl := st.Cond(st.ResourcesHealthy, st.True, step.ReasonHealthyConditionRule, "")
	for _, r := range resources {
		c := st.Find(r.Conditions, st.Healthy)
		msg := ""
		if c != nil && !silent[c.Reason] {
			msg = c.Message
		}
		switch {
		case c == nil:
		case c.Status == st.False:
			hl.Status, hl.Message = st.False, msg
		case c.Status != st.True && hl.Status == st.True:
			hl.Status, hl.Message = st.Unknown, msg
		}
	}
	return hl
}

// silent are the Healthy reasons whose condition has no message in
// Cartographer: Kontinue's step explains, the owner's summary does not.
var silent = map[string]bool{
	health.ReasonAlwaysHealthy: true, health.ReasonOutputsAvailable: true, health.ReasonOutputNotAvailable: true,
	health.ReasonNoStampedObject: true, health.ReasonNoMatchesFulfilled: true,
}
