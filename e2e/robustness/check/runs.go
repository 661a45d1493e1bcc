package check

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// OneRunPerSet is invariant 4: Kontinue creates at most one run (an object
// carrying kontinue.dev/input-digest) per owner incarnation (controller
// reference uid), step (or Runnable), input digest and retry token
// (kontinue.dev/retry on the run: a retry asks for one more run), across
// kills, outages, failovers and replicas. That every final input set has
// its run is invariant 8's (the step's stampedRef names an existing run).
//
// A run created after its owner's deletion is on the record (the API
// server has the delete) is not counted: an informer's cache lags the
// delete by a moment, and the garbage collector removes such a run at
// once; late is their number.
func OneRunPerSet(h *History) (vs []Violation, late int) {
	gone := map[string]time.Time{}
	for _, e := range h.Events {
		if e.OK() && e.Verb == "delete" && e.Group == OwnGroup && e.Obj != nil && e.Subresource == "" {
			if _, ok := gone[e.Obj.UID]; !ok {
				gone[e.Obj.UID] = e.Time
			}
		}
	}
	type key struct{ owner, step, digest, retry string }
	runs := map[key][]*Event{}
	var order []key
	for _, e := range h.Events {
		if !h.ByKontinue(e) || !e.Creates() || e.Obj == nil {
			continue
		}
		d := e.Obj.Labels[LabelInputDigest]
		if d == "" {
			continue
		}
		r := RoleOf(e.Obj)
		if t, ok := gone[r.OwnerUID]; ok && e.Time.After(t) {
			late++
			continue
		}
		step := r.Step
		if step == "" {
			step = "runnable " + e.Obj.Labels[LabelRunnable]
		}
		k := key{r.OwnerUID, step, d, e.Obj.Annotations[AnnotationRetry]}
		if runs[k] == nil {
			order = append(order, k)
		}
		runs[k] = append(runs[k], e)
	}
	sort.SliceStable(order, func(i, j int) bool { return runs[order[i]][0].Seq < runs[order[j]][0].Seq })
	for _, k := range order {
		if es := runs[k]; len(es) > 1 {
			var names []string
			for _, e := range es {
				names = append(names, fmt.Sprintf("%s at %s (%s)", e.Obj.Name, e.Time.Format("15:04:05.000"), who(e)))
			}
			vs = append(vs, Violation{Invariant: 4, Check: "one run per input set", At: es[1].Time, Object: es[0].Key().String(),
				Message: fmt.Sprintf("%d runs of owner %s %s for input digest %s: %s", len(es), short(k.owner), k.step, short12(k.digest), strings.Join(names, ", "))})
		}
	}
	return vs, late
}
