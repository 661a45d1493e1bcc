package check

import (
	"fmt"
	"strings"
	"time"
)

// OneRunPerSet is invariant 4: Kontinue creates one run (an object
// carrying kontinue.dev/input-digest) per input set a step (or Runnable)
// takes, across kills, outages, failovers and replicas: of one owner
// incarnation's (controller reference uid) runs of one step, in the order
// they were created, no run has the input digest of the run before it,
// unless it carries a retry token (kontinue.dev/retry) the one before did
// not (a retry asks for one more run). Going back to earlier inputs is a
// new input set and runs them again (reconciler/runs: the newest run
// always matches the current inputs). That every final input set has its
// run is invariant 8's (the step's stampedRef names an existing run).
//
// A run created after its owner's deletion is on the record (the API
// server has the delete, or a delete of every owner of its kind in the
// namespace) is not counted: an informer's cache lags the
// delete by a moment, and the garbage collector removes such a run at
// once; late is their number.
func OneRunPerSet(h *History) (vs []Violation, late int) {
	gone := map[string]time.Time{}   // owner uid → deleted
	goneNS := map[string]time.Time{} // namespace/resource → every owner deleted
	for _, e := range h.Events {
		if !e.OK() || e.Group != OwnGroup || e.Subresource != "" {
			continue
		}
		if e.Verb == "delete" && e.Obj != nil {
			if _, ok := gone[e.Obj.UID]; !ok {
				gone[e.Obj.UID] = e.Time
			}
		}
		if e.Verb == "deletecollection" {
			if _, ok := goneNS[e.Namespace+"/"+e.Resource]; !ok {
				goneNS[e.Namespace+"/"+e.Resource] = e.Time
			}
		}
	}
	deleted := func(r Role, ns string, at time.Time) bool {
		if t, ok := gone[r.OwnerUID]; ok && at.After(t) {
			return true
		}
		t, ok := goneNS[ns+"/"+strings.ToLower(r.OwnerKind)+"s"]
		return ok && at.After(t)
	}
	type key struct{ owner, step string }
	runs := map[key][]*Event{}
	var order []key
	for _, e := range h.Events {
		if !h.ByKontinue(e) || !e.Creates() || e.Obj == nil || e.Obj.Labels[LabelInputDigest] == "" {
			continue
		}
		r := RoleOf(e.Obj)
		if deleted(r, e.Namespace, e.Time) {
			late++
			continue
		}
		step := r.Step
		if step == "" {
			step = "runnable " + e.Obj.Labels[LabelRunnable]
		}
		k := key{r.OwnerUID, step}
		if runs[k] == nil {
			order = append(order, k)
		}
		runs[k] = append(runs[k], e)
	}
	for _, k := range order {
		es := runs[k]
		SortByTime(es)
		for i := 1; i < len(es); i++ {
			prev, cur := es[i-1], es[i]
			d := cur.Obj.Labels[LabelInputDigest]
			retry := cur.Obj.Annotations[AnnotationRetry]
			if d != prev.Obj.Labels[LabelInputDigest] || (retry != "" && retry != prev.Obj.Annotations[AnnotationRetry]) {
				continue
			}
			vs = append(vs, Violation{Invariant: 4, Check: "one run per input set", At: cur.Time, Object: cur.Key().String(),
				Message: fmt.Sprintf("a second run of owner %s %s for input digest %s: %s at %s (%s), right after %s at %s (%s)",
					short(k.owner), k.step, short12(d), cur.Obj.Name, cur.Time.Format("15:04:05.000"), who(cur),
					prev.Obj.Name, prev.Time.Format("15:04:05.000"), who(prev))})
		}
	}
	return vs, late
}
