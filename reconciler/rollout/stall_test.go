package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStand: where an admitted owner stands on the target B, for every
// fact that no roll-out and no replica will change: its shard served by
// no running replica, its deletion, a chain condition that says no chain
// renders it any more. What its status says happened on the target counts
// first (but for an owner that left the chain); nil served knows of no
// shard that is down.
func TestStand(t *testing.T) {
	live := map[string]bool{"": true, "a": true}
	shard := func(v string) map[string]string { return map[string]string{"kontinue.dev/shard": v} }
	for _, tc := range []struct {
		name   string
		o      Owner
		served map[string]bool
		want   Standing
		why    string
	}{
		{name: "ready on the target", o: Owner{Revision: "B", Ready: "True", Current: true}, served: live, want: Updated},
		{name: "failed on the target", o: Owner{Revision: "B", Ready: "False", Current: true}, served: live, want: Failed},
		{name: "on its way", o: Owner{Revision: "A", Ready: "True", Current: true}, served: live, want: Moving},
		{name: "on the target, not Ready yet", o: Owner{Revision: "B", Ready: "Unknown", Current: true}, served: live, want: Moving},
		{name: "an older generation's status", o: Owner{Revision: "B", Ready: "True"}, served: live, want: Moving},
		{name: "no status yet", o: Owner{}, served: live, want: Moving},
		{name: "in a live shard", o: Owner{Labels: shard("a"), Revision: "A", Current: true}, served: live, want: Moving},

		{name: "in a shard no replica serves", o: Owner{Labels: shard("nowhere"), Revision: "A", Ready: "True", Current: true}, served: live,
			want: PassedOver, why: ReasonUnserved},
		{name: "the default shard, down", o: Owner{Revision: "A", Current: true}, served: map[string]bool{"a": true},
			want: PassedOver, why: ReasonUnserved},
		{name: "an empty label: no replica ever serves it", o: Owner{Labels: shard(""), Revision: "A", Current: true}, served: nil,
			want: PassedOver, why: ReasonUnserved},
		{name: "a label that is no shard name", o: Owner{Labels: shard("Bad_Name"), Revision: "A", Current: true}, served: nil,
			want: PassedOver, why: ReasonUnserved},
		{name: "which shards run is not known: a shard name counts as served", o: Owner{Labels: shard("nowhere"), Revision: "A", Current: true},
			served: nil, want: Moving},
		{name: "unserved, but Ready on the target: counted", o: Owner{Labels: shard("nowhere"), Revision: "B", Ready: "True", Current: true},
			served: live, want: Updated},
		{name: "unserved, failed on the target: a failure all the same", o: Owner{Labels: shard("nowhere"), Revision: "B", Ready: "False", Current: true},
			served: live, want: Failed},
		{name: "unserved, its spec edited since", o: Owner{Labels: shard("nowhere"), Revision: "B", Ready: "True"}, served: live,
			want: PassedOver, why: ReasonUnserved},

		{name: "being deleted", o: Owner{Revision: "A", Ready: "True", Current: true, Deleting: true}, served: live,
			want: PassedOver, why: ReasonDeleting},
		{name: "being deleted, Ready on the target", o: Owner{Revision: "B", Ready: "True", Current: true, Deleting: true}, served: live, want: Updated},

		{name: "no chain selects it any more", o: Owner{Revision: "A", Ready: "False", Current: true, ChainReason: "SupplyChainNotFound"}, served: live,
			want: PassedOver, why: "SupplyChainNotFound"},
		{name: "left the chain after it moved: not the target's failure", o: Owner{Revision: "B", Ready: "False", Current: true, ChainReason: "SupplyChainNotFound"},
			served: live, want: PassedOver, why: "SupplyChainNotFound"},
		{name: "two chains select it", o: Owner{Revision: "A", Ready: "False", Current: true, ChainReason: "MultipleDeliveryMatches"}, served: live,
			want: PassedOver, why: "MultipleDeliveryMatches"},
		{name: "labels removed", o: Owner{Revision: "A", Ready: "False", Current: true, ChainReason: "WorkloadLabelsMissing"}, served: live,
			want: PassedOver, why: "WorkloadLabelsMissing"},
		{name: "its spec cannot be read", o: Owner{Revision: "A", Ready: "False", Current: true, ChainReason: "InvalidSpec"}, served: live,
			want: PassedOver, why: "InvalidSpec"},
		{name: "a chain condition from an older generation: its replica looks again", o: Owner{Revision: "A", Ready: "False", ChainReason: "SupplyChainNotFound"},
			served: live, want: Moving},
		{name: "the chain is invalid: the chain's own failure, which a fix changes", o: Owner{Revision: "A", Ready: "False", Current: true, ChainReason: "InvalidChain"},
			served: live, want: Moving},
		{name: "templates missing in the revision: it chose the target, and failed", o: Owner{Revision: "B", Ready: "False", Current: true, ChainReason: "TemplatesNotFound"},
			served: live, want: Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Stand(tc.o, "B", tc.served)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.why, why)
			if tc.want == Moving || tc.want == PassedOver {
				require.Equal(t, tc.why, Stalled(tc.o, tc.served), "Stalled says the same of an owner not settled on the target")
			}
		})
	}
}

// TestNextPassesOver: a wave does not wait for an owner nothing will move,
// and names it in the status and the condition (a bounded list and a
// count); it still waits for the others, and still halts on a failure. A
// completed roll-out keeps the names; the next revision forgets them.
func TestNextPassesOver(t *testing.T) {
	c := policy(t, &Policy{PauseOnFailure: new(bool), Waves: []Wave{
		{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}}}})
	canary := map[string]string{"canary": "true"}
	tenant := map[string]string{"canary": "true", "kontinue.dev/shard": "nowhere"}
	served := map[string]bool{"": true}
	A, B := Revision{Name: "A"}, Revision{Name: "B"}
	rolling := Status{Stable: "A", Target: "B", Phase: PhaseProgressing, Revisions: []Revision{A, B}}
	platform := Owner{Namespace: "ns", Name: "platform", Labels: canary, Revision: "B", Ready: "True", Current: true}
	stuck := Owner{Namespace: "t", Name: "tenant", Labels: tenant, Revision: "A", Ready: "True", Current: true}

	later := Owner{Namespace: "ns", Name: "later", Revision: "A", Ready: "True", Current: true}

	// The case: the tenant's canary in a shard nobody serves.
	out := Next(Input{Policy: c, Prev: rolling, Live: &B, Owners: []Owner{platform, stuck, later}, Served: served})
	s := out.Status
	assert.Equal(t, PhaseProgressing, s.Phase)
	assert.Equal(t, 1, s.Wave, "the canary wave is done without the tenant; the last waits for its owner")
	assert.Equal(t, []PassedOwner{{Owner: "t/tenant", Reason: ReasonUnserved}}, s.PassedOver)
	assert.Equal(t, 1, s.PassedOverCount)
	assert.Equal(t, "wave 2 of 2: 1 of 3 admitted owner(s) Ready on revision B; 1 owner(s) passed over, which nothing can move now: t/tenant (Unserved)", out.Condition.Message)

	// Without knowing which shards run, the tenant holds the wave (as
	// before): only a shard name that no replica can serve is passed over.
	out = Next(Input{Policy: c, Prev: rolling, Live: &B, Owners: []Owner{platform, stuck}})
	assert.Equal(t, 0, out.Status.Wave)
	assert.Empty(t, out.Status.PassedOver)
	assert.Contains(t, out.Condition.Message, "wave 1 of 2: 1 of 2 admitted owner(s) Ready on revision B")

	// The platform's own canary not yet Ready: the wave waits for it.
	slow := platform
	slow.Ready = "Unknown"
	out = Next(Input{Policy: c, Prev: rolling, Live: &B, Owners: []Owner{slow, stuck}, Served: served})
	assert.Equal(t, 0, out.Status.Wave)
	assert.Equal(t, 1, out.Status.PassedOverCount)

	// Pausing on failure, a failure halts, and the passed over are named too.
	halting := policy(t, &Policy{Waves: []Wave{{Selector: &metav1.LabelSelector{MatchLabels: canary}}}})
	failed := platform
	failed.Ready = "False"
	out = Next(Input{Policy: halting, Prev: rolling, Live: &B, Owners: []Owner{failed, stuck}, Served: served})
	assert.Equal(t, PhaseHalted, out.Status.Phase)
	assert.Equal(t, []string{"ns/platform"}, out.Status.Failing)
	assert.Contains(t, out.Condition.Message, "t/tenant (Unserved)")

	// Many: a bounded list, sorted, and the count.
	var many []Owner
	for i := 0; i < 25; i++ {
		o := stuck
		o.Name = string(rune('a'+i)) + "-tenant"
		o.Deleting = i%2 == 0
		many = append(many, o)
	}
	out = Next(Input{Policy: c, Prev: rolling, Live: &B, Owners: append(many, platform), Served: served})
	s = out.Status
	require.Len(t, s.PassedOver, MaxFailingNames)
	assert.Equal(t, 25, s.PassedOverCount)
	assert.Equal(t, PassedOwner{Owner: "t/a-tenant", Reason: ReasonDeleting}, s.PassedOver[0])
	assert.Equal(t, PassedOwner{Owner: "t/b-tenant", Reason: ReasonUnserved}, s.PassedOver[1])
	assert.Contains(t, out.Condition.Message, "and 15 more")

	// The last wave done: complete, the names kept; a new revision starts
	// without them, and names them again once its waves reach them.
	last := rolling
	last.Wave = 1
	out = Next(Input{Policy: c, Prev: last, Live: &B, Owners: []Owner{platform, stuck}, Served: served})
	s = out.Status
	assert.Equal(t, PhaseComplete, s.Phase)
	assert.Equal(t, "B", s.Stable)
	assert.Equal(t, 1, s.PassedOverCount)
	assert.Equal(t, metav1.ConditionTrue, out.Condition.Status)
	assert.Equal(t, "revision B rolled out; 1 owner(s) passed over, which nothing can move now: t/tenant (Unserved); each moves to it once it can", out.Condition.Message)
	again := Next(Input{Policy: c, Prev: s, Live: &B, Owners: []Owner{platform, stuck}, Served: served})
	assert.Equal(t, s.PassedOver, again.Status.PassedOver, "a completed roll-out keeps its record")
	C := Revision{Name: "C"}
	next := Next(Input{Policy: c, Prev: s, Live: &C, Owners: []Owner{{Namespace: "ns", Name: "platform", Labels: canary, Revision: "B", Current: true}, stuck}, Served: served})
	assert.Equal(t, "C", next.Status.Target)
	assert.Equal(t, 1, next.Status.PassedOverCount, "the new wave 0 names the tenant again")
	undo := Next(Input{Policy: c, Prev: next.Status, Live: &B, Owners: []Owner{platform, stuck}, Served: served})
	assert.Equal(t, PhaseComplete, undo.Status.Phase)
	assert.Zero(t, undo.Status.PassedOverCount, "an undo ends the roll-out: nothing was passed over for the stable revision")
}
