package check

import "fmt"

// Ownership is invariant 1: every write by Kontinue (as itself or as an
// account) to an object that is not of its own kinds (a status, a chain,
// an owner) goes to an incarnation (uid) that Kontinue created for the
// same owner (controller reference uid), the same step (carto.run/resource-name)
// and the same shadow-ness, or that was handed over to that owner before
// the write: the state just before the write carried
// kontinue.dev/adopt-by naming the owner, or a controller reference naming
// the owner's uid (which only someone who may write the object can set).
// Never a person's object, another owner's, or another step's.
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
		var state *Meta // the object before the write at hand
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
						claimed, how = &role, "handed over"
					} else {
						vs = append(vs, Violation{Invariant: 1, Check: "ownership", At: e.Time, Object: in.Key.String(),
							Message: fmt.Sprintf("Kontinue wrote it (%s %s, for %s) but did not create it and it was not handed over: %s; before the write: %s",
								e.Verb, who(e), role, origin(in), describe(state))})
						// Reported once per incarnation: what follows is the same take-over.
						claimed, how = &role, "taken over"
					}
				} else if (role.OwnerUID != claimed.OwnerUID || role.Step != claimed.Step || role.Shadow != claimed.Shadow) && !reported[role] {
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
