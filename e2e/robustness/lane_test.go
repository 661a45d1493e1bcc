package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// The lane: ops added after the first fixed seeds were chosen, drawn from
// a source of their own (generator.x), on owners of their own (Workloads
// run-<n> on the runs chain, which no other op picks), so that every op a
// seed made before is still there, at the same time. A seed's run gains
// the lane's ops and the load they bring, nothing else.
//
// The runs chain has a runnable: true step (design document 000):
// Kontinue generates a cluster-scoped ClusterRunTemplate for each owner,
// which cannot carry an owner reference, and a Runnable. The platform team
// pins one by copying it, labels and annotations included, under its own
// name, for a hand-written Runnable: labels prove nothing, so Kontinue
// must never write or delete the copy, also when the owner its labels name
// is deleted (issue 29, item 1; invariant 1 judges every write and delete
// of it). The owners are deleted at the end of every run.
//
// A storm: a tenant makes, at once, as many Workloads whose goTemplate
// loops without end, writing nothing, as Kontinue has render slots (chain
// hogs).
// The lane's owners and Runnables write as the account default, which the
// other ops never delete (they revoke its grant now and then): an owner
// whose account is gone renders nothing, and a storm would be no storm.
type lane struct {
	runs    map[string]map[string]int // tenant → live run owner → its commits
	pins    int
	commits int
	stormed map[string]bool // tenants that made their hogs
}

// hogs is how many goTemplates that never end a storm makes: Kontinue's
// render slots (render.limits.running).
const hogs = 4

// commit is a commit of the lane's own ("rc<n>": the other ops' count
// stays theirs).
func (l *lane) commit() string {
	l.commits++
	return "rc" + strconv.Itoa(l.commits)
}

// laneOp adds, now and then, one op of the lane.
func (g *generator) laneOp() {
	if g.noLane || g.x.IntN(10) != 0 {
		return
	}
	t := tenants[g.x.IntN(len(tenants))]
	owners := g.lane.runs[t]
	if owners == nil {
		owners = map[string]int{}
		g.lane.runs[t] = owners
	}
	names := make([]string, 0, len(owners))
	for i := 1; i <= 2; i++ {
		if _, ok := owners["run-"+strconv.Itoa(i)]; ok {
			names = append(names, "run-"+strconv.Itoa(i))
		}
	}
	do := "create"
	if len(names) > 0 {
		do = g.xweighted("commit", 5, "pin", 3, "edit", 1, "create", 1, "storm", 2)
	}
	if do == "storm" && (g.lane.stormed[t] || g.now > g.end-20*time.Second) {
		do = "commit"
	}
	if do == "create" && len(names) == 2 {
		do = "commit"
	}
	person := func(o Op) {
		o.At, o.Actor, o.Tenant, o.Kind = g.now, "person-"+t, t, "Workload"
		g.add(o)
	}
	switch do {
	case "create":
		n := "run-" + strconv.Itoa(len(names)+1)
		owners[n] = 0
		person(Op{Do: "create", Name: n, Args: map[string]string{"chain": "runs", "sa": "default", "params": "[]", "labels": "{}",
			"commit": g.lane.commit()}})
	case "commit":
		n := names[g.x.IntN(len(names))]
		owners[n]++
		person(Op{Do: "commit", Name: n, Args: map[string]string{"commit": g.lane.commit()}})
	case "pin":
		g.lane.pins++
		g.add(Op{At: g.now, Actor: "platform", Do: "pin", Tenant: t, Kind: "Workload", Name: names[g.x.IntN(len(names))],
			Args: map[string]string{"pin": strconv.Itoa(g.lane.pins)}})
	case "storm":
		// A hostile tenant: as many goTemplates that never end as there
		// are render slots, in its own namespace (issue 29, item 3). Each
		// render may hold a slot until its deadline, and one namespace at
		// most its share of the slots: every other tenant's templates
		// still render (invariant 7, the canary's cfinal).
		g.lane.stormed[t] = true
		for i := 1; i <= hogs; i++ {
			person(Op{Do: "create", Name: "hog-" + strconv.Itoa(i), Args: map[string]string{"chain": "hogs", "sa": "default",
				"params": `[{"name":"loops","value":20000}]`, "labels": "{}", "commit": g.lane.commit()}})
		}
	case "edit":
		g.edition["run"]++
		g.add(Op{At: g.now, Actor: "platform", Do: "edit", Kind: "template", Name: "run",
			Args: map[string]string{"edition": strconv.Itoa(1 + g.edition["run"])}})
	}
}

// endStorms: a tenant's storm ends with the traffic (its hogs deleted at
// the traffic's last moment). The final checks judge a cluster at rest:
// hogs re-render their endless templates each time their timeout is
// forgotten, and would keep their namespace's render slots taken through
// the settle time and the quiet window, where every reconcile of the
// tenant's other owners is judged as a write with nothing changed (seed
// 304). Drawn from no source: the other ops stay as they were.
func (l *lane) endStorms(g *generator) {
	at := g.end - time.Millisecond
	for _, t := range tenants {
		if !l.stormed[t] {
			continue
		}
		for i := 1; i <= hogs; i++ {
			g.add(Op{At: at, Actor: "person-" + t, Do: "delete", Tenant: t, Kind: "Workload", Name: "hog-" + strconv.Itoa(i)})
		}
	}
}

// xweighted is weighted on the lane's source.
func (g *generator) xweighted(choices ...any) string {
	total := 0
	for i := 1; i < len(choices); i += 2 {
		total += choices[i].(int)
	}
	n := g.x.IntN(total)
	for i := 0; i < len(choices); i += 2 {
		n -= choices[i+1].(int)
		if n < 0 {
			return choices[i].(string)
		}
	}
	return choices[0].(string)
}

// pinName is the platform's copy of a generated ClusterRunTemplate.
func (r *run) pinName(o Op) string { return r.prefix + "-pin-" + o.Tenant + "-" + o.Args["pin"] }

// pin: the platform team copies the ClusterRunTemplate Kontinue generated
// for the owner's run step, found by its labels as a person would, with
// its labels and annotations, under a name of its own, and runs a
// hand-written Runnable on the copy with the inputs of the owner's
// Runnable (its commit changed).
func (r *run) pin(ctx context.Context, o Op) error {
	a, ns := r.actor(o), r.ns(o)
	sel := url.QueryEscape("carto.run/workload-name=" + o.Name + ",carto.run/workload-namespace=" + ns + ",carto.run/resource-name=run")
	body, err := a.do(ctx, http.MethodGet, resourcePath("ClusterRunTemplate", "")+"?labelSelector="+sel, "", nil)
	if err != nil {
		return err
	}
	var gen gjson.Result
	gjson.GetBytes(body, "items").ForEach(func(_, item gjson.Result) bool {
		if !strings.HasPrefix(item.Get("metadata.name").String(), r.prefix+"-pin-") { // not an earlier copy
			gen = item
			return false
		}
		return true
	})
	if !gen.Exists() {
		return fmt.Errorf("no generated ClusterRunTemplate for Workload %s/%s yet", ns, o.Name)
	}
	meta := map[string]any{"name": r.pinName(o)}
	for _, f := range []string{"labels", "annotations"} {
		if v := gen.Get("metadata." + f); v.Exists() {
			meta[f] = json.RawMessage(v.Raw)
		}
	}
	cp, err := json.Marshal(map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "ClusterRunTemplate", "metadata": meta,
		"spec": json.RawMessage(gen.Get("spec").Raw)})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.pins = append(r.pins, r.pinName(o))
	r.mu.Unlock()
	if _, err := a.do(ctx, http.MethodPost, resourcePath("ClusterRunTemplate", ""), "application/json", cp); err != nil {
		return err
	}
	rn, err := a.do(ctx, http.MethodGet, objectPath("Runnable", ns, o.Name+"-run"), "", nil)
	if err != nil {
		return fmt.Errorf("the owner's Runnable: %w", err)
	}
	inputs := map[string]any{}
	if err := json.Unmarshal([]byte(gjson.GetBytes(rn, "spec.inputs").Raw), &inputs); err != nil {
		return fmt.Errorf("the owner's Runnable's inputs: %w", err)
	}
	inputs["workload.spec.source.git.ref.commit"] = "pin-" + o.Args["pin"]
	pinned, err := json.Marshal(map[string]any{"apiVersion": "carto.run/v1alpha1", "kind": "Runnable",
		"metadata": map[string]any{"name": "pin-" + o.Args["pin"]},
		"spec": map[string]any{"serviceAccountName": "default", "inputs": inputs,
			"runTemplateRef": map[string]any{"kind": "ClusterRunTemplate", "name": r.pinName(o)}}})
	if err != nil {
		return err
	}
	_, err = a.do(ctx, http.MethodPost, resourcePath("Runnable", ns), "application/json", pinned)
	return err
}

// deletePins deletes the platform's copies (teardown).
func (r *run) deletePins(ctx context.Context) {
	r.mu.Lock()
	pins := append([]string(nil), r.pins...)
	r.mu.Unlock()
	for _, n := range pins {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _ = r.api.do(ctx, http.MethodDelete, objectPath("ClusterRunTemplate", "", n), "", nil)
		cancel()
	}
}
