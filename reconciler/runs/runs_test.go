package runs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// mk builds runs newest first from a compact spec: "name:outcome" where
// outcome is s (succeeded), f (failed) or r (running); the first is newest.
func mk(spec string) []Run {
	var out []Run
	parts := strings.Fields(spec)
	for i, p := range parts {
		name, o, _ := strings.Cut(p, ":")
		r := Run{Name: name, UID: "uid-" + name, Digest: "d-" + name, Created: t0.Add(time.Duration(len(parts)-i) * time.Second)}
		switch o {
		case "s":
			r.Outcome = Succeeded
		case "f":
			r.Outcome = Failed
		}
		out = append(out, r)
	}
	return out
}

func names(rs []Run) string {
	var n []string
	for _, r := range rs {
		n = append(n, r.Name)
	}
	return strings.Join(n, " ")
}

func TestPrune(t *testing.T) {
	for _, tc := range []struct {
		name, runs string
		p          Policy
		want       string
	}{
		{"nothing to prune", "a:s b:f c:s", Policy{10, 10}, ""},
		{"old succeeded beyond the limit", "a:s b:s c:s d:s", Policy{2, 10}, "c d"},
		{"old failed beyond the limit", "a:f b:f c:f d:s", Policy{10, 1}, "b c"},
		{"running runs are never pruned", "a:r b:r c:s d:r", Policy{0, 0}, ""},
		{"newest succeeded kept even with max 0", "a:f b:s c:s", Policy{0, 10}, "c"},
		{"newest run kept even when failed and max 0", "a:f b:f c:s", Policy{10, 0}, "b"},
		{"newest run and newest succeeded both kept", "a:f b:s c:f d:s", Policy{0, 0}, "c d"},
		{"mixed, defaults", "a:r b:s c:f d:s e:f f:s g:f", DefaultPolicy, ""},
		{"mixed, 1 and 1", "a:r b:s c:f d:s e:f f:s g:f", Policy{1, 1}, "d e f g"},
		{"empty", "", Policy{0, 0}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, names(Prune(mk(tc.runs), tc.p)))
		})
	}
}

func TestNewestSucceededAndNeedsCreate(t *testing.T) {
	rs := mk("a:r b:f c:s d:s")
	assert.Equal(t, 2, NewestSucceeded(rs))
	assert.Equal(t, -1, NewestSucceeded(mk("a:r b:f")))
	assert.True(t, NeedsCreate(nil, "x"), "no run yet")
	assert.False(t, NeedsCreate(rs, "d-a"), "newest run has the digest")
	assert.True(t, NeedsCreate(rs, "d-c"), "an older run has the digest: inputs went back, run again")
	assert.True(t, NeedsCreate(rs, "other"))
}

func TestSortNewestFirst(t *testing.T) {
	sec := t0.Add(-time.Second)
	for _, tc := range []struct {
		name    string
		runs    []Run
		current string
		want    string
	}{
		{"by creation, then name", []Run{
			{Name: "old", Created: t0},
			{Name: "new", Created: t0.Add(time.Second)},
			{Name: "tie-a", Created: sec},
			{Name: "tie-b", Created: sec},
		}, "", "new old tie-b tie-a"},
		{"same second: the current input set first, whatever its name", []Run{
			{Name: "b", Digest: "d1", Created: t0},
			{Name: "a", Digest: "d2", Created: t0},
		}, "d2", "a b"},
		{"the current input set does not beat a later second", []Run{
			{Name: "z", Digest: "d2", Created: sec},
			{Name: "a", Digest: "d1", Created: t0},
		}, "d2", "a z"},
		{"no current input set: by name", []Run{
			{Name: "a", Digest: "", Created: t0},
			{Name: "b", Digest: "d1", Created: t0},
		}, "", "b a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			SortNewestFirst(tc.runs, tc.current)
			assert.Equal(t, tc.want, names(tc.runs))
		})
	}
	// A run created for the current inputs within the second of another
	// one is the newest: no second run for the same inputs.
	rs := []Run{{Name: "b", Digest: "d1", Created: t0}, {Name: "a", Digest: "d2", Created: t0}}
	SortNewestFirst(rs, "d2")
	assert.False(t, NeedsCreate(rs, "d2"))
}

func TestFromObjectUsesTheServersCreationTime(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetName("r1")
	u.SetUID("u1")
	u.SetLabels(map[string]string{LabelInputDigest: "abc"})
	u.SetCreationTimestamp(metav1.NewTime(t0))
	r := FromObject(u, Failed)
	assert.True(t, r.Created.Equal(t0))
	r.Created = t0
	assert.Equal(t, Run{Name: "r1", UID: "u1", Digest: "abc", Created: t0, Outcome: Failed, Attempt: 1, Obj: u}, r)
	for _, forged := range []string{"2099-01-01T00:00:00Z", t0.Add(-time.Hour).Format(time.RFC3339Nano), t0.Add(5 * time.Millisecond).Format(time.RFC3339Nano), "garbage"} {
		u.SetAnnotations(map[string]string{AnnotationCreatedAt: forged})
		assert.True(t, t0.Equal(FromObject(u, Running).Created), "annotation %q is never read", forged)
	}
}

func TestRecent(t *testing.T) {
	now := t0
	r := NewRecent(10 * time.Second)
	r.now = func() time.Time { return now }
	assert.False(t, r.Pending("k", "d1", nil), "nothing remembered")
	r.Remember("k", "d1", "uid-1")
	assert.True(t, r.Pending("k", "d1", nil), "created, cache does not show it: wait")
	assert.False(t, r.Pending("k", "d2", nil), "other inputs: may create")
	assert.False(t, r.Pending("other", "d1", nil), "per key")
	assert.True(t, r.Pending("k", "d1", []Run{{UID: "uid-0"}}))
	assert.False(t, r.Pending("k", "d1", []Run{{UID: "uid-1"}}), "listed: the cache decides from now on")
	assert.Equal(t, 0, r.Len(), "dropped once listed")

	r.Remember("k", "d1", "uid-1")
	now = now.Add(11 * time.Second)
	assert.False(t, r.Pending("k", "d1", nil), "expired")
	assert.Equal(t, 0, r.Len())

	// Expired entries of keys never asked again do not pile up.
	for i := 0; i < 300; i++ {
		r.Remember(fmt.Sprint("gone-", i), "d", "u")
	}
	now = now.Add(time.Minute)
	r.Remember("fresh", "d", "u")
	assert.Equal(t, 1, r.Len())
}

func TestOutcomes(t *testing.T) {
	withCond := func(status string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Other", "status": "True"},
			map[string]any{"type": "Succeeded", "status": status, "reason": "R", "message": "M"},
		}}}}
	}
	assert.Equal(t, Succeeded, TektonOutcome(withCond("True")))
	assert.Equal(t, Failed, TektonOutcome(withCond("False")))
	assert.Equal(t, Running, TektonOutcome(withCond("Unknown")))
	assert.Equal(t, Running, TektonOutcome(&unstructured.Unstructured{Object: map[string]any{}}))
	assert.Equal(t, Running, TektonOutcome(&unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": "bad"}}}))
	s, reason, msg, found := SucceededCondition(withCond("False"))
	assert.Equal(t, []any{"False", "R", "M", true}, []any{s, reason, msg, found})
}

func TestPolicyOf(t *testing.T) {
	assert.Equal(t, DefaultPolicy, PolicyOf(nil))
	assert.Equal(t, Policy{3, 0}, PolicyOf(&api.RetentionPolicy{MaxSuccessfulRuns: 3, MaxFailedRuns: -1}))
}

func TestDecide(t *testing.T) {
	with := func(digest string) []Run { return []Run{{Name: "r", Digest: digest, Outcome: Succeeded}} }
	tests := []struct {
		name    string
		list    []Run
		pending bool
		want    Decision
	}{
		{"no run yet", nil, false, Create},
		{"the newest run has these inputs", with("d1"), false, Exists},
		{"new inputs", with("d0"), false, Create},
		{"new inputs, a run created a moment ago", with("d0"), true, Wait},
		{"no run listed yet, one created a moment ago", nil, true, Wait},
		{"pending does not matter when a run exists", with("d1"), true, Exists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, Decide(tt.list, "d1", tt.pending, false)) })
	}
	// A retry asks for a run of the inputs the newest run has.
	assert.Equal(t, Create, Decide(with("d1"), "d1", false, true))
	assert.Equal(t, Wait, Decide(with("d1"), "d1", true, true), "the retry's run created a moment ago")
}

func TestRetry(t *testing.T) {
	run := func(digest string, o Outcome, token string) Run {
		return Run{Name: "r-" + digest + "-" + token, Digest: digest, Outcome: o, Retry: token}
	}
	tests := []struct {
		name  string
		list  []Run
		token string
		want  bool
	}{
		{"the newest run of these inputs failed", []Run{run("d1", Failed, "")}, "t1", true},
		{"no token", []Run{run("d1", Failed, "")}, "", false},
		{"no run", nil, "t1", false},
		{"the newest run succeeded", []Run{run("d1", Succeeded, ""), run("d1", Failed, "")}, "t1", false},
		{"the newest run is still running", []Run{run("d1", Running, "")}, "t1", false},
		{"the newest failed run is of other inputs (a new run comes anyway)", []Run{run("d0", Failed, "")}, "t1", false},
		{"a run for this token exists and failed again: once per token", []Run{run("d1", Failed, "t1"), run("d1", Failed, "")}, "t1", false},
		{"a run for an earlier token failed: a new token retries again", []Run{run("d1", Failed, "t1"), run("d1", Failed, "")}, "t2", true},
		{"the token's run is older than the newest", []Run{run("d1", Failed, ""), run("d0", Succeeded, "t1")}, "t1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, Retry(tt.list, "d1", tt.token)) })
	}
}

func TestRetryRun(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"generateName": "b-", "annotations": map[string]any{"a": "b"}}}}
	r := RetryRun(u, "t1", Run{Name: "b-xyz", Attempt: 1})
	assert.Equal(t, map[string]string{"a": "b", AnnotationRetry: "t1", AnnotationRetryOf: "b-xyz", AnnotationAttempt: "2"}, r.GetAnnotations())
	assert.Equal(t, map[string]string{"a": "b"}, u.GetAnnotations(), "a copy")
	assert.Equal(t, "t1", FromObject(r, Running).Retry)
	assert.Equal(t, 2, FromObject(r, Running).Attempt)
	assert.Equal(t, 1, FromObject(u, Running).Attempt, "no annotation: the first attempt")
	r.SetName("b-abc")
	assert.Equal(t, "3", RetryRun(u, "t2", FromObject(r, Running)).GetAnnotations()[AnnotationAttempt])
}

// A retry created within the second of the run it retries is the newer,
// whatever the names.
func TestSortNewestFirstAttempts(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rs := []Run{
		{Name: "z-first", Digest: "d1", Created: at, Attempt: 1},
		{Name: "a-third", Digest: "d1", Created: at, Attempt: 3},
		{Name: "m-second", Digest: "d1", Created: at, Attempt: 2},
		{Name: "older", Digest: "d0", Created: at.Add(-time.Second), Attempt: 5},
	}
	SortNewestFirst(rs, "d1")
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{"a-third", "m-second", "z-first", "older"}, names)
}
