package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kontinue.dev/kontinue/cli"
)

// TestCLICheckShards: `kontinue check` reports each shard's Lease in the
// controller's namespace (live, stale, released) and the owners no live
// Lease serves, asking the API server once per owner kind for only those:
// a dead shard's fail (its controller is down), those of a shard without a
// Lease, with an empty label or a value that is no shard name are warned
// about. Shard names are the test's own: owners of other tests' shards
// may be listed too, so lines are matched by name.
func TestCLICheckShards(t *testing.T) {
	ns := newNamespace(t)
	sfx := strings.TrimPrefix(ns, "e2e-")
	live, dead, gone, nolease := "live-"+sfx, "dead-"+sfx, "gone-"+sfx, "nolease-"+sfx
	bad := "Bad_" + sfx
	lease := func(name, holder string, renewed time.Time) {
		apply(t, ns, fmt.Sprintf(`
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: %s}
spec: {holderIdentity: %q, leaseDurationSeconds: 15, renewTime: %q}
`, name, holder, renewed.UTC().Format("2006-01-02T15:04:05.000000Z")))
	}
	lease("check-leader", "kontinue-abc_123", time.Now())
	lease("check-leader-shard-"+live, "live-pod_1", time.Now())
	lease("check-leader-shard-"+dead, "dead-pod_1", time.Now().Add(-10*time.Minute))
	lease("check-leader-shard-"+gone, "", time.Now().Add(-time.Hour))
	owner := func(kind, name, shard string) {
		spec := "{}"
		if kind == "Runnable" {
			spec = "{runTemplateRef: {name: none}}"
		}
		apply(t, ns, fmt.Sprintf("{apiVersion: carto.run/v1alpha1, kind: %s, metadata: {name: %s, labels: {%s: %q}}, spec: %s}", kind, name, shardLabel, shard, spec))
	}
	owner("Workload", "w-live", live)
	owner("Workload", "w-dead", dead)
	owner("Runnable", "r-dead", dead)
	owner("Workload", "w-nolease", nolease)
	owner("Workload", "w-empty", "")
	owner("Deliverable", "d-bad", bad)

	// check runs `kontinue check` and returns, by owner kind, the label
	// selector and Accept header of each LIST of owners.
	check := func(id string) (int, string, map[string][]string) {
		var mu sync.Mutex
		lists := map[string][]string{}
		wrap := func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				if res, ok := strings.CutPrefix(r.URL.Path, "/apis/carto.run/v1alpha1/"); ok && r.Method == http.MethodGet {
					mu.Lock()
					lists[res] = append(lists[res], r.URL.Query().Get("labelSelector")+" "+r.Header.Get("Accept"))
					mu.Unlock()
				}
				return rt.RoundTrip(r)
			})
		}
		var out, errb bytes.Buffer
		code := cli.New(cli.Env{Stdout: &out, Stderr: &errb, WrapTransport: wrap}).Execute(context.Background(),
			[]string{"check", "--controller-namespace", ns, "--leader-election-id", id, "--kubeconfig", env.kubeconfig})
		return code, out.String(), lists
	}
	line := func(out, part string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, part) {
				return l
			}
		}
		t.Fatalf("no line with %q in:\n%s", part, out)
		return ""
	}
	code, out, reqs := check("check-leader")
	require.Equal(t, 1, code, "the dead shard fails:\n%s", out)
	require.Contains(t, out, "✔ Lease "+ns+"/check-leader held by kontinue-abc_123, renewed ")
	require.Contains(t, out, "► shards\n")
	require.Contains(t, out, "✔ shard "+live+": Lease "+ns+"/check-leader-shard-"+live+" held by live-pod_1, renewed ")
	require.Contains(t, out, "✗ shard "+dead+": Lease "+ns+"/check-leader-shard-"+dead+" held by dead-pod_1 but last renewed 10m")
	require.Contains(t, out, "no replica serves its 2 owners (Runnable "+ns+"/r-dead, Workload "+ns+"/w-dead)\n")
	require.Contains(t, out, "! shard "+gone+": Lease "+ns+"/check-leader-shard-"+gone+" has no holder, and no owner is in the shard")
	require.Contains(t, out, "! shard "+nolease+": no Lease "+ns+"/check-leader-shard-"+nolease+": no replica serves its 1 owner (Workload "+ns+"/w-nolease)\n")
	require.Contains(t, line(out, "kontinue.dev/shard is empty"), "Workload "+ns+"/w-empty")
	require.True(t, strings.HasPrefix(line(out, "kontinue.dev/shard is empty"), "! "))
	require.Contains(t, out, "! kontinue.dev/shard="+bad+" is no shard name (a DNS label), which no replica serves: 1 owner (Deliverable "+ns+"/d-bad)\n")
	require.NotContains(t, out, "w-live", "served by a live Lease")
	for _, r := range []string{"workloads", "deliverables", "runnables"} {
		require.Len(t, reqs[r], 1, "one LIST of %s: %v", r, reqs)
		require.True(t, strings.HasPrefix(reqs[r][0], "kontinue.dev/shard,kontinue.dev/shard notin ("+live+") "), "of the owners of no live shard only: %s", reqs[r][0])
		require.Contains(t, reqs[r][0], "as=PartialObjectMetadataList", "their metadata only")
	}

	// The dead shard's leader renews: mislabelled owners are warned
	// about, they fail nothing (other tests' owners may be listed too).
	lease("check-leader-shard-"+dead, "dead-pod_2", time.Now())
	code, out, _ = check("check-leader")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "✔ shard "+dead+": Lease "+ns+"/check-leader-shard-"+dead+" held by dead-pod_2, renewed ")
	require.NotContains(t, out, "w-dead")
	require.Contains(t, out, "(Workload "+ns+"/w-nolease)")

	// No default shard (the chart's sharding.defaultShard: false): no Lease
	// and no Deployment kontinue, while owners without the label exist.
	apply(t, ns, `{apiVersion: carto.run/v1alpha1, kind: Workload, metadata: {name: w-unlabelled}, spec: {}}`)
	lease("nodefault-shard-"+live, "live-pod_1", time.Now())
	code, out, _ = check("nodefault")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "✗ no Lease "+ns+"/nodefault: no replica serves the owners without the kontinue.dev/shard label, such as ")
	require.NotContains(t, out, "no Deployment kontinue", "a sharded install without the default shard has none")
	require.Contains(t, out, "✔ shard "+live+": Lease "+ns+"/nodefault-shard-"+live+" held by live-pod_1")
}
