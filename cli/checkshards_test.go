package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"kontinue.dev/kontinue/reconciler/rollout"
)

func TestShardFindings(t *testing.T) {
	fresh := func(shard string) shardLease {
		return shardLease{shard: shard, name: "kontinue-leader-shard-" + shard, holder: shard + "-pod_1", renewed: 2 * time.Second, fresh: true}
	}
	stale := func(shard string) shardLease {
		return shardLease{shard: shard, name: "kontinue-leader-shard-" + shard, holder: shard + "-pod_1", renewed: 10 * time.Minute}
	}
	released := func(shard string) shardLease {
		return shardLease{shard: shard, name: "kontinue-leader-shard-" + shard}
	}
	levels := func(fs []finding) []findingLevel {
		var out []findingLevel
		for _, f := range fs {
			out = append(out, f.level)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		leases   []shardLease
		unserved map[string][]string
		known    bool
		want     []findingLevel
		contains []string // in the findings, in order
	}{
		{"live shards, every owner served", []shardLease{fresh("b"), fresh("a")}, nil, true,
			[]findingLevel{findingOK, findingOK}, []string{"shard a: Lease ns/kontinue-leader-shard-a held by a-pod_1, renewed 2s ago", "shard b:"}},
		{"a stale shard with owners", []shardLease{stale("a")}, map[string][]string{"a": {"Workload dev/x"}}, true,
			[]findingLevel{findingFail}, []string{"shard a: Lease ns/kontinue-leader-shard-a held by a-pod_1 but last renewed 10m0s ago: no replica serves its 1 owner (Workload dev/x)"}},
		{"a released shard with owners", []shardLease{released("a")}, map[string][]string{"a": {"Workload dev/x", "Workload dev/y"}}, true,
			[]findingLevel{findingFail}, []string{"has no holder: no replica serves its 2 owners (Workload dev/x, Workload dev/y)"}},
		{"a released shard without owners: removed", []shardLease{released("old")}, map[string][]string{}, true,
			[]findingLevel{findingNote}, []string{"has no holder, and no owner is in the shard (a shard removed? kubectl -n ns delete lease kontinue-leader-shard-old)"}},
		{"a stale shard without owners: removed while its leader hung", []shardLease{stale("old")}, nil, true,
			[]findingLevel{findingNote}, []string{"and no owner is in the shard"}},
		{"owners unknown, stale holder: its replicas died", []shardLease{stale("a")}, nil, false,
			[]findingLevel{findingFail}, []string{"its replicas are not running"}},
		{"owners unknown, released", []shardLease{released("a")}, nil, false,
			[]findingLevel{findingNote}, []string{"its replicas stopped"}},
		{"owners of a shard without a Lease", []shardLease{fresh("a")}, map[string][]string{"c": {"Runnable dev/r", "Workload dev/w"}}, true,
			[]findingLevel{findingOK, findingNote}, []string{"shard a:", "shard c: no Lease ns/kontinue-leader-shard-c: no replica serves its 2 owners (Runnable dev/r, Workload dev/w)"}},
		{"empty and invalid labels", nil, map[string][]string{"": {"Workload dev/e"}, "Bad_Name": {"Deliverable prod/d"}}, true,
			[]findingLevel{findingNote, findingNote}, []string{"kontinue.dev/shard is empty, which no replica serves: 1 owner (Workload dev/e); remove the label or name a shard",
				"kontinue.dev/shard=Bad_Name is no shard name (a DNS label), which no replica serves: 1 owner (Deliverable prod/d)"}},
		{"many owners are counted, a few named", nil, map[string][]string{"c": {"Workload a/1", "Workload a/2", "Workload a/3", "Workload a/4", "Workload a/5"}}, true,
			[]findingLevel{findingNote}, []string{"5 owners (Workload a/1, Workload a/2, Workload a/3, and 2 more)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := shardFindings("ns", "kontinue-leader", tc.leases, tc.unserved, tc.known)
			require.Equal(t, tc.want, levels(fs))
			var all []string
			for _, f := range fs {
				all = append(all, f.text)
			}
			text := strings.Join(all, "\n")
			at := 0
			for _, s := range tc.contains {
				i := strings.Index(text[at:], s)
				require.GreaterOrEqual(t, i, 0, "%q after offset %d in:\n%s", s, at, text)
				at += i + len(s)
			}
		})
	}
}

// TestShardFindingsGolden: what `kontinue check` prints about shards.
func TestShardFindingsGolden(t *testing.T) {
	var buf bytes.Buffer
	c := &checker{w: &buf}
	c.section("shards")
	for _, f := range shardFindings("kontinue-system", "kontinue-leader", []shardLease{
		{shard: "a", name: "kontinue-leader-shard-a", holder: "kontinue-shard-a-7d9f-x2x_3c1a", renewed: 2 * time.Second, fresh: true},
		{shard: "b", name: "kontinue-leader-shard-b", holder: "kontinue-shard-b-5c4b-q8r_77e0", renewed: 10*time.Minute + 3*time.Second},
		{shard: "old", name: "kontinue-leader-shard-old"},
	}, map[string][]string{
		"b":    {"Runnable dev/tests", "Workload dev/api", "Workload dev/web"},
		"c":    {"Workload dev/legacy"},
		"":     {"Workload dev/blank"},
		"Blue": {"Deliverable prod/site"},
	}, true) {
		switch f.level {
		case findingOK:
			c.ok("%s", f.text)
		case findingFail:
			c.fail("%s", f.text)
		default:
			c.note("%s", f.text)
		}
	}
	golden(t, "check/shards.txt", buf.String())
}

func TestUnservedSelector(t *testing.T) {
	for _, tc := range []struct {
		live     []string
		selects  []map[string]string
		excludes []map[string]string
	}{
		{nil, []map[string]string{{"kontinue.dev/shard": "a"}, {"kontinue.dev/shard": ""}}, []map[string]string{{}, {"app": "x"}}},
		{[]string{"a", "b"}, []map[string]string{{"kontinue.dev/shard": "c"}, {"kontinue.dev/shard": ""}, {"kontinue.dev/shard": "Bad_Name"}},
			[]map[string]string{{}, {"kontinue.dev/shard": "a"}, {"kontinue.dev/shard": "b"}}},
	} {
		s, err := unservedSelector(tc.live)
		require.NoError(t, err)
		sel, err := labels.Parse(s) // as the API server reads it
		require.NoError(t, err, s)
		for _, l := range tc.selects {
			require.True(t, sel.Matches(labels.Set(l)), "%s selects %v", s, l)
		}
		for _, l := range tc.excludes {
			require.False(t, sel.Matches(labels.Set(l)), "%s excludes %v", s, l)
		}
	}
}

func TestLeaseOf(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lease := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"holderIdentity": "p_1", "renewTime": "2026-03-01T11:59:58.000000Z", "leaseDurationSeconds": int64(15)}}}
		u.SetName(name)
		return u
	}
	l, ok := leaseOf(lease("kontinue-leader-shard-a"), "kontinue-leader", now)
	require.True(t, ok)
	require.Equal(t, shardLease{shard: "a", name: "kontinue-leader-shard-a", holder: "p_1", renewed: 2 * time.Second, fresh: true}, l)
	for _, name := range []string{"kontinue-leader", "other-shard-a", "kontinue-leader-shard-"} {
		_, ok := leaseOf(lease(name), "kontinue-leader", now)
		require.False(t, ok, name)
	}
}

// TestRolloutFindings: `kontinue check` names the owners a chain's
// roll-out passed over (a few, and how many), chain by chain; a chain
// whose roll-out passed over none says nothing.
func TestRolloutFindings(t *testing.T) {
	ownerKind := func(k string) string {
		if k == "ClusterDelivery" {
			return "Deliverable"
		}
		return "Workload"
	}
	fs := rolloutFindings([]rolloutPassed{
		{kind: "ClusterDelivery", name: "prod", revision: "bbb", passed: []rollout.PassedOwner{{Owner: "dev/gone", Reason: rollout.ReasonDeleting}}, count: 3},
		{kind: "ClusterSupplyChain", name: "web", revision: "aaa", passed: []rollout.PassedOwner{{Owner: "t/tenant", Reason: rollout.ReasonUnserved}}, count: 1},
		{kind: "ClusterSupplyChain", name: "api", revision: "ccc"},
	}, ownerKind)
	var buf bytes.Buffer
	c := &checker{w: &buf}
	c.section("roll-outs")
	for _, f := range fs {
		require.Equal(t, findingNote, f.level)
		c.note("%s", f.text)
	}
	require.Equal(t, `► roll-outs
! ClusterSupplyChain web: its roll-out of revision aaa passed over 1 owner(s) that nothing moves to it (Workload t/tenant: Unserved); each moves once it can
! ClusterDelivery prod: its roll-out of revision bbb passed over 3 owner(s) that nothing moves to it (Deliverable dev/gone: Deleting, and 2 more); each moves once it can
`, buf.String())
}
