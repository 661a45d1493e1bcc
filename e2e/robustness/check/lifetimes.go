package check

import (
	"fmt"

	"github.com/tidwall/gjson"
)

// Lifetimes is invariant 5, on the cluster read at the end (final) and
// after every owner was deleted and the garbage collector had its turn
// (afterGC, may be nil):
//
//   - (a) nothing Kontinue created outlives its owner: after the owners'
//     deletion, an object Kontinue created that is still there carries an
//     owner reference to an owner that existed (the garbage
//     collector's to remove: counted in gcLag, not a violation; the
//     collector itself can lag after an API server restart); one without
//     such a reference (cluster-scoped, or naming no owner that ever was)
//     is Kontinue's leftover;
//   - (b) a shadow (kontinue.dev/shadow) exists only while its primary
//     fails: its owner's status names it (shadowRef) and the step's
//     Healthy is not True (False, or Unknown while the primary works on
//     newer inputs, or waits for them), or lists it in status.orphans
//     (its removal failed);
//   - (c) every mutable object Kontinue stamped that is still there is
//     named by its owner's status (stampedRef, stampedObjects or orphans)
//     when its step stamped its current object (ResourceSubmitted True)
//     or is gone from the chain: nothing a step stopped wanting is left
//     behind.
//
// (b) and (c) judge only owners a replica serves whose status describes
// their current generation (invariant 8 says when one does not), and that
// a chain selects (docs/concepts.md: nothing is written or deleted for an
// owner no chain selects).
func Lifetimes(h *History, final, afterGC *Snapshot, served Served) (vs []Violation, gcLag int) {
	mine := createdByKontinue(h)
	owners := map[string]bool{} // uids of every owner the history saw
	for uid, in := range h.Incarnations() {
		if in.Key.Group == OwnGroup && (in.Key.Resource == "workloads" || in.Key.Resource == "deliverables" || in.Key.Resource == "runnables") {
			owners[uid] = true
		}
	}
	if afterGC != nil {
		for _, k := range afterGC.Keys() {
			m := MetaOf(afterGC.Objects[k])
			if m == nil || !mine[m.UID] {
				continue
			}
			if ownedByKnown(m, owners) {
				gcLag++
				continue
			}
			vs = append(vs, Violation{Invariant: 5, Check: "lifetimes", At: afterGC.At, Object: k.String(),
				Message: fmt.Sprintf("left after the owners were deleted, with no owner reference the garbage collector could follow (owners %v)", m.Owners)})
		}
	}
	if final == nil {
		return vs, gcLag
	}
	for _, k := range final.Keys() {
		if k.Group == OwnGroup {
			continue
		}
		m := MetaOf(final.Objects[k])
		if m == nil || !mine[m.UID] || m.Deleting {
			continue
		}
		role := RoleOf(m)
		if role.Step == "" {
			continue // a history ConfigMap: garbage-collected with its owner, (a) says
		}
		o := final.OwnerByUID(role.OwnerUID)
		if o == nil || !o.served(served) || !o.Settled() || o.Unwalked() {
			// An owner no chain selects keeps what it stamped, named or
			// not (seed 1322: it left its chain during the walk that
			// stamped them, whose status write was refused as decided on
			// a stale copy): its next walk takes them back or removes them.
			continue
		}
		st := o.Step(role.Step)
		if role.Shadow {
			healthy := condition(st.Get("conditions"), "Healthy").Get("status").String()
			if orphaned(o, k) {
				// Its removal failed (RBAC revoked: seed 1401) and the
				// status says so; retried when that changes.
				continue
			}
			if st.Get("shadowRef.name").String() != k.Name || healthy == "True" {
				vs = append(vs, Violation{Invariant: 5, Check: "lifetimes", At: final.At, Object: k.String(),
					Message: fmt.Sprintf("a shadow of %s, whose status has shadowRef %q and Healthy %q: a shadow exists only while its primary fails",
						role, st.Get("shadowRef.name").String(), healthy)})
			}
			continue
		}
		if lc := m.Labels[LabelLifecycle]; lc != "" && lc != "mutable" {
			continue // runs: retention decides
		}
		if st.Exists() && condition(st.Get("conditions"), "ResourceSubmitted").Get("status").String() != "True" {
			continue // the step waits (for inputs, for a refusal): what it stamped before stays
		}
		if !names(o, st, k) {
			vs = append(vs, Violation{Invariant: 5, Check: "lifetimes", At: final.At, Object: k.String(),
				Message: fmt.Sprintf("stamped by Kontinue for %s, still there, and its owner's status does not name it (stampedRef %s, orphans %s)",
					role, st.Get("stampedRef.name").String(), gjson.GetBytes(o.JSON, "status.orphans").Raw)})
		}
	}
	return vs, gcLag
}

// ownedByKnown: an owner reference (a stamped object's is its controller,
// a history ConfigMap's is not) names an owner the history saw.
func ownedByKnown(m *Meta, owners map[string]bool) bool {
	for _, o := range m.Owners {
		if owners[o.UID] {
			return true
		}
	}
	return false
}

// orphaned says whether the owner's status.orphans lists k.
func orphaned(o *Owner, k Key) bool { return listed(gjson.GetBytes(o.JSON, "status.orphans"), k) }

// names says whether the owner's status names k: the step's stampedRef or
// stampedObjects, or the owner's orphans.
func names(o *Owner, st gjson.Result, k Key) bool {
	return refers(st.Get("stampedRef"), k) || listed(st.Get("stampedObjects"), k) || orphaned(o, k)
}

// refers says whether ref names k.
func refers(ref gjson.Result, k Key) bool {
	rk := KeyOfRef(ref)
	return rk.Name == k.Name && rk.Resource == k.Resource && rk.Group == k.Group
}

// listed says whether a list of refs names k (a ref without its resource,
// as older statuses wrote them, by kind and name).
func listed(list gjson.Result, k Key) bool {
	found := false
	list.ForEach(func(_, r gjson.Result) bool {
		found = refers(r, k) || (r.Get("name").String() == k.Name && r.Get("kind").Exists() && !r.Get("resource").Exists())
		return !found
	})
	return found
}
