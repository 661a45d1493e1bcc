package check

import (
	"fmt"
	"sort"
	"time"

	"github.com/tidwall/gjson"
)

// EndsRecorded is invariant 3, read from the sequence of Kontinue's
// writes of owners' statuses and of stamped objects' input-set annotation
// (kontinue.dev/input-set):
//
//   - (a) a gated step (gated says which templates are) moves its object
//     from input set N to M only after a status write that records N's
//     end: N is the step's provenance.current with outcome Succeeded, or
//     its provenance.latest with outcome Failed. A set that completed and
//     was not recorded is lost (its outputs never reach downstream, its
//     history calls it Superseded).
//   - (b) outputs come only from sets that were stamped: every
//     provenance.current a status write names was, before that write,
//     the input set of an object Kontinue wrote for that owner and step
//     (primary, shadow, run or Runnable).
//
// Steps whose status carries no provenance (a status cut to size) are not
// judged, nor what a write lost at an API server kill (History.Stops)
// explains: (a) a move with a stop since the object's write before it, (b)
// a current set named within lostWriteWindow after a stop.
func EndsRecorded(h *History, gated func(template string) bool) []Violation {
	status := ownerStatusWrites(h)
	// sets[owner uid/step] = input sets stamped so far, with when.
	type stamped struct {
		set string
		at  *Event
	}
	sets := map[string][]stamped{}
	ambiguous := serverErrors(h)
	var vs []Violation
	for _, in := range h.Incarnations() {
		prevSet, prevTemplate := "", ""
		var prevAt *Event
		for _, e := range in.Writes {
			if e.Obj == nil || e.Obj.Name == "" || ownKind(e) || e.Verb == "delete" {
				continue
			}
			if !h.ByKontinue(e) {
				// Kontinue's write answered with a server error (a 504
				// when the API server timed out) may still have been done
				// (seed 1035): the next response that shows the object on
				// another input set (any writer's, such as its
				// controller's status write) stands for it.
				since := h.Begin
				if prevAt != nil {
					since = prevAt.Time
				}
				if set := e.Obj.Annotations[AnnotationInputSet]; set == "" || set == prevSet || !ambiguous.within(in.Key, since, e.Time) {
					continue
				}
			}
			role := RoleOf(e.Obj)
			set := e.Obj.Annotations[AnnotationInputSet]
			if role.OwnerUID == "" || role.Step == "" || set == "" {
				continue
			}
			key := role.OwnerUID + "/" + role.Step
			sets[key] = append(sets[key], stamped{set, e})
			lostBetween := prevAt != nil && h.stopWithin(prevAt.Time, e.Time)
			prevAt = e
			template := e.Obj.Labels[LabelTemplate]
			mutable := e.Obj.Labels[LabelLifecycle] == "" || e.Obj.Labels[LabelLifecycle] == "mutable"
			if role.Shadow || !mutable || !gated(template) {
				prevSet, prevTemplate = set, template
				continue
			}
			if prevSet != "" && set != prevSet && template == prevTemplate && !lostBetween {
				last := lastBefore(status[role.OwnerUID], e)
				if last != nil {
					step := stepStatus(last.Response, role.Step)
					prov := step.Get("provenance")
					if prov.Exists() {
						cur, lat := prov.Get("current"), prov.Get("latest")
						ended := (cur.Get("digest").String() == prevSet && cur.Get("outcome").String() == "Succeeded") ||
							(lat.Get("digest").String() == prevSet && lat.Get("outcome").String() == "Failed")
						if !ended {
							vs = append(vs, Violation{Invariant: 3, Check: "ends recorded", At: e.Time, Object: in.Key.String(),
								Message: fmt.Sprintf("%s: input set %s went in while the end of %s was not recorded: the owner's last status before it (%s) has current %s, latest %s",
									role, short12(set), short12(prevSet), last.Time.Format("15:04:05.000"), setOf(cur), setOf(lat))})
						}
					}
				}
			}
			prevSet, prevTemplate = set, template
		}
	}
	// (b) Every current set was stamped before the status names it.
	for uid, ws := range status {
		seen := map[string]bool{}
		for _, w := range ws {
			gjson.GetBytes(w.Response, "status.resources").ForEach(func(_, r gjson.Result) bool {
				cur := r.Get("provenance.current")
				if !cur.Exists() || !r.Get("stampedRef").Exists() {
					return true
				}
				d := cur.Get("digest").String()
				step := r.Get("name").String()
				if d == "" || seen[step+"/"+d] {
					return true
				}
				ok := false
				for _, s := range sets[uid+"/"+step] {
					if s.set == d && s.at.Time.Before(w.Time) {
						ok = true
						break
					}
				}
				seen[step+"/"+d] = true
				if !ok && !h.stopWithin(w.Time.Add(-lostWriteWindow), w.Time) {
					vs = append(vs, Violation{Invariant: 3, Check: "ends recorded", At: w.Time, Object: w.Key().String(),
						Message: fmt.Sprintf("step %s: its outputs are said to come from input set %s, which no object of the step was stamped with before", step, short12(d))})
				}
				return true
			})
		}
	}
	return vs
}

// ownerStatusWrites are Kontinue's successful writes of owners' statuses,
// by owner uid, in time order.
func ownerStatusWrites(h *History) map[string][]*Event {
	out := map[string][]*Event{}
	for _, e := range h.Events {
		if h.ByKontinue(e) && e.OK() && e.Group == OwnGroup && e.Subresource == "status" && e.Obj != nil &&
			(e.Resource == "workloads" || e.Resource == "deliverables") {
			out[e.Obj.UID] = append(out[e.Obj.UID], e)
		}
	}
	for _, ws := range out {
		SortByTime(ws)
	}
	return out
}

// lastBefore is the last of ws (in time order) that ended before e.
func lastBefore(ws []*Event, e *Event) *Event {
	i := sort.Search(len(ws), func(i int) bool { return !ws[i].Time.Before(e.Time) })
	if i == 0 {
		return nil
	}
	return ws[i-1]
}

// stepStatus is status.resources[name==step] of an owner's JSON.
func stepStatus(owner []byte, step string) gjson.Result {
	var out gjson.Result
	gjson.GetBytes(owner, "status.resources").ForEach(func(_, r gjson.Result) bool {
		if r.Get("name").String() == step {
			out = r
			return false
		}
		return true
	})
	return out
}

func setOf(r gjson.Result) string {
	if !r.Exists() {
		return "none"
	}
	return short12(r.Get("digest").String()) + " " + r.Get("outcome").String()
}

func short12(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// writeTimes are, by object, when Kontinue's writes to it were answered
// with a server error.
type writeTimes map[Key][]time.Time

// serverErrors are Kontinue's writes (not deletes, not of its own kinds)
// answered with a server error: done or not, the answer does not say.
func serverErrors(h *History) writeTimes {
	out := writeTimes{}
	for _, e := range h.Events {
		if h.ByKontinue(e) && e.Code >= 500 && e.Verb != "delete" && e.Verb != "deletecollection" && !ownKind(e) {
			out[e.Key()] = append(out[e.Key()], e.Time)
		}
	}
	return out
}

// within says whether one of k's times is in [from, to].
func (w writeTimes) within(k Key, from, to time.Time) bool {
	for _, t := range w[k] {
		if !t.Before(from) && !t.After(to) {
			return true
		}
	}
	return false
}
