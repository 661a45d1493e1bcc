// Package notify sends what happens to Workloads and Deliverables to
// where their developers are (docs/notifications.md): events derived from
// each owner's status write (Derive, a pure function of the status before
// and after), matched against the Alerts that may see the owner (Match),
// and delivered per Provider from a bounded queue by a goroutine of its
// own (queue.go), so that a slow or dead receiver never delays a
// reconcile.
package notify

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/notify/api"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Event is one thing that happened to one step of an owner.
type Event struct {
	Type     string // api.Event*
	Severity string // api.Severity*
	// The owner.
	Kind, Namespace, Name, UID string
	Labels                     map[string]string
	Chain, Step                string
	// Why, for failures: the step's Ready condition's reason and message.
	Reason, Message string
	// The commit: the source revision the step's input set came from, and
	// the source's URL.
	Repository, Revision string
	// The image, for ArtifactPublished.
	Image string
	At    time.Time
	// TraceParent is the W3C trace context of the step's input set (the
	// span `kontinue trace` shows), or "".
	TraceParent string
}

// Owner is the owner an event is about, as Derive reads it.
type Owner struct {
	Kind, Namespace, Name, UID, Chain string
	Labels                            map[string]string
}

// Derive is what an owner's status write shows happened, step by step:
// a step's Ready turning False (StepFailed, with its reason and message)
// and back to True (StepRecovered), an input set taken (StepStarted) and
// succeeded (StepSucceeded; Deployed too for a deployment step,
// ArtifactPublished for an image step), a source step's revision changing
// (SourceChanged), a step starting to be served by its shadow
// (RolledBack). The same status written again shows nothing.
func Derive(o Owner, prev, next []st.Resource, deploySteps map[string]bool, now time.Time) []Event {
	var out []Event
	repo, rev := sourceOf(next)
	for i := range next {
		r := &next[i]
		var p *st.Resource
		for j := range prev {
			if prev[j].Name == r.Name {
				p = &prev[j]
			}
		}
		// The step's input sets: current is its last success, latest the
		// newer one on its object (processing or failed).
		var current, latest *st.InputSet
		if pv := r.Provenance; pv != nil {
			current, latest = pv.Current, pv.Latest
		}
		newest := latest
		if newest == nil {
			newest = current
		}
		// ev is an event of set: its commit and its span in the owner's
		// trace.
		ev := func(typ, sev string, set *st.InputSet) Event {
			e := Event{Type: typ, Severity: sev, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID,
				Labels: o.Labels, Chain: o.Chain, Step: r.Name, At: now, Repository: repo, Revision: rev}
			if rp, rv := sourceOfSet(set); rv != "" {
				e.Repository, e.Revision = rp, rv
			}
			e.TraceParent, _ = spans.ForSet(o.UID, next, r.Name, set)
			return e
		}
		nc, pc := cond(r.Conditions, st.Ready), (*metav1.Condition)(nil)
		if p != nil {
			pc = cond(p.Conditions, st.Ready)
		}
		switch {
		case nc != nil && nc.Status == st.False && (pc == nil || pc.Status != st.False):
			// The newest set is the one failing (a failure after its
			// success is its object's, on the same set).
			e := ev(api.EventStepFailed, api.SeverityError, newest)
			e.Reason, e.Message = nc.Reason, nc.Message
			out = append(out, e)
		case nc != nil && nc.Status == st.True && pc != nil && pc.Status == st.False:
			out = append(out, ev(api.EventStepRecovered, api.SeverityInfo, newest))
		}
		if kindOf(r) == "ClusterSourceTemplate" {
			if v := output(r, "revision"); v != "" && (p == nil || output(p, "revision") != v) {
				out = append(out, ev(api.EventSourceChanged, api.SeverityInfo, newest))
			}
		}
		var before *st.Provenance
		if p != nil {
			before = p.Provenance
		}
		// A set taken: on the object (processing, or already ended when
		// it took one reconcile) and not before. A held set is not taken.
		for _, set := range []*st.InputSet{latest, current} {
			if set != nil && !taken(before, set.Digest) {
				out = append(out, ev(api.EventStepStarted, api.SeverityInfo, set))
			}
		}
		var pr []st.Resource
		if p != nil {
			pr = []st.Resource{*p}
		}
		for _, t := range st.Transitions(pr, []st.Resource{*r}) {
			if t.Outcome != st.OutcomeSucceeded {
				continue
			}
			// The set that succeeded is the step's current one.
			out = append(out, ev(api.EventStepSucceeded, api.SeverityInfo, current))
			if deploySteps[r.Name] {
				out = append(out, ev(api.EventDeployed, api.SeverityInfo, current))
			}
			if img := output(r, "image"); img != "" && kindOf(r) == "ClusterImageTemplate" {
				e := ev(api.EventArtifactPublished, api.SeverityInfo, current)
				e.Image = img
				out = append(out, e)
			}
		}
		if r.ServedBy == "shadow" && (p == nil || p.ServedBy != "shadow") {
			// The commit rolled back from: the newest set, failing, while
			// the shadow serves the last good one.
			e := ev(api.EventRolledBack, api.SeverityError, newest)
			if nc != nil {
				e.Reason, e.Message = nc.Reason, nc.Message
			}
			out = append(out, e)
		}
	}
	return out
}

func cond(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func kindOf(r *st.Resource) string {
	if r.TemplateRef == nil {
		return ""
	}
	return r.TemplateRef.Kind
}

// output is a step's output value as the status shows it: most steps
// keep no outputValues, only the outputs' previews.
func output(r *st.Resource, name string) string {
	s, _ := r.OutputString(name)
	return s
}

// taken reports whether p shows set digest taken: current or latest (a
// held set is not taken yet).
func taken(p *st.Provenance, digest string) bool {
	return p != nil && (p.Current != nil && p.Current.Digest == digest || p.Latest != nil && p.Latest.Digest == digest)
}

// sourceOfSet is the commit an input set came from (its first source
// input), or "".
func sourceOfSet(set *st.InputSet) (url, revision string) {
	if set != nil {
		for _, v := range set.Sources {
			if v.Revision != "" {
				return v.URL, v.Revision
			}
		}
	}
	return "", ""
}

// sourceOf is the revision the owner's first source step shows.
func sourceOf(steps []st.Resource) (url, revision string) {
	for i := range steps {
		if kindOf(&steps[i]) == "ClusterSourceTemplate" {
			if v := output(&steps[i], "revision"); v != "" {
				return output(&steps[i], "url"), v
			}
		}
	}
	return "", ""
}

// Repository is owner/name of a Git URL (https://host/owner/name.git,
// git@host:owner/name), or "".
func Repository(url string) string {
	u := url
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		if j := strings.IndexByte(u, '/'); j >= 0 {
			u = u[j+1:]
		} else {
			return ""
		}
	} else if i := strings.IndexByte(u, ':'); i >= 0 {
		u = u[i+1:]
	}
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	if strings.Count(u, "/") < 1 {
		return ""
	}
	return u
}
