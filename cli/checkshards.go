package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"kontinue.dev/kontinue/reconciler/api"
)

// Shards (docs/operations.md#sharding): each shard's replicas hold the Lease
// api.ShardLease(id, shard) in the controller's namespace. check reports each
// such Lease, and the owners no live Lease serves: those of a shard whose
// Lease is stale, released or missing, and those whose label is empty or no
// shard name. It asks the API server only for those (a label selector that
// excludes the live shards), and only their metadata: on a healthy cluster
// the answer is empty, however many owners there are.

// shardLease is what check knows of a shard's Lease.
type shardLease struct {
	shard, name, holder string
	renewed             time.Duration
	fresh               bool
}

// findingLevel is how check prints a finding.
type findingLevel int

const (
	findingOK findingLevel = iota
	findingFail
	findingNote
)

type finding struct {
	level findingLevel
	text  string
}

// ownerGVRs are the kinds a shard serves, by the kind check names them with.
var ownerGVRs = []struct {
	kind string
	gvr  schema.GroupVersionResource
}{
	{api.KindWorkload, api.WorkloadGVR},
	{api.KindDeliverable, api.DeliverableGVR},
	{api.KindRunnable, api.RunnableGVR},
}

// maxNamed is how many owners a finding names before "and N more".
const maxNamed = 3

// namedOwners is "N owner(s) (Kind ns/name, ..., and M more)".
func namedOwners(owners []string) string {
	n := fmt.Sprintf("%d owner", len(owners))
	if len(owners) != 1 {
		n += "s"
	}
	shown := owners
	if len(shown) > maxNamed {
		shown = shown[:maxNamed]
	}
	s := n + " (" + strings.Join(shown, ", ")
	if more := len(owners) - len(shown); more > 0 {
		s += fmt.Sprintf(", and %d more", more)
	}
	return s + ")"
}

// shardFindings decides what check says about shards: each shard Lease of
// namespace ns (leases), and the owners no live Lease serves (unserved:
// label value to "Kind namespace/name", sorted; ownersKnown false when
// they could not be listed). A stale or released Lease fails when owners
// are in its shard (or they could not be listed and the Lease still has a
// holder: its replicas died), as the default shard's does: a controller
// is down; without owners it is a shard removed, and only noted. Owners
// whose shard has no Lease, or whose label is empty or no shard name, are
// warned about: no replica serves them, but that is how they are
// labelled (a typo, a shard not deployed yet), not a controller down.
func shardFindings(ns, id string, leases []shardLease, unserved map[string][]string, ownersKnown bool) []finding {
	var out []finding
	leases = append([]shardLease(nil), leases...) // sorted, the caller's left alone
	sort.Slice(leases, func(i, j int) bool { return leases[i].shard < leases[j].shard })
	hasLease := map[string]bool{}
	for _, l := range leases {
		hasLease[l.shard] = true
		where := fmt.Sprintf("shard %s: Lease %s/%s", l.shard, ns, l.name)
		owners := unserved[l.shard]
		var state string
		switch {
		case l.fresh:
			out = append(out, finding{findingOK, fmt.Sprintf("%s held by %s, renewed %s ago", where, l.holder, l.renewed.Round(time.Second))})
			continue
		case l.holder == "":
			state = where + " has no holder"
		default:
			state = fmt.Sprintf("%s held by %s but last renewed %s ago", where, l.holder, l.renewed.Round(time.Second))
		}
		switch {
		case len(owners) > 0:
			out = append(out, finding{findingFail, fmt.Sprintf("%s: no replica serves its %s", state, namedOwners(owners))})
		case !ownersKnown && l.holder != "":
			out = append(out, finding{findingFail, state + ": its replicas are not running"})
		case !ownersKnown:
			out = append(out, finding{findingNote, state + ": its replicas stopped"})
		default:
			out = append(out, finding{findingNote, fmt.Sprintf("%s, and no owner is in the shard (a shard removed? kubectl -n %s delete lease %s)", state, ns, l.name)})
		}
	}
	var values []string
	for v := range unserved {
		if !hasLease[v] {
			values = append(values, v)
		}
	}
	// Shards without a Lease first (by name), then the empty label, then
	// values that are no shard name.
	rank := func(v string) int {
		switch {
		case v == "":
			return 1
		case api.ValidShard(v) != nil:
			return 2
		}
		return 0
	}
	sort.Slice(values, func(i, j int) bool {
		if rank(values[i]) != rank(values[j]) {
			return rank(values[i]) < rank(values[j])
		}
		return values[i] < values[j]
	})
	for _, v := range values {
		owners := unserved[v]
		switch {
		case v == "":
			out = append(out, finding{findingNote, fmt.Sprintf("%s is empty, which no replica serves: %s; remove the label or name a shard",
				api.ShardLabel, namedOwners(owners))})
		case api.ValidShard(v) != nil:
			out = append(out, finding{findingNote, fmt.Sprintf("%s=%s is no shard name (a DNS label), which no replica serves: %s",
				api.ShardLabel, v, namedOwners(owners))})
		default:
			out = append(out, finding{findingNote, fmt.Sprintf("shard %s: no Lease %s/%s: no replica serves its %s", v, ns, api.ShardLease(id, v), namedOwners(owners))})
		}
	}
	return out
}

// unservedSelector selects the owners no live shard serves: labelled, and
// not with the name of a shard whose Lease is fresh.
func unservedSelector(live []string) (string, error) {
	exists, err := labels.NewRequirement(api.ShardLabel, selection.Exists, nil)
	if err != nil {
		return "", err
	}
	sel := labels.NewSelector().Add(*exists)
	if len(live) > 0 {
		notIn, err := labels.NewRequirement(api.ShardLabel, selection.NotIn, live)
		if err != nil {
			return "", err
		}
		sel = sel.Add(*notIn)
	}
	return sel.String(), nil
}

// shardLeases lists the shard Leases of ns (the default shard's is not
// one); forbidden reports that the user may not list Leases there.
func shardLeases(ctx context.Context, dyn dynamic.Interface, ns, id string, now time.Time) (leases []shardLease, forbidden bool, err error) {
	l, err := dyn.Resource(leaseGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	for i := range l.Items {
		if sl, ok := leaseOf(&l.Items[i], id, now); ok {
			leases = append(leases, sl)
		}
	}
	return leases, false, nil
}

// unservedOwners lists, across namespaces, the metadata of the owners the
// selector picks, by label value; the error is the first list that failed.
func unservedOwners(ctx context.Context, md metadata.Interface, selector string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, k := range ownerGVRs {
		opts := metav1.ListOptions{LabelSelector: selector, Limit: 500}
		for {
			l, err := md.Resource(k.gvr).List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", k.gvr.Resource, err)
			}
			for _, o := range l.Items {
				v := o.GetLabels()[api.ShardLabel]
				out[v] = append(out[v], k.kind+" "+o.GetNamespace()+"/"+o.GetName())
			}
			if opts.Continue = l.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	for v := range out {
		sort.Strings(out[v])
	}
	return out, nil
}

// anyUnlabelled names an owner without the shard label ("" when there is
// none): one item asked of each kind.
func anyUnlabelled(ctx context.Context, md metadata.Interface) (string, error) {
	for _, k := range ownerGVRs {
		l, err := md.Resource(k.gvr).List(ctx, metav1.ListOptions{LabelSelector: api.ShardSelector(""), Limit: 1})
		if err != nil {
			return "", fmt.Errorf("list %s: %w", k.gvr.Resource, err)
		}
		if len(l.Items) > 0 {
			return k.kind + " " + l.Items[0].GetNamespace() + "/" + l.Items[0].GetName(), nil
		}
	}
	return "", nil
}

// checkShards prints the shards section when there is anything sharded to
// report: shard Leases in ns, or owners no live Lease serves.
func checkShards(ctx context.Context, c *checker, md metadata.Interface, ns, id string, leases []shardLease) {
	var live []string
	for _, l := range leases {
		if l.fresh {
			live = append(live, l.shard)
		}
	}
	var unserved map[string][]string
	sel, err := unservedSelector(live)
	if err == nil {
		unserved, err = unservedOwners(ctx, md, sel)
	}
	if len(leases) == 0 && len(unserved) == 0 {
		return // not sharded (or nothing to say: owners could not be listed)
	}
	c.section("shards")
	if err != nil {
		c.note("cannot list the owners of each shard (%v): which owners no replica serves is not known", err)
	}
	if len(leases) == 0 && len(unserved) > 0 {
		c.note("no shard Lease (%s) in %s: if the shards run in another namespace, give --controller-namespace", api.ShardLease(id, "NAME"), ns)
	}
	for _, f := range shardFindings(ns, id, leases, unserved, err == nil) {
		switch f.level {
		case findingOK:
			c.ok("%s", f.text)
		case findingFail:
			c.fail("%s", f.text)
		default:
			c.note("%s", f.text)
		}
	}
}

// defaultShardAbsent checks a sharded install without the default shard (no
// Lease id and no Deployment kontinue in ns, shards' Leases there): that is
// a problem only if an owner lacks the label. False when the Deployment
// kontinue exists: the default shard is then checked as without shards.
func defaultShardAbsent(ctx context.Context, c *checker, dyn dynamic.Interface, md metadata.Interface, ns, id string) bool {
	if _, err := dyn.Resource(deploymentGVR).Namespace(ns).Get(ctx, "kontinue", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return false
	}
	who, err := anyUnlabelled(ctx, md)
	switch {
	case err != nil:
		c.note("no Lease %s/%s: no replica serves the owners without the %s label, and whether there are any cannot be told (%v)", ns, id, api.ShardLabel, err)
	case who != "":
		c.fail("no Lease %s/%s: no replica serves the owners without the %s label, such as %s", ns, id, api.ShardLabel, who)
	default:
		c.ok("no Lease %s/%s (no default shard), and no owner is without the %s label", ns, id, api.ShardLabel)
	}
	return true
}

// leaseOf is a shard's Lease (false for another Lease, the default
// shard's included).
func leaseOf(u *unstructured.Unstructured, id string, now time.Time) (shardLease, bool) {
	shard, ok := api.LeaseShard(id, u.GetName())
	if !ok || shard == "" {
		return shardLease{}, false
	}
	holder, renewed, fresh := leaseState(u, now)
	return shardLease{shard: shard, name: u.GetName(), holder: holder, renewed: renewed, fresh: fresh}, true
}
