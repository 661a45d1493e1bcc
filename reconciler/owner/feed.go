package owner

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/tracking"
)

// feedOf reads, when a Deliverable's span asks for it (spans.Owner.Feed),
// what may link the Deliverable's revision to the Workload that stamped
// it: the Workload its controller reference names, from the cache and of
// that UID, with its steps' statuses, and the Deliverable's annotations.
// spans.LinkOf decides whether they prove a link; nil: no Workload to
// weigh. Traced: spans ask only with traces on, when Kontinue puts its
// traceparent on the Deliverable with every input set.
func feedOf(tracker *tracking.Tracker, d *unstructured.Unstructured) func() *spans.Feed {
	return func() *spans.Feed {
		ref := metav1.GetControllerOfNoCopy(d)
		if ref == nil || ref.Kind != api.KindWorkload || ref.APIVersion != api.Group+"/"+api.Version {
			return nil
		}
		w, _ := tracker.Get(tracking.Key{GVR: api.WorkloadGVR}, d.GetNamespace(), ref.Name)
		if w == nil || w.GetUID() != ref.UID {
			return nil
		}
		var status st.OwnerStatus
		if b, err := json.Marshal(w.Object["status"]); err != nil || json.Unmarshal(b, &status) != nil {
			return nil
		}
		f := spans.FeedOf(w, d, status.Resources)
		f.Traced = true
		return f
	}
}
