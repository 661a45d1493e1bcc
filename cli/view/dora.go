package view

// DORA: the four numbers of some owners, per namespace and chain, as
// `kontinue dora` prints them and the dashboard's chain page shows them
// (docs/dora.md). The reads are the caller's (DoraReads): the CLI reads
// with the user's identity, the dashboard with its own.

import (
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/dora"
	"kontinue.dev/kontinue/reconciler/history"
)

// KindDORA is the data model kind of `kontinue dora -o json`.
const KindDORA = "DORA"

// DoraOutput is what `kontinue dora -o json` prints and the dashboard's
// api/dora answers.
type DoraOutput struct {
	Kind  string    `json:"kind"` // DORA
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Rows  []DoraRow `json:"rows"`
	Notes []string  `json:"notes,omitempty"`
}

// DoraRow is one chain's numbers in one namespace; times in seconds.
type DoraRow struct {
	Namespace string `json:"namespace"`
	Chain     string `json:"chain"`
	Owners    int    `json:"owners"`
	// Deployments succeeded, and failed (shadowed: a shadow served).
	Deployments       int     `json:"deployments"`
	Failed            int     `json:"failed"`
	Shadowed          int     `json:"shadowed"`
	PerDay            float64 `json:"deploymentsPerDay"`
	LeadTimes         int     `json:"leadTimes"`
	LeadTimeMedian    float64 `json:"leadTimeMedianSeconds"`
	LeadTimeMean      float64 `json:"leadTimeMeanSeconds"`
	ChangeFailureRate float64 `json:"changeFailureRate"`
	Restores          int     `json:"restores"`
	RestoreMedian     float64 `json:"timeToRestoreMedianSeconds"`
	RestoreMean       float64 `json:"timeToRestoreMeanSeconds"`
}

// DoraReads are the reads DORA needs besides the owners.
type DoraReads struct {
	// History is an owner's history ConfigMap (empty when there is none).
	History func(kind, namespace, name string) (history.History, error)
	// DeploymentSteps is a chain's spec.deploymentSteps (nil: unreadable,
	// the default steps then); chainKind is ClusterSupplyChain or
	// ClusterDelivery.
	DeploymentSteps func(chainKind, name string) []string
}

// DORA sums up the deployments of owners (Workloads and Deliverables as
// the API server returned them) that ended in [from, to], per namespace
// and chain; chain, when not empty, keeps only that chain's owners.
func DORA(owners []*unstructured.Unstructured, chain string, from, to time.Time, r DoraReads) DoraOutput {
	out := DoraOutput{Kind: KindDORA, From: from.UTC(), To: to.UTC()}
	type key struct{ ns, chain string }
	deps := map[key][]dora.Deployment{}
	count := map[key]int{}
	overrides := map[string][]string{}
	for _, u := range owners {
		owner, err := DecodeTraceOwner(u)
		if err != nil {
			out.Notes = append(out.Notes, fmt.Sprintf("%s %s/%s: unreadable status: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err))
			continue
		}
		name, chainKind := "", api.KindClusterSupplyChain
		if ref := owner.Status.SupplyChainRef; ref != nil {
			name = ref.Name
		} else if ref := owner.Status.DeliveryRef; ref != nil {
			name, chainKind = ref.Name, api.KindClusterDelivery
		}
		if chain != "" && name != chain {
			continue
		}
		over, ok := overrides[chainKind+"/"+name]
		if !ok && name != "" {
			over = r.DeploymentSteps(chainKind, name)
			overrides[chainKind+"/"+name] = over
		}
		h, err := r.History(u.GetKind(), u.GetNamespace(), u.GetName())
		switch {
		case apierrors.IsForbidden(err):
			out.Notes = append(out.Notes, fmt.Sprintf("you may not read ConfigMap %s/%s: only the revisions the status shows", u.GetNamespace(), history.Name(u.GetKind(), u.GetName())))
		case err != nil && !apierrors.IsNotFound(err):
			out.Notes = append(out.Notes, fmt.Sprintf("ConfigMap %s/%s: %v: only the revisions the status shows", u.GetNamespace(), history.Name(u.GetKind(), u.GetName()), err))
		}
		k := key{u.GetNamespace(), name}
		count[k]++
		steps := dora.StepsOf(owner.Status.Resources, over)
		deps[k] = append(deps[k], dora.FromHistory(history.View(h, owner.Status.Resources, 0), steps)...)
	}
	for k, d := range deps {
		n := dora.Summarize(d, from, to)
		out.Rows = append(out.Rows, DoraRow{Namespace: k.ns, Chain: k.chain, Owners: count[k], Deployments: n.Deployments, Failed: n.Failed,
			Shadowed: n.Shadowed, PerDay: n.PerDay, LeadTimes: n.LeadTimes, LeadTimeMedian: n.LeadTimeMedian.Seconds(),
			LeadTimeMean: n.LeadTimeMean.Seconds(), ChangeFailureRate: n.ChangeFailureRate, Restores: n.Restores,
			RestoreMedian: n.TimeToRestoreMedian.Seconds(), RestoreMean: n.TimeToRestoreMean.Seconds()})
	}
	sort.Slice(out.Rows, func(i, j int) bool {
		if out.Rows[i].Namespace != out.Rows[j].Namespace {
			return out.Rows[i].Namespace < out.Rows[j].Namespace
		}
		return out.Rows[i].Chain < out.Rows[j].Chain
	})
	if out.Rows == nil {
		out.Rows = []DoraRow{}
	}
	return out
}
