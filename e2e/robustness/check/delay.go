package check

import (
	"fmt"
	"time"

	"github.com/tidwall/gjson"
)

// Canary is a quiet tenant's owner whose param changes now and then, and
// the object at the end of its chain that must come to hold each value.
type Canary struct {
	Owner  Key    // the Workload
	Param  string // the param it changes
	Object Key    // the last step's object
	Path   string // where that object holds the value (gjson)
}

// DelayBounds are invariant 7's bounds.
type DelayBounds struct {
	Canary  time.Duration // a canary's change to its last object
	Observe time.Duration // an owner's change to a status describing it
	Rollout time.Duration // a roll-out that cannot halt, to its end
}

// BoundedDelay is invariant 7: whatever other tenants do, outside the
// injected outages (History.Outages: a change whose bound overlaps one is
// excused):
//
//   - (a) each change of a canary's param reaches the object at the end of
//     its chain (a Kontinue write holding that value, or a later one)
//     within b.Canary;
//   - (b) each change of an owner a replica serves (a new generation
//     written by anyone but Kontinue) is described by a status Kontinue
//     writes (observedGeneration at least that) within b.Observe, unless
//     the owner is deleted first: Kontinue never stops seeing owners;
//   - (c) a chain's roll-out that cannot halt (spec.rollout.pauseOnFailure
//     false, not paused) does not stay Progressing on one target for
//     longer than b.Rollout (outages excused), and is not Progressing at
//     the end on a target older than b.Rollout (the suite's settle time
//     has no fault): no owner, served or not, holds a wave.
func BoundedDelay(h *History, canaries []Canary, b DelayBounds, served Served) []Violation {
	var vs []Violation
	for _, c := range canaries {
		vs = append(vs, canaryDelay(h, c, b.Canary)...)
	}
	vs = append(vs, observeDelay(h, b.Observe, served)...)
	vs = append(vs, rolloutDelay(h, b.Rollout)...)
	return vs
}

// within says whether [from, to] lasted at most bound once the outages in
// it are taken away.
func (h *History) within(from, to time.Time, bound time.Duration) bool {
	d := to.Sub(from)
	var out time.Duration
	for _, o := range h.Outages {
		a, b := o.From, o.To
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			out += b.Sub(a)
		}
	}
	// Outages may overlap each other; never excuse more than the interval.
	return d-min(out, d) <= bound
}

func canaryDelay(h *History, c Canary, bound time.Duration) []Violation {
	type change struct {
		at    time.Time
		value string
	}
	var changes []change
	arrived := map[string]time.Time{} // value → first time the object held it
	last := ""
	for _, e := range h.Events {
		if !e.OK() || e.Obj == nil {
			continue
		}
		switch {
		case e.Key() == c.Owner && !h.ByKontinue(e) && e.Subresource == "":
			o := Owner{JSON: e.Response, Meta: e.Obj}
			v, ok := o.Param(c.Param)
			if ok && v != last {
				changes = append(changes, change{e.Time, v})
				last = v
			}
		case e.Key() == c.Object && h.ByKontinue(e):
			v := gjson.GetBytes(e.Response, c.Path)
			if _, seen := arrived[v.Raw]; v.Exists() && !seen {
				arrived[v.Raw] = e.Time
			}
			if v.Type == gjson.String {
				// A param "7" and a ConfigMap's "7": compare as the param's JSON.
				q := fmt.Sprintf("%q", v.Str)
				if _, seen := arrived[q]; !seen {
					arrived[q] = e.Time
				}
			}
		}
	}
	var vs []Violation
	for i, ch := range changes {
		// The first arrival of this value or of a later one.
		var at time.Time
		for _, later := range changes[i:] {
			if t, ok := arrived[later.value]; ok && !t.Before(ch.at) && (at.IsZero() || t.Before(at)) {
				at = t
			}
		}
		end := at
		if at.IsZero() {
			end = h.End
		}
		if h.within(ch.at, end, bound) {
			continue
		}
		what := "never reached it"
		if !at.IsZero() {
			what = fmt.Sprintf("reached it after %s", at.Sub(ch.at).Round(time.Millisecond))
		}
		vs = append(vs, Violation{Invariant: 7, Check: "bounded delay", At: ch.at, Object: c.Owner.String(),
			Message: fmt.Sprintf("the canary's change of %s to %s %s %s (bound %s)", c.Param, clip(ch.value), what, c.Object, bound)})
	}
	return vs
}

func observeDelay(h *History, bound time.Duration, served Served) []Violation {
	type change struct {
		e   *Event
		gen int64
	}
	status := ownerStatusWrites(h)
	var changes []change
	deleted := map[string]time.Time{}
	lastGen := map[string]int64{}
	for _, e := range h.Events {
		if !e.OK() || e.Obj == nil || e.Group != OwnGroup || (e.Resource != "workloads" && e.Resource != "deliverables") {
			continue
		}
		if e.Verb == "delete" {
			if _, ok := deleted[e.Obj.UID]; !ok {
				deleted[e.Obj.UID] = e.Time
			}
			continue
		}
		if e.Obj.Deleting {
			if _, ok := deleted[e.Obj.UID]; !ok {
				deleted[e.Obj.UID] = e.Time
			}
		}
		if h.ByKontinue(e) || e.Subresource != "" || e.Obj.Generation <= lastGen[e.Obj.UID] {
			continue
		}
		lastGen[e.Obj.UID] = e.Obj.Generation
		if served != nil && !served(e.Obj.Labels[LabelShard]) {
			continue
		}
		changes = append(changes, change{e, e.Obj.Generation})
	}
	var vs []Violation
	for _, ch := range changes {
		uid := ch.e.Obj.UID
		var at time.Time
		for _, w := range status[uid] {
			if !w.Time.Before(ch.e.Time) && gjson.GetBytes(w.Response, "status.observedGeneration").Int() >= ch.gen {
				at = w.Time
				break
			}
		}
		end := at
		if at.IsZero() {
			end = h.End
		}
		if d, ok := deleted[uid]; ok && d.Before(end) {
			continue
		}
		if h.within(ch.e.Time, end, bound) {
			continue
		}
		// A later change moved the owner out of every served shard.
		if served != nil && !servedLater(h, uid, ch.e, end, served) {
			continue
		}
		what := "no status describing it"
		if !at.IsZero() {
			what = fmt.Sprintf("the first status describing it after %s", at.Sub(ch.e.Time).Round(time.Millisecond))
		}
		vs = append(vs, Violation{Invariant: 7, Check: "bounded delay", At: ch.e.Time, Object: ch.e.Key().String(),
			Message: fmt.Sprintf("generation %d (%s by %s): %s (bound %s)", ch.gen, ch.e.Verb, actor(ch.e), what, bound)})
	}
	return vs
}

// servedLater says whether the owner stayed in a served shard from e until end.
func servedLater(h *History, uid string, e *Event, end time.Time, served Served) bool {
	for _, w := range h.Events {
		if w.Seq <= e.Seq || w.Time.After(end) || !w.OK() || w.Obj == nil || w.Obj.UID != uid || w.Subresource != "" {
			continue
		}
		if !served(w.Obj.Labels[LabelShard]) {
			return false
		}
	}
	return true
}

func actor(e *Event) string {
	if e.As != "" {
		return e.As
	}
	return e.User
}

func rolloutDelay(h *History, bound time.Duration) []Violation {
	type state struct {
		target   string
		since    time.Time
		reported bool
		canHalt  bool
		paused   bool
		msg      string
	}
	chains := map[Key]*state{}
	var vs []Violation
	stuck := func(k Key, s *state, now time.Time) {
		if s.target == "" || s.reported || s.canHalt || s.paused || h.within(s.since, now, bound) {
			return
		}
		s.reported = true
		vs = append(vs, Violation{Invariant: 7, Check: "bounded delay", At: s.since, Object: k.String(),
			Message: fmt.Sprintf("roll-out of %s Progressing for %s (pauseOnFailure false; bound %s): %s", s.target,
				now.Sub(s.since).Round(time.Second), bound, s.msg)})
	}
	for _, e := range h.Events {
		if e.Time.After(h.End) {
			break // the end's deletions complete what was stuck
		}
		if !e.OK() || e.Group != OwnGroup || (e.Resource != "clustersupplychains" && e.Resource != "clusterdeliveries") {
			continue
		}
		k := e.Key()
		if e.Verb == "delete" {
			delete(chains, k)
			continue
		}
		s := chains[k]
		if s == nil {
			s = &state{canHalt: true}
			chains[k] = s
		}
		r := gjson.ParseBytes(e.Response)
		if !r.Get("spec").Exists() {
			continue
		}
		// Whoever wrote it, the object says whether the roll-out may halt
		// or is paused.
		canHalt := !r.Get("spec.rollout").Exists() || r.Get("spec.rollout.pauseOnFailure").String() != "false"
		paused := r.Get(`metadata.annotations.kontinue\.dev/rollout-paused`).String() == "true"
		if (s.canHalt || s.paused) && !canHalt && !paused {
			s.since = e.Time // the clock starts when the roll-out may no longer wait
		}
		s.canHalt, s.paused = canHalt, paused
		if !h.ByKontinue(e) || e.Subresource != "status" {
			continue
		}
		phase, target := r.Get("status.rollout.phase").String(), r.Get("status.rollout.target").String()
		s.msg = condition(r.Get("status.conditions"), "RolledOut").Get("message").String()
		if phase != "Progressing" {
			s.target = ""
			continue
		}
		if target != s.target {
			s.target, s.since, s.reported = target, e.Time, false
			continue
		}
		stuck(k, s, e.Time)
	}
	// At the end the suite has given the roll-out its settle time without
	// any fault: an outage earlier excuses nothing any more.
	for k, s := range chains {
		if s.target == "" || s.reported || s.canHalt || s.paused || h.End.Sub(s.since) <= bound {
			continue
		}
		vs = append(vs, Violation{Invariant: 7, Check: "bounded delay", At: s.since, Object: k.String(),
			Message: fmt.Sprintf("roll-out of %s still Progressing at the end, %s after it began (pauseOnFailure false; bound %s): %s",
				s.target, h.End.Sub(s.since).Round(time.Second), bound, s.msg)})
	}
	return vs
}
