// Package runs holds the pure decisions about immutable objects ("runs"):
// the objects a Runnable or a step with lifecycle immutable/tekton creates
// anew for each set of inputs. It decides when to create a run, which run is
// the newest and the newest succeeded one, and which finished runs retention
// removes. Nothing here talks to the API server.
package runs

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	st "kontinue.dev/kontinue/reconciler/status"
)

// Bookkeeping Kontinue writes on every run. The digest is recorded on the
// object itself, not only in memory, so that a restart or a resync never
// creates a second run for the same input set. The creation time is written
// for people (sub-second, in the creating replica's clock) and never read:
// anyone can edit it and clocks differ, so runs are ordered by
// metadata.creationTimestamp.
const (
	LabelInputDigest    = "kontinue.dev/input-digest"
	AnnotationCreatedAt = "kontinue.dev/created-at"
)

// A retry (Cartographer #975): the annotation AnnotationRetry on an owner or
// a Runnable (annotations.Retry) asks, once per value (a token), for one
// more run of the current input set when its newest run failed. The run
// created for it carries the token (so that a reconcile that created it and
// could not record the token handled does not create a second one) and
// the name of the failed run it retries.
const (
	AnnotationRetry   = "kontinue.dev/retry"
	AnnotationRetryOf = "kontinue.dev/retry-of"
	// AnnotationAttempt numbers the runs of one input set from 1 (absent:
	// 1): a retry created within the second of the run it retries still
	// sorts as the newer (SortNewestFirst).
	AnnotationAttempt = "kontinue.dev/attempt"
)

// Outcome is where a run stands.
type Outcome int

// Outcomes.
const (
	Running Outcome = iota
	Succeeded
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "Succeeded"
	case Failed:
		return "Failed"
	}
	return "Running"
}

// Run is what the decisions need to know about one run.
type Run struct {
	Name    string
	UID     string
	Digest  string
	Created time.Time
	Outcome Outcome
	// Retry is the retry token the run was created for ("": none).
	Retry string
	// Attempt numbers the runs of its input set (AnnotationAttempt).
	Attempt int
	Obj     *unstructured.Unstructured
}

// FromObject reads a run's bookkeeping. Created is
// metadata.creationTimestamp: the API server sets it and no client can
// change it, so neither an edited annotation nor a replica's clock can
// reorder runs.
func FromObject(u *unstructured.Unstructured, outcome Outcome) Run {
	ann := u.GetAnnotations()
	attempt, err := strconv.Atoi(ann[AnnotationAttempt])
	if err != nil || attempt < 1 {
		attempt = 1
	}
	return Run{Name: u.GetName(), UID: string(u.GetUID()), Digest: u.GetLabels()[LabelInputDigest], Outcome: outcome, Obj: u,
		Created: u.GetCreationTimestamp().Time, Retry: ann[AnnotationRetry], Attempt: attempt}
}

// SortNewestFirst orders runs by creation, newest first. Creation times
// have a resolution of one second: within a second the run of current (the
// input set rendered now) comes first, so that a run just created for the
// current inputs is the newest and no second one is created; then the
// later attempt of an input set (a retry); then by name, so the choice is
// stable.
func SortNewestFirst(rs []Run, current string) {
	sort.SliceStable(rs, func(i, j int) bool {
		if !rs[i].Created.Equal(rs[j].Created) {
			return rs[i].Created.After(rs[j].Created)
		}
		if ci, cj := current != "" && rs[i].Digest == current, current != "" && rs[j].Digest == current; ci != cj {
			return ci
		}
		if rs[i].Digest == rs[j].Digest && rs[i].Attempt != rs[j].Attempt {
			return rs[i].Attempt > rs[j].Attempt
		}
		return rs[i].Name > rs[j].Name
	})
}

// NeedsCreate reports whether a run must be created for digest: only when
// no run exists or the newest one was made from other inputs. Comparing with
// the newest (not with any) run means going back to earlier inputs runs them
// again, so the newest run always matches the current inputs. rs must be
// sorted newest first.
func NeedsCreate(rs []Run, digest string) bool {
	return len(rs) == 0 || rs[0].Digest != digest
}

// Decision is what a step or a Runnable does about a run of its current
// input set.
type Decision int

// Decisions.
const (
	// Exists: the newest run has the current inputs.
	Exists Decision = iota
	// Create: create one.
	Create
	// Wait: one was created a moment ago and the cache does not show it
	// yet (Recent.Pending): create nothing, look again after PendingWait.
	Wait
)

// PendingWait is how soon a run just created and not in the cache yet is
// looked for again (the cache lags a create by milliseconds).
const PendingWait = 300 * time.Millisecond

// Decide says what to do about a run of digest, from the runs (newest
// first), whether one was created a moment ago (pending) and whether a
// retry asks for one more run of the same inputs (Retry).
func Decide(rs []Run, digest string, pending, retry bool) Decision {
	switch {
	case !retry && !NeedsCreate(rs, digest):
		return Exists
	case pending:
		return Wait
	}
	return Create
}

// Retry reports whether a retry token asks for one more run of digest:
// the newest run is of digest and failed, and no run carries the token
// yet. The caller passes only a token it has not handled (its status
// records the last one); rs must be sorted newest first, their outcomes
// judged.
func Retry(rs []Run, digest, token string) bool {
	if token == "" || len(rs) == 0 || rs[0].Digest != digest || rs[0].Outcome != Failed {
		return false
	}
	for _, r := range rs {
		if r.Retry == token {
			return false
		}
	}
	return true
}

// RetryRun is run marked as the retry of the failed run for token: its
// next attempt.
func RetryRun(run *unstructured.Unstructured, token string, failed Run) *unstructured.Unstructured {
	run = run.DeepCopy()
	ann := run.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationRetry], ann[AnnotationRetryOf] = token, failed.Name
	ann[AnnotationAttempt] = strconv.Itoa(max(failed.Attempt, 1) + 1)
	run.SetAnnotations(ann)
	return run
}

// NewestSucceeded returns the index of the newest succeeded run, or -1.
// rs must be sorted newest first.
func NewestSucceeded(rs []Run) int {
	for i, r := range rs {
		if r.Outcome == Succeeded {
			return i
		}
	}
	return -1
}

// Policy bounds how many finished runs are kept.
type Policy struct {
	MaxSucceeded, MaxFailed int64
}

// DefaultPolicy keeps 10 succeeded and 10 failed runs, as Cartographer does.
var DefaultPolicy = Policy{MaxSucceeded: 10, MaxFailed: 10}

// PolicyOf returns the policy of a spec, or the default.
func PolicyOf(p *api.RetentionPolicy) Policy {
	if p == nil {
		return DefaultPolicy
	}
	return Policy{MaxSucceeded: max(p.MaxSuccessfulRuns, 0), MaxFailed: max(p.MaxFailedRuns, 0)}
}

// Prune returns the runs retention removes: succeeded runs beyond the newest
// MaxSucceeded and failed runs beyond the newest MaxFailed. It never returns
// a running run, the newest succeeded run (it holds the outputs) or the
// newest run (it records the current input set: removing it would make the
// next reconcile create the same run again). rs must be sorted newest first.
func Prune(rs []Run, p Policy) []Run {
	var out []Run
	var succeeded, failed int64
	newestOK := NewestSucceeded(rs)
	for i, r := range rs {
		switch r.Outcome {
		case Succeeded:
			succeeded++
			if succeeded > p.MaxSucceeded && i != newestOK && i != 0 {
				out = append(out, r)
			}
		case Failed:
			failed++
			if failed > p.MaxFailed && i != 0 {
				out = append(out, r)
			}
		}
	}
	return out
}

// Recent remembers, for a short time, the run just created per key (a
// Runnable, or an owner's step). The cache that lists runs can lag behind a
// create by a few milliseconds; without this, a reconcile in that window
// would not see the new run and create a duplicate. The digest on the
// object itself covers restarts; this covers the window.
type Recent struct {
	mu  sync.Mutex
	m   map[string]recentRun
	ttl time.Duration
	now func() time.Time
}

type recentRun struct {
	digest, uid string
	at          time.Time
}

// NewRecent returns a memory whose entries expire after ttl.
func NewRecent(ttl time.Duration) *Recent {
	return &Recent{m: map[string]recentRun{}, ttl: ttl, now: time.Now}
}

// Remember records that a run with digest and uid was just created for key.
func (r *Recent) Remember(key, digest, uid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if len(r.m) >= 256 {
		// Keys of owners that went away are never asked again: drop what expired.
		for k, e := range r.m {
			if now.Sub(e.at) > r.ttl {
				delete(r.m, k)
			}
		}
	}
	r.m[key] = recentRun{digest: digest, uid: uid, at: now}
}

// Pending reports whether a run for digest was created for key so recently
// that the cache (whose runs are listed) does not show it yet: the caller
// must not create another, only look again shortly. Once listed, or once
// expired, the entry is dropped.
func (r *Recent) Pending(key, digest string, listed []Run) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	if !ok {
		return false
	}
	for _, l := range listed {
		if l.UID == e.uid {
			delete(r.m, key)
			return false
		}
	}
	if r.now().Sub(e.at) > r.ttl {
		delete(r.m, key)
		return false
	}
	return e.digest == digest
}

// Forget drops key (its Runnable or owner is gone).
func (r *Recent) Forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, key)
}

// Len is the number of remembered runs (tests, metrics).
func (r *Recent) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// SucceededCondition reads the Succeeded condition of a run, as Tekton
// writes it. found is false when the run has none (yet).
func SucceededCondition(u *unstructured.Unstructured) (status, reason, message string, found bool) {
	c, found := st.ConditionOf(u, "Succeeded")
	return c.Status, c.Reason, c.Message, found
}

// TektonOutcome is a run's outcome by its Succeeded condition: the rule of a
// Runnable and of lifecycle tekton without a health rule.
func TektonOutcome(u *unstructured.Unstructured) Outcome {
	s, _, _, _ := SucceededCondition(u)
	switch s {
	case "True":
		return Succeeded
	case "False":
		return Failed
	}
	return Running
}
