package robustness

import (
	"sort"
	"strconv"
	"time"
)

// The verified chain's traffic (issue 49, verify before use), in the lane:
// drawn from a source of its own (generator.v), on owners of its own
// (Workloads ver-<n> on the chain verified, whose vdeploy step requires a
// signature by the run's key of its image: registry_test.go), so that
// every other op of a seed stays as it was (TestLaneLeavesTheOtherOps).
// Tenants create their owners on an image of their repository (signed by
// the key, unsigned, signed by another key, a tag moved after signing, or
// the tag live), point them at another, change a note (the step renders
// again with the digest it checked), move the tag live between images, and
// delete them; a tenant's repository answers 503 (regdown) or nothing
// (reghang) for a few seconds. Invariant 9 judges every object the step
// stamps, and its status at the end.
type vlane struct {
	owners  map[string]map[string]bool // tenant → live owner
	made    map[string]int             // tenant → owners made
	notes   int
	commits int
}

// verifyOp adds, now and then, one op of the verified chain.
func (g *generator) verifyOp() {
	if g.noLane || g.v.IntN(8) != 0 {
		return
	}
	t := tenants[g.v.IntN(len(tenants))]
	if g.vlane.owners[t] == nil {
		g.vlane.owners[t] = map[string]bool{}
	}
	live := make([]string, 0, 2)
	for n := range g.vlane.owners[t] {
		live = append(live, n)
	}
	sort.Strings(live)
	do := "create"
	if len(live) > 0 {
		do = g.vweighted("image", 6, "note", 3, "retag", 3, "create", 1, "delete", 1, "regdown", 1, "reghang", 1)
	}
	// A registry fault ends well before the traffic: the step's retry has
	// the settle time to take what it waited for.
	if (do == "regdown" || do == "reghang") && g.now > g.end-25*time.Second {
		do = "image"
	}
	if do == "create" && len(live) >= 2 {
		do = "image"
	}
	image := func() string { return strconv.Quote(regRef(t, vtags[g.v.IntN(len(vtags))])) }
	note := func() string {
		g.vlane.notes++
		return strconv.Quote("n" + strconv.Itoa(g.vlane.notes))
	}
	person := func(o Op) {
		o.At, o.Actor, o.Tenant = g.now, "person-"+t, t
		g.add(o)
	}
	switch do {
	case "create":
		g.vlane.made[t]++
		g.vlane.commits++
		n := "ver-" + strconv.Itoa(g.vlane.made[t])
		g.vlane.owners[t][n] = true
		person(Op{Do: "create", Kind: "Workload", Name: n, Args: map[string]string{"chain": "verified", "sa": "default", "labels": "{}",
			"commit": "vc" + strconv.Itoa(g.vlane.commits),
			"params": `[{"name":"image","value":` + image() + `},{"name":"note","value":` + note() + `}]`}})
	case "image":
		person(Op{Do: "param", Kind: "Workload", Name: live[g.v.IntN(len(live))], Args: map[string]string{"param": "image", "value": image()}})
	case "note":
		person(Op{Do: "param", Kind: "Workload", Name: live[g.v.IntN(len(live))], Args: map[string]string{"param": "note", "value": note()}})
	case "retag":
		person(Op{Do: "retag", Kind: "image", Name: "app:live",
			Args: map[string]string{"tag": "live", "to": []string{"good1", "good2", "unsigned", "wrongkey"}[g.v.IntN(4)]}})
	case "delete":
		n := live[g.v.IntN(len(live))]
		delete(g.vlane.owners[t], n)
		person(Op{Do: "delete", Kind: "Workload", Name: n})
	case "regdown", "reghang":
		d := 3*time.Second + time.Duration(g.v.Int64N(int64(5*time.Second)))
		g.add(Op{At: g.now, Actor: "registry", Do: do, Tenant: t, Args: map[string]string{"for": strconv.FormatInt(d.Milliseconds(), 10)}})
		// The tenant changes an owner while its registry fails: the step
		// has something to verify then (a new note: the tag resolved
		// again; a new image).
		n := live[g.v.IntN(len(live))]
		at := g.now
		g.now = at + time.Second
		person(Op{Do: "param", Kind: "Workload", Name: n, Args: map[string]string{"param": "note", "value": note()}})
		g.now = at + 2*time.Second
		person(Op{Do: "param", Kind: "Workload", Name: n, Args: map[string]string{"param": "image", "value": image()}})
		g.now = at
	}
}

// vweighted is weighted on the verified chain's source.
func (g *generator) vweighted(choices ...any) string {
	total := 0
	for i := 1; i < len(choices); i += 2 {
		total += choices[i].(int)
	}
	n := g.v.IntN(total)
	for i := 0; i < len(choices); i += 2 {
		n -= choices[i+1].(int)
		if n < 0 {
			return choices[i].(string)
		}
	}
	return choices[0].(string)
}
