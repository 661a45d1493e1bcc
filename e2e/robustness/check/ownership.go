package check

import (
	"fmt"
	"time"

	"github.com/tidwall/gjson"
)

// Ownership is invariant 1: every write by Kontinue (as itself or as an
// account) to an object that is not of its own kinds (a status, a chain,
// an owner) goes to an incarnation (uid) that Kontinue created for the
// same owner (controller reference uid), the same step (carto.run/resource-name)
// and the same shadow-ness, or that was handed over to that owner before
// the write: the state just before the write carried
// kontinue.dev/adopt-by naming the owner, or a controller reference naming
// the owner's uid (which only someone who may write the object can set),
// also from the owner it was made for. Never a person's object, another owner's, or another step's, but for the
// documented take-over of an object its step left (docs/security.md): a
// step of the same owner (and shadow-ness) may write an object another
// step holds once the log shows that step had left it (stepLeft).
//
// An incarnation whose creation the log does not have (the API server
// killed between the write and its audit line) is not judged; their count
// is returned.
func Ownership(h *History) (vs []Violation, unjudged int) {
	for _, in := range h.Incarnations() {
		if len(in.Writes) == 0 {
			continue
		}
		first := in.Writes[0]
		if first.Group == OwnGroup && first.Resource != "runnables" && first.Resource != "clusterruntemplates" {
			continue
		}
		if bookkeeping(first) {
			continue
		}
		var claimed *Role
		how := ""
		if in.Created != nil && h.ByKontinue(in.Created) {
			r := RoleOf(in.Created.Obj)
			claimed, how = &r, "created"
		}
		if in.Created == nil && h.ByKontinue(first) {
			unjudged++
			continue
		}
		var state *Meta        // the object before the write at hand
		var lastClaimed *Event // the claimed role's last write to it
		if claimed != nil {
			lastClaimed = in.Created
		}
		reported := map[Role]bool{}
		for _, e := range in.Writes {
			if e == in.Created {
				state = e.Obj
				continue
			}
			if h.ByKontinue(e) && !ownKind(e) {
				role := RoleOf(e.Obj)
				if e.Verb == "delete" || e.Verb == "deletecollection" {
					if claimed == nil {
						vs = append(vs, Violation{Invariant: 1, Check: "ownership", At: e.Time, Object: in.Key.String(),
							Message: fmt.Sprintf("Kontinue deleted it (%s) but did not create it: %s", who(e), origin(in))})
					}
				} else if claimed == nil {
					if handedOver(state, role) {
						claimed, how, lastClaimed = &role, "handed over", e
					} else {
						vs = append(vs, Violation{Invariant: 1, Check: "ownership", At: e.Time, Object: in.Key.String(),
							Message: fmt.Sprintf("Kontinue wrote it (%s %s, for %s) but did not create it and it was not handed over: %s; before the write: %s",
								e.Verb, who(e), role, origin(in), describe(state))})
						// Reported once per incarnation: what follows is the same take-over.
						claimed, how, lastClaimed = &role, "taken over", e
					}
				} else if sameRole(role, *claimed) {
					lastClaimed = e
				} else if role.OwnerUID != claimed.OwnerUID && handedOver(state, role) {
					// Handed over from the owner it was made for (an
					// earlier incarnation of the same name, waiting for the
					// garbage collector: seed 1211) by someone who may
					// write it.
					claimed, how, lastClaimed = &role, "handed over", e
				} else if why := h.stepLeft(in, *claimed, lastClaimed, role, e); why != "" {
					// The documented take-over: from now on the object is
					// the new step's, and the step that left it may not
					// write it back.
					how = fmt.Sprintf("taken over (from step %s, which %s)", claimed.Step, why)
					claimed, lastClaimed = &role, e
				} else if !reported[role] {
					// Reported once per role: a flip back and forth is one defect.
					reported[role] = true
					vs = append(vs, Violation{Invariant: 1, Check: "ownership", At: e.Time, Object: in.Key.String(),
						Message: fmt.Sprintf("Kontinue wrote it (%s %s) for %s, but it was %s for %s", e.Verb, who(e), role, how, *claimed)})
				}
			}
			if e.Obj != nil && e.Obj.Name != "" {
				state = e.Obj
			}
		}
	}
	return vs, unjudged
}

func sameRole(a, b Role) bool {
	return a.OwnerUID == b.OwnerUID && a.Step == b.Step && a.Shadow == b.Shadow
}

// stepLeft says why the step of held, whose last write to the object of in
// was last, had left that object before e, a write of it for role, another
// step of the same owner ("" when the log does not show it). The
// documented take-over (docs/security.md, reconciler/owner/claims.go) is
// that of a mutable object whose step left the owner's chain, or renders
// another name now; the log shows either:
//
//   - after its last write (or refused attempt) to this object, the step
//     wrote, or tried to write and was refused (a name someone else
//     holds), another object of the same kind, namespace, owner and
//     shadow-ness, not deleted since: a mutable step stamps one object of
//     a kind, so it renders that name now (one that came back to this
//     name would have had the other removed as an orphan);
//   - every chain that selects the owner's labels as they were at e, in
//     every version the log has of it up to e, names the new step and not
//     the old one.
//
// Anything else stays a violation: the holder may still render the name
// (robustness seed 504), which the label then says is its.
func (h *History) stepLeft(in *Incarnation, held Role, last *Event, role Role, e *Event) string {
	if held.OwnerUID == "" || held.OwnerUID != role.OwnerUID || held.Shadow != role.Shadow ||
		held.Step == "" || role.Step == "" || last == nil || !mutable(last.Obj) || !mutable(e.Obj) {
		return ""
	}
	// What the step wrote, or meant to write where it was refused (a name
	// someone else holds): either way a name it rendered then. Its last
	// attempt at this object counts as its last write.
	var others []*Event
	since := last.Time
	for _, y := range h.Events { // in log order, which concurrent writes may not keep to time
		if !y.Time.After(last.Time) || !y.Time.Before(e.Time) || !h.ByKontinue(y) || y.Subresource != "" ||
			y.Verb == "delete" || y.Verb == "deletecollection" ||
			y.Group != in.Key.Group || y.Resource != in.Key.Resource || y.Namespace != in.Key.Namespace {
			continue
		}
		m := y.Obj
		if !y.OK() {
			m = y.Req
		}
		if m == nil || m.Name == "" || !sameRole(RoleOf(m), held) {
			continue
		}
		if m.Name == in.Key.Name {
			if y.Time.After(since) {
				since = y.Time
			}
			continue
		}
		others = append(others, y)
	}
	for _, y := range others {
		if y.Time.After(since) && !h.deletedBetween(y.Key(), y.Time, e.Time) {
			did := "wrote"
			if !y.OK() {
				did = fmt.Sprintf("tried to write (%d)", y.Code)
			}
			return fmt.Sprintf("%s %s at %s", did, y.Key(), y.Time.Format("15:04:05.000"))
		}
	}
	if h.chainsLack(held, role, e) {
		return "is not in the chain that selects the owner now"
	}
	return ""
}

// mutable says whether an object is a mutable step's (one object, applied
// again), not a run of an immutable one.
func mutable(m *Meta) bool {
	if m == nil {
		return false
	}
	lc := m.Labels[LabelLifecycle]
	return lc == "" || lc == "mutable"
}

// deletedBetween says whether an object named k was deleted in (from, to).
func (h *History) deletedBetween(k Key, from, to time.Time) bool {
	for _, d := range h.Events {
		if !d.OK() || d.Subresource != "" || !d.Time.After(from) || !d.Time.Before(to) {
			continue
		}
		if (d.Verb == "delete" && d.Key() == k) || (d.Verb == "deletecollection" &&
			d.Group == k.Group && d.Resource == k.Resource && d.Namespace == k.Namespace) {
			return true
		}
	}
	return false
}

// chainsLack says whether the chains that select the owner of held, by
// its labels as its last write before e left them, name role's step and
// not held's, in every version of them the log has up to e (an owner may
// stay on an earlier version during a roll-out). A selector the check
// cannot evaluate (match expressions or fields) is taken to select the
// owner.
func (h *History) chainsLack(held, role Role, e *Event) bool {
	resource := map[string]string{"Workload": "clustersupplychains", "Deliverable": "clusterdeliveries"}[held.OwnerKind]
	owner := h.Incarnations()[held.OwnerUID]
	if resource == "" || owner == nil {
		return false
	}
	var labels map[string]string
	for _, w := range owner.Writes {
		if w.Time.Before(e.Time) && w.Obj != nil && w.Obj.Name != "" {
			labels = w.Obj.Labels
		}
	}
	if labels == nil {
		return false
	}
	named := false
	for _, c := range h.Events {
		if !c.Time.Before(e.Time) || !c.OK() || c.Group != OwnGroup || c.Resource != resource || len(c.Response) == 0 {
			continue
		}
		spec := gjson.GetBytes(c.Response, "spec")
		if !spec.IsObject() || !selects(spec, labels) {
			continue
		}
		for _, r := range spec.Get("resources.#.name").Array() {
			switch r.String() {
			case held.Step:
				return false
			case role.Step:
				named = true
			}
		}
	}
	return named
}

// selects says whether a chain's spec may select an object with labels.
func selects(spec gjson.Result, labels map[string]string) bool {
	if spec.Get("selectorMatchExpressions.#").Int() > 0 || spec.Get("selectorMatchFields.#").Int() > 0 {
		return true
	}
	for k, v := range spec.Get("selector").Map() { // none: selects everything
		if labels[k] != v.String() {
			return false
		}
	}
	return true
}

// handedOver says whether the state before a write hands the object to the
// role's owner.
func handedOver(state *Meta, role Role) bool {
	if state == nil || role.OwnerUID == "" {
		return false
	}
	if c := state.Controller(); c != nil && c.UID == role.OwnerUID {
		return true
	}
	return state.Annotations[AnnotationAdoptBy] == role.OwnerKind+"/"+role.OwnerName
}

func who(e *Event) string {
	if e.As != "" {
		return "as " + e.As
	}
	return "as itself"
}

func origin(in *Incarnation) string {
	if in.Created == nil {
		return "created before the log"
	}
	s := fmt.Sprintf("created %s by %s", in.Created.Time.Format("15:04:05.000"), in.Created.User)
	if in.Created.As != "" {
		s += " as " + in.Created.As
	}
	return s
}

func describe(m *Meta) string {
	if m == nil {
		return "unknown"
	}
	s := fmt.Sprintf("labels %v", m.Labels)
	if c := m.Controller(); c != nil {
		s += fmt.Sprintf(", controller %s/%s (uid %s)", c.Kind, c.Name, short(c.UID))
	} else {
		s += ", no controller"
	}
	if a := m.Annotations[AnnotationAdoptBy]; a != "" {
		s += ", adopt-by " + a
	}
	return s
}
