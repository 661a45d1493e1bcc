package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
)

// Roll-outs (docs/rollouts.md): a wave does not wait for an owner nothing
// moves (its shard served by no running replica, being deleted, no chain
// rendering it), and the chain's status names those (status.rollout.
// passedOver). check reports them, a chain at a time: one LIST per chain
// kind, nothing per owner.

// rolloutPassed is what check knows of one chain's roll-out.
type rolloutPassed struct {
	kind, name, revision string // revision: the target, or the stable one it completed
	passed               []rollout.PassedOwner
	count                int
}

// rolloutFindings are the chains whose roll-out passes over owners, by
// kind and name: warned about (the owners' own state, their labels or a
// shard not running, holds them back; the roll-out goes on).
func rolloutFindings(chains []rolloutPassed, ownerKind func(chainKind string) string) []finding {
	chains = append([]rolloutPassed(nil), chains...)
	sort.Slice(chains, func(i, j int) bool {
		if chains[i].kind != chains[j].kind {
			return chains[i].kind > chains[j].kind // ClusterSupplyChain first
		}
		return chains[i].name < chains[j].name
	})
	var out []finding
	for _, c := range chains {
		if c.count == 0 {
			continue
		}
		named := make([]string, 0, len(c.passed))
		for _, p := range c.passed {
			named = append(named, fmt.Sprintf("%s %s: %s", ownerKind(c.kind), p.Owner, p.Reason))
		}
		if more := c.count - len(c.passed); more > 0 {
			named = append(named, fmt.Sprintf("and %d more", more))
		}
		out = append(out, finding{findingNote, fmt.Sprintf("%s %s: its roll-out of revision %s passed over %d owner(s) that nothing moves to it (%s); each moves once it can",
			c.kind, c.name, c.revision, c.count, strings.Join(named, ", "))})
	}
	return out
}

// checkRollouts prints the roll-outs section when a chain's roll-out
// passed over owners.
func checkRollouts(ctx context.Context, c *checker, dyn dynamic.Interface) {
	var chains []rolloutPassed
	var failed []string
	for _, f := range []*api.Flavor{api.WorkloadFlavor, api.DeliverableFlavor} {
		l, err := dyn.Resource(f.ChainGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", f.ChainGVR.Resource, err))
			continue
		}
		for i := range l.Items {
			if p, ok := passedOf(f.ChainKind, &l.Items[i]); ok {
				chains = append(chains, p)
			}
		}
	}
	fs := rolloutFindings(chains, func(kind string) string {
		if kind == api.KindClusterDelivery {
			return api.KindDeliverable
		}
		return api.KindWorkload
	})
	if len(fs) == 0 && len(failed) == 0 {
		return
	}
	c.section("roll-outs")
	for _, e := range failed {
		c.note("cannot list the chains, so which owners their roll-outs pass over is not known (%s)", e)
	}
	for _, f := range fs {
		c.note("%s", f.text)
	}
}

// passedOf reads a chain's status.rollout (false: no policy).
func passedOf(kind string, u *unstructured.Unstructured) (rolloutPassed, bool) {
	policy, st, err := rollout.Read(u.Object)
	if err != nil || policy == nil {
		return rolloutPassed{}, false
	}
	rev := st.Target
	if rev == "" {
		rev = st.Stable
	}
	return rolloutPassed{kind: kind, name: u.GetName(), revision: rev, passed: st.PassedOver, count: st.PassedOverCount}, true
}
