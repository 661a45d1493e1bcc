package owner

// The fold stage of an owner's reconcile: the owner's conditions summed up
// from its steps'.

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// conditions summed up. Cartographer gives it one reason whatever the
// steps say; the steps keep their own.
func healthySummary(resources []st.Resource) metav1.Condition {
	var healthy []metav1.Condition
	for _, r := range resources {
		if c := st.Find(r.Conditions, st.Healthy); c != nil {
			// The owner's summary repeats one step's message: say which step.
			h := *c
			h.Message = strings.TrimSuffix(fmt.Sprintf("step [%s]: %s", r.Name, h.Message), ": ")
			healthy = append(healthy, h)
		}
	}
	hl := st.Summarize(st.ResourcesHealthy, step.ReasonHealthyConditionRule, healthy...)
	hl.Reason = step.ReasonHealthyConditionRule
	return hl
}
