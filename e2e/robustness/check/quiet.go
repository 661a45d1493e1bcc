package check

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// QuietBounds are invariant 2's bounds.
type QuietBounds struct {
	// Object: Kontinue's successful writes to one object (not of its own
	// kinds) between two marks of its namespace.
	Object int
	// Status: Kontinue's writes of one owner's or chain's status between
	// two marks.
	Status int
	// Final: writes to any one object (status included) in the final quiet
	// window [QuietFrom, History.End].
	Final     int
	QuietFrom time.Time
}

// NoFights is invariant 2: an object is not written again and again while
// nothing it is rendered from changes. Between two marks that may change
// what it renders (a traffic operation in its namespace or cluster-wide, a
// fault), Kontinue writes one object at most b.Object times and one status
// at most b.Status times; in the final quiet window, when no operation and
// no fault runs any more, it writes any one object at most b.Final times,
// not counting a write that follows another writer's write to another
// object of its namespace (a Deployment's controller finishing its
// roll-out late).
// A fight with another controller, or two steps flipping one object, shows
// as many writes where nothing changed.
func NoFights(h *History, b QuietBounds) []Violation {
	writes := map[Key][]*Event{}
	for _, e := range h.Events {
		if !h.ByKontinue(e) || !e.OK() || bookkeeping(e) || e.Verb == "delete" || e.Verb == "deletecollection" {
			continue
		}
		if e.Group == OwnGroup && e.Subresource != "status" && ownKind(e) {
			continue
		}
		writes[e.Key()] = append(writes[e.Key()], e)
	}
	moved := othersMoved(h)
	var vs []Violation
	keys := make([]Key, 0, len(writes))
	for k := range writes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		ws := writes[k]
		SortByTime(ws)
		bound := b.Object
		if ws[0].Subresource == "status" && ws[0].Group == OwnGroup {
			bound = b.Status
		}
		// Window i holds the writes after the namespace's i-th mark.
		times := h.markTimes(k.Namespace)
		windows := map[int][]*Event{}
		var order []int
		for _, e := range ws {
			i := sort.Search(len(times), func(i int) bool { return times[i].After(e.Time) })
			if windows[i] == nil {
				order = append(order, i)
			}
			windows[i] = append(windows[i], e)
		}
		for _, i := range order {
			w := windows[i]
			if len(w) > bound {
				vs = append(vs, Violation{Invariant: 2, Check: "no fights", At: w[0].Time, Object: k.String(),
					Message: fmt.Sprintf("Kontinue wrote it %d times between %s and %s with nothing changed in its namespace (bound %d): %s",
						len(w), w[0].Time.Format("15:04:05.000"), w[len(w)-1].Time.Format("15:04:05.000"), bound, verbs(w))})
			}
		}
		if !b.QuietFrom.IsZero() {
			var late []*Event
			since := b.QuietFrom
			for _, e := range ws {
				if !e.Time.Before(b.QuietFrom) && !e.Time.After(h.End) {
					if !moved.between(k, since, e.Time) {
						late = append(late, e)
					}
					since = e.Time
				}
			}
			if len(late) > b.Final {
				vs = append(vs, Violation{Invariant: 2, Check: "no fights", At: late[0].Time, Object: k.String(),
					Message: fmt.Sprintf("Kontinue wrote it %d times in the final quiet window from %s (bound %d): %s",
						len(late), b.QuietFrom.Format("15:04:05.000"), b.Final, verbs(late))})
			}
		}
	}
	return vs
}

// moves are the successful writes of other writers (the real controllers)
// to objects of the kinds Kontinue stamps, by namespace: in the final
// quiet window no traffic runs, but a Deployment may still finish its
// roll-out (its controller writes its status) and Kontinue rightly writes
// its owner's status and the steps after it.
type moves map[string][]*Event

func othersMoved(h *History) moves {
	stamps := map[string]bool{}
	for _, e := range h.Events {
		if h.ByKontinue(e) && e.Creates() {
			stamps[e.Group+"/"+e.Resource] = true
		}
	}
	m := moves{}
	for _, e := range h.Events {
		if !h.ByKontinue(e) && e.OK() && !bookkeeping(e) && stamps[e.Group+"/"+e.Resource] {
			m[e.Namespace] = append(m[e.Namespace], e)
		}
	}
	return m
}

// between says whether another writer wrote an object of k's namespace
// other than k in (from, to]: what k is rendered from may have changed.
// A write to k itself excuses nothing: that is how a fight looks.
func (m moves) between(k Key, from, to time.Time) bool {
	for _, e := range m[k.Namespace] {
		if e.Time.After(from) && !e.Time.After(to) && e.Key() != k {
			return true
		}
	}
	return false
}

// markTimes are the times of the marks that concern namespace ns, in
// order; a cluster-scoped object (a chain, whose status tallies owners of
// every namespace) is concerned by every mark.
func (h *History) markTimes(ns string) []time.Time {
	var ts []time.Time
	for _, m := range h.Marks {
		if ns == "" || m.Scope == "" || m.Scope == ns {
			ts = append(ts, m.At)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	return ts
}

func verbs(ws []*Event) string {
	var parts []string
	for i, e := range ws {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("… %d more", len(ws)-i))
			break
		}
		s := e.Time.Format("15:04:05.000") + " " + e.Verb
		if e.Subresource != "" {
			s += "/" + e.Subresource
		}
		if e.As != "" {
			s += " as " + e.As
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// Reconciles are one replica's reconciles (by "controller result"),
// counted at the start and at the end of the final quiet window by the
// same process.
type Reconciles struct {
	Replica       string
	Before, After map[string]float64
}

// QuietReconciles is invariant 2's bound on work that writes nothing: in
// the final quiet window a replica reconciles at most perOwner times each
// owner (of the owners in the final read); the note says how many of all
// the replica's reconciles (a standby's are none). A loop that reads and decides
// again and again without writing (a requeue with no backoff, a wake by
// its own reads) is invisible to the audit log's writes; its reconciles
// are not. It returns the violations, and a note of the counts.
func QuietReconciles(rs []Reconciles, owners int, perOwner float64, at time.Time) ([]Violation, string) {
	var vs []Violation
	var note []string
	for _, r := range rs {
		var total, all float64
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.After)) {
			all += r.After[k]
			if d := r.After[k] - r.Before[k]; d > 0 {
				total += d
				parts = append(parts, fmt.Sprintf("%s %.0f", k, d))
			}
		}
		n := fmt.Sprintf("%s %.0f (of %.0f since it started)", r.Replica, total, all)
		if total > 0 {
			n = fmt.Sprintf("%s %.0f (of %.0f since it started: %s)", r.Replica, total, all, strings.Join(parts, ", "))
		}
		note = append(note, n)
		if bound := perOwner * float64(owners); total > bound {
			vs = append(vs, Violation{Invariant: 2, Check: "no fights", At: at, Object: "replica " + r.Replica,
				Message: fmt.Sprintf("%.0f reconciles in the final quiet window, more than %.0f (%g for each of %d owners): %s",
					total, bound, perOwner, owners, strings.Join(parts, ", "))})
		}
	}
	if len(note) == 0 {
		return vs, ""
	}
	return vs, "reconciles in the quiet window: " + strings.Join(note, ", ")
}

// Reconciled is one reconcile a replica logged (its debug line
// "reconciled"): when it ended, the key (Kind/namespace/name) and its
// outcome.
type Reconciled struct {
	Replica string
	At      time.Time
	Key     string
	Outcome string
}

// explainedBy is how long after another writer's write (not Kontinue's) in
// its namespace a reconcile is the news of that write: a Job the Job
// controller finishes late updates its status twice, and each update may
// be a reconcile of its owner (seed 1030: 3 Jobs, 5 reconciles in 0.1 s).
const explainedBy = time.Second

// backedOff bounds how much longer than the gap before it the gap after a
// failed or requeued reconcile is when the next reconcile is a retry on
// backoff: the workqueue doubles it (and a reconcile's own time adds a
// little). A gap far longer is a pause, and what ends it is news.
const backedOff, pause = 1.5, 3.0

// retries marks the reconciles (of lines) that retry, on a growing backoff,
// a reconcile that failed or asked to look again: between backedOff and
// pause times as long after it as it came after the one before, itself
// such a retry, on one replica (each has its own queue). A reconcile request (the suite's final look, a
// person's `kontinue reconcile`) resets the backoff of a template that
// never finishes rendering, and its retries come 0.1, 0.2, 0.4… s apart
// (seed 1307: 7 in the window, the bound 8): bounded, not a loop. A loop
// at a steady pace is counted whatever its outcomes.
func retries(lines []Reconciled) map[int]bool {
	byKey := map[string][]int{}
	for i, l := range lines {
		k := l.Replica + " " + l.Key
		byKey[k] = append(byKey[k], i)
	}
	out := map[int]bool{}
	for _, idx := range byKey {
		sort.SliceStable(idx, func(a, b int) bool { return lines[idx[a]].At.Before(lines[idx[b]].At) })
		grew := func(j int) bool { // the gap before lines[idx[j]] grew as a backoff does, after a retry
			prev := lines[idx[j-1]]
			before, after := prev.At.Sub(lines[idx[j-2]].At), lines[idx[j]].At.Sub(prev.At)
			ratio := float64(after) / float64(before)
			return (prev.Outcome == "error" || prev.Outcome == "requeue") && before > 0 && ratio >= backedOff && ratio <= pause
		}
		// Two gaps in a row, so that one reconcile of news in a steady
		// loop does not make the next look like a retry.
		for j := 3; j < len(idx); j++ {
			if grew(j) && grew(j-1) {
				out[idx[j]] = true
			}
		}
	}
	return out
}

// QuietOwners is invariant 2's bound on work that writes nothing, owner by
// owner: in the final quiet window [from, to] every replica together
// reconciles one key at most perOwner times, not counting a reconcile
// within explainedBy of another writer's write in the key's namespace (h's
// events; none when h is nil), nor a retry on a growing backoff (retries). QuietReconciles judges each
// replica's total from its metrics; a loop of one owner among many hides
// under that total (robustness seeds 735 and 737: 124 reconciles of one
// Deliverable among about 20 owners), and not here. The note names the
// keys reconciled most.
func QuietOwners(h *History, lines []Reconciled, from, to time.Time, perOwner int) ([]Violation, string) {
	type count struct {
		n, explained, backoff int
		outcomes              map[string]int
		replicas              map[string]bool
	}
	outside := map[string][]time.Time{} // namespace → other writers' writes
	if h != nil {
		for _, e := range h.Events {
			if e.OK() && !h.ByKontinue(e) && e.Namespace != "" && !e.Time.Before(from.Add(-explainedBy)) && !e.Time.After(to) {
				outside[e.Namespace] = append(outside[e.Namespace], e.Time)
			}
		}
	}
	explained := func(key string, at time.Time) bool {
		parts := strings.SplitN(key, "/", 3)
		if len(parts) != 3 {
			return false
		}
		for _, t := range outside[parts[1]] {
			if !t.After(at) && at.Sub(t) <= explainedBy {
				return true
			}
		}
		return false
	}
	counts := map[string]*count{}
	retried := retries(lines)
	for i, l := range lines {
		if l.At.Before(from) || l.At.After(to) {
			continue
		}
		c := counts[l.Key]
		if c == nil {
			c = &count{outcomes: map[string]int{}, replicas: map[string]bool{}}
			counts[l.Key] = c
		}
		if explained(l.Key, l.At) {
			c.explained++
			continue
		}
		if retried[i] {
			c.backoff++
			continue
		}
		c.n++
		c.outcomes[l.Outcome]++
		c.replicas[l.Replica] = true
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]].n != counts[keys[j]].n {
			return counts[keys[i]].n > counts[keys[j]].n
		}
		return keys[i] < keys[j]
	})
	describe := func(k string) string {
		c := counts[k]
		var parts []string
		for _, o := range slices.Sorted(maps.Keys(c.outcomes)) {
			parts = append(parts, fmt.Sprintf("%s %d", o, c.outcomes[o]))
		}
		d := fmt.Sprintf("%s %d (%s; on %s)", k, c.n, strings.Join(parts, ", "), strings.Join(slices.Sorted(maps.Keys(c.replicas)), " "))
		if c.explained > 0 {
			d += fmt.Sprintf(" and %d after another writer's write", c.explained)
		}
		if c.backoff > 0 {
			d += fmt.Sprintf(" and %d retries on a growing backoff", c.backoff)
		}
		return d
	}
	var vs []Violation
	var note []string
	for i, k := range keys {
		if counts[k].n > perOwner {
			vs = append(vs, Violation{Invariant: 2, Check: "no fights", At: to, Object: k,
				Message: fmt.Sprintf("reconciled %d times in the final quiet window (bound %d), while nothing changed: %s",
					counts[k].n, perOwner, describe(k))})
		}
		if i < 3 {
			note = append(note, describe(k))
		}
	}
	if len(keys) == 0 {
		return vs, "owners reconciled in the quiet window: none"
	}
	return vs, fmt.Sprintf("owners reconciled in the quiet window: %d, most: %s", len(keys), strings.Join(note, ", "))
}
