package check

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Labels and annotations the checks read. They are Kontinue's contract
// (reconciler/api, reconciler/runs, annotations), spelled out here so that
// the oracle does not import what it checks.
const (
	LabelStamped       = "kontinue.dev/stamped"
	LabelWorkload      = "carto.run/workload-name"
	LabelDeliverable   = "carto.run/deliverable-name"
	LabelRunnable      = "carto.run/runnable-name"
	LabelStep          = "carto.run/resource-name"
	LabelTemplate      = "carto.run/cluster-template-name"
	LabelLifecycle     = "carto.run/template-lifecycle"
	LabelShadow        = "kontinue.dev/shadow"
	LabelInputDigest   = "kontinue.dev/input-digest"
	LabelShard         = "kontinue.dev/shard"
	AnnotationInputSet = "kontinue.dev/input-set"
	AnnotationAdoptBy  = "kontinue.dev/adopt-by"
	AnnotationRetry    = "kontinue.dev/retry"
	AnnotationPaused   = "kontinue.dev/rollout-paused"
	OwnGroup           = "carto.run"
)

// History is a run as the API server recorded it.
type History struct {
	// Events are the writes, in log order.
	Events []*Event
	// Kontinue is the user Kontinue authenticates as; its writes as an
	// impersonated service account carry it as Event.User too.
	Kontinue string
	// Begin and End bound the run's observation.
	Begin, End time.Time
	// Marks are the moments a traffic operation or a fault began or ended:
	// what may make Kontinue write. Scope is a namespace, or "" for every
	// namespace (a template edit, a fault).
	Marks []Mark
	// Outages are the intervals during which Kontinue could not be expected
	// to act (a replica killed, the API server down, a failover), each
	// already widened by the time a fresh replica needs to catch up.
	Outages []Interval
	// Stops are the moments the API server was killed: a write it had
	// committed (in etcd) but not yet logged is missing from the log, so a
	// check that needs a write to have happened does not judge what a
	// lost write near a stop explains.
	Stops []time.Time

	incs map[string]*Incarnation
}

// Mark is a moment something outside Kontinue changed what it renders.
type Mark struct {
	At    time.Time
	Scope string
	What  string
}

// stopWithin says whether the API server was killed in [from, to].
func (h *History) stopWithin(from, to time.Time) bool {
	for _, s := range h.Stops {
		if !s.Before(from) && !s.After(to) {
			return true
		}
	}
	return false
}

// lostWriteWindow is how long after a stop a write lost at it may show,
// at most, in what Kontinue writes next (it reads the object back as soon
// as the API server answers again).
const lostWriteWindow = 2 * time.Minute

// Interval is [From, To].
type Interval struct{ From, To time.Time }

// Overlaps says whether [from, to] meets i.
func (i Interval) Overlaps(from, to time.Time) bool { return !from.After(i.To) && !to.Before(i.From) }

// ByKontinue says whether Kontinue wrote e (as itself or as an account).
func (h *History) ByKontinue(e *Event) bool { return e.User == h.Kontinue }

// Incarnation is one life of an object under a name: everything written
// to one uid.
type Incarnation struct {
	Key Key
	UID string
	// Created is the write that made it (nil when the log does not have it).
	Created *Event
	// Writes are the successful writes to it, the creation included, in
	// the order of the resourceVersions they left.
	Writes []*Event
}

// Creator says who made the incarnation ("" when unknown).
func (in *Incarnation) Creator() string {
	if in.Created == nil {
		return ""
	}
	return in.Created.User
}

// Incarnations groups the successful writes by the uid of the object they
// wrote, ordered by the resourceVersion each left (the order etcd applied
// them in, which the log's order may not be for concurrent writers).
func (h *History) Incarnations() map[string]*Incarnation {
	if h.incs != nil {
		return h.incs
	}
	h.incs = map[string]*Incarnation{}
	for _, e := range h.Events {
		if !e.OK() || e.Obj == nil || e.Obj.UID == "" {
			continue
		}
		in := h.incs[e.Obj.UID]
		if in == nil {
			in = &Incarnation{Key: e.Key(), UID: e.Obj.UID}
			h.incs[e.Obj.UID] = in
		}
		if e.Creates() && in.Created == nil {
			in.Created = e
		}
		in.Writes = append(in.Writes, e)
	}
	for _, in := range h.incs {
		sort.SliceStable(in.Writes, func(i, j int) bool { return before(in.Writes[i], in.Writes[j]) })
		if in.Key.Name == "" && len(in.Writes) > 0 {
			in.Key = in.Writes[0].Key()
		}
	}
	return h.incs
}

// before orders two writes to one object: the creation first, then by the
// resourceVersion they left (a delete's Status has none: by log order).
func before(a, b *Event) bool {
	if a.Creates() != b.Creates() {
		return a.Creates()
	}
	ra, rb := int64(0), int64(0)
	if a.Obj != nil {
		ra = a.Obj.ResourceVersion
	}
	if b.Obj != nil {
		rb = b.Obj.ResourceVersion
	}
	if ra != 0 && rb != 0 && ra != rb {
		return ra < rb
	}
	return a.Seq < b.Seq
}

// Role is what an object Kontinue writes is for: the owner its controller
// reference names, the step its labels name, and whether it is a shadow.
type Role struct {
	OwnerKind, OwnerName, OwnerUID string
	Step                           string
	Shadow                         bool
}

func (r Role) String() string {
	s := fmt.Sprintf("%s/%s (uid %s)", r.OwnerKind, r.OwnerName, short(r.OwnerUID))
	if r.Step != "" {
		s += " step " + r.Step
	}
	if r.Shadow {
		s += " (shadow)"
	}
	return s
}

// RoleOf reads the role an object's metadata claims: its controller
// reference (else its first owner reference), the step label and the
// shadow label.
func RoleOf(m *Meta) Role {
	if m == nil {
		return Role{}
	}
	var r Role
	ref := m.Controller()
	if ref == nil && len(m.Owners) > 0 {
		ref = &m.Owners[0]
	}
	if ref != nil {
		r.OwnerKind, r.OwnerName, r.OwnerUID = ref.Kind, ref.Name, ref.UID
	}
	r.Step = m.Labels[LabelStep]
	r.Shadow = m.Labels[LabelShadow] == "true"
	return r
}

func short(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

// Violation is an invariant that did not hold.
type Violation struct {
	Invariant int    // 0..9, as in the README
	Check     string // the check's name
	At        time.Time
	Object    string
	Message   string
}

func (v Violation) String() string {
	at := ""
	if !v.At.IsZero() {
		at = v.At.Format("15:04:05.000") + " "
	}
	return fmt.Sprintf("invariant %d (%s): %s%s: %s", v.Invariant, v.Check, at, v.Object, v.Message)
}

// Names of the invariants, by number.
var Names = map[int]string{
	0: "no crash",
	1: "ownership",
	2: "no fights",
	3: "ends recorded",
	4: "one run per input set",
	5: "lifetimes",
	6: "exact values",
	7: "bounded delay",
	8: "truthful status",
	9: "verified inputs",
}

// Summary lists violations one a line, at most n per invariant.
func Summary(vs []Violation, n int) string {
	var b strings.Builder
	count := map[int]int{}
	for _, v := range vs {
		count[v.Invariant]++
		if count[v.Invariant] <= n {
			b.WriteString(v.String())
			b.WriteByte('\n')
		}
	}
	for inv := range len(Names) {
		c := count[inv]
		if c > n {
			fmt.Fprintf(&b, "invariant %d: %d more\n", inv, c-n)
		}
	}
	return b.String()
}

// ownKind says whether e writes one of Kontinue's own kinds in a way that
// is Kontinue's to write: a status, or anything of carto.run but the two
// kinds a step stamps (Runnables and ClusterRunTemplates).
func ownKind(e *Event) bool {
	if e.Group != OwnGroup {
		return false
	}
	if e.Subresource == "status" {
		return true
	}
	return e.Resource != "runnables" && e.Resource != "clusterruntemplates"
}

// bookkeeping: kinds Kontinue writes for itself (events, its Lease, its
// CRDs): no invariant is about them.
func bookkeeping(e *Event) bool {
	switch e.Resource {
	case "events", "leases", "customresourcedefinitions":
		return true
	}
	return false
}
