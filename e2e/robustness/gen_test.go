package robustness

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"
)

// The traffic generator: from a seed, a list of ops over a duration. It
// keeps its own model of what it made (owners, their params, squatted
// names, accounts and grants) to pick targets, and never looks at the
// cluster: an op whose target is gone by then fails, and says so, which
// is traffic too.

var tenants = []string{"t1", "t2", "t3"}

// Edge values for params that are stamped whole (the widget's value).
var edgeValues = []string{
	`9007199254740993`, `-9007199254740993`, `9223372036854775807`, `-9223372036854775808`,
	`1.7976931348623157e+308`, `5e-324`, `0.1`, `-0`, `123456789012345678901234567890`,
	`{"n":9007199254740993,"f":2.5e-308,"s":"\u00fc\u202e\u0301\ud83d\ude00"}`,
	`[9007199254740993,1e308,"\u2028",null,true]`,
	`"\u202e\u0301\ud83d\ude00\u0000"`, `""`, `true`, `42`, `"plain"`,
}

// Odd strings for params stamped into strings (a ConfigMap's data).
var oddStrings = []string{
	`"plain"`, `"\u202eevil\u202c"`, `"e\u0301\u0301\u0301"`, `"\ud83d\ude00\ud83c\udff3\ufe0f\u200d\ud83c\udf08"`,
	`"line\nbreak\ttab"`, `"\u0000nul"`, `"\ufeffbom"`, `"\\u0041"`, `"` + "\u4e2d\u6587" + `"`, `7`,
}

type genOwner struct {
	kind, chain, sa string
	params          map[string]string // name → raw JSON
	labels          map[string]string
	live            bool
	image           int // last image version
	revision        int
}

type genTenant struct {
	name   string
	owners map[string]*genOwner
	squats map[string]string // name → kind
	sas    map[string]bool   // account → exists
	grants map[string]bool   // account/role → bound
}

type generator struct {
	r *rand.Rand
	// x draws the ops added after the first fixed seeds were chosen (the
	// lane, lane.go): a source of their own, so that adding them left
	// every earlier op of a seed as it was.
	x      *rand.Rand
	lane   *lane
	noLane bool
	// v draws the verified chain's ops (vlane_test.go), a source of its
	// own: the lane's ops before it stay as they were too.
	v       *rand.Rand
	vlane   *vlane
	end     time.Duration // no op after it
	ops     []Op
	now     time.Duration
	tenants []*genTenant
	edition map[string]int
	commit  int
	paused  bool
}

// generate is the traffic of a seed: ops over traffic, then nothing.
// The main chain's pauseOnFailure at the start comes with it.
func generate(seed uint64, traffic time.Duration) ([]Op, bool) {
	return generateOps(seed, traffic, true)
}

// generateOps is generate, with or without the lane's ops (without: the
// traffic seeds made before the lane was added).
func generateOps(seed uint64, traffic time.Duration, withLane bool) ([]Op, bool) {
	g := &generator{noLane: !withLane, r: rand.New(rand.NewPCG(seed, seed^0x5bd1e995)), x: rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, seed)),
		lane: &lane{runs: map[string]map[string]int{}, stormed: map[string]bool{}}, edition: map[string]int{}, end: traffic,
		v: rand.New(rand.NewPCG(seed^0x2545f4914f6cdd1d, seed^0x94d049bb133111eb)), vlane: &vlane{owners: map[string]map[string]bool{}, made: map[string]int{}}}
	pof := g.r.IntN(2) == 0
	for _, n := range tenants {
		g.tenants = append(g.tenants, &genTenant{name: n, owners: map[string]*genOwner{}, squats: map[string]string{},
			sas:    map[string]bool{"builder": true, "writer": true, "default": true},
			grants: map[string]bool{"builder/full": true, "writer/noget": true, "default/full": true}})
	}
	// The first owners, in the first seconds.
	for _, t := range g.tenants {
		for i := range 2 + g.r.IntN(2) {
			g.now = time.Duration(g.r.Int64N(int64(3 * time.Second)))
			g.create(t, g.ownerName(t, i))
		}
	}
	// Traffic, with the canary's ticks and the faults interleaved.
	nextTick, nextFault, nextPlatform := 4*time.Second, 8*time.Second+g.jitter(6*time.Second), 6*time.Second
	tick := 0
	for g.now = 3 * time.Second; g.now < traffic; g.now += 300*time.Millisecond + g.jitter(1100*time.Millisecond) {
		for nextTick <= g.now {
			tick++
			g.add(Op{At: nextTick, Actor: "person-canary", Do: "param", Tenant: "canary", Kind: "Workload", Name: "canary",
				Args: map[string]string{"param": "tick", "value": strconv.Quote("k" + strconv.Itoa(tick))}})
			nextTick += 6 * time.Second
		}
		if nextFault <= g.now && g.now < traffic-10*time.Second {
			d := g.fault()
			nextFault = g.now + d + 6*time.Second + g.jitter(12*time.Second)
		}
		// The platform's last change comes well before the end, so that a
		// roll-out it starts has the settle time to finish (invariant 7c).
		if nextPlatform <= g.now && g.now < traffic-20*time.Second {
			g.platform()
			nextPlatform = g.now + 3*time.Second + g.jitter(5*time.Second)
		}
		g.tenantOp(g.tenants[g.r.IntN(len(g.tenants))])
		g.laneOp()
		g.verifyOp()
	}
	g.lane.endStorms(g)
	sort.SliceStable(g.ops, func(i, j int) bool { return g.ops[i].At < g.ops[j].At })
	return g.ops, pof
}

func (g *generator) jitter(d time.Duration) time.Duration {
	return time.Duration(g.r.Int64N(int64(d) + 1))
}

func (g *generator) add(o Op) {
	if o.At >= g.end {
		return // the tail of a compound op past the traffic's end
	}
	if len(o.Args) == 0 {
		o.Args = nil // as a saved list reads back
	}
	g.ops = append(g.ops, o)
}

func (g *generator) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

// weighted picks a key by weight, in the order given.
func (g *generator) weighted(choices ...any) string {
	total := 0
	for i := 1; i < len(choices); i += 2 {
		total += choices[i].(int)
	}
	n := g.r.IntN(total)
	for i := 0; i < len(choices); i += 2 {
		n -= choices[i+1].(int)
		if n < 0 {
			return choices[i].(string)
		}
	}
	return choices[0].(string)
}

// ownerName: a small pool of names, so that names are reused (an owner
// deleted and made again, another kind under a name).
func (g *generator) ownerName(t *genTenant, i int) string {
	if g.r.IntN(4) == 0 {
		return "dl-" + strconv.Itoa(1+i%3)
	}
	return "app-" + strconv.Itoa(1+i%5)
}

func (g *generator) op(t *genTenant, do, kind, name string, args map[string]string) {
	g.add(Op{At: g.now, Actor: "person-" + t.name, Do: do, Tenant: t.name, Kind: kind, Name: name, Args: args})
}

func (g *generator) nextCommit() string {
	g.commit++
	return "c" + strconv.Itoa(g.commit)
}

func (g *generator) image(o *genOwner) string {
	o.image++
	if o.image > 1 && g.r.IntN(10) < 4 { // the first rolls out: a later one may crash
		return strconv.Quote("registry.example/app:crash-" + strconv.Itoa(o.image))
	}
	return strconv.Quote("registry.example/app:v" + strconv.Itoa(o.image))
}

// create makes an owner with fresh params (or makes it again).
func (g *generator) create(t *genTenant, name string) {
	kind := "Workload"
	if name[:3] == "dl-" {
		kind = "Deliverable"
	}
	chain := g.pick(chainsOfKind[kind])
	o := &genOwner{kind: kind, chain: chain, sa: g.weighted("builder", 6, "writer", 3, "default", 1),
		params: map[string]string{}, labels: map[string]string{}, live: true}
	switch chain {
	case "main":
		o.params["value"] = g.pick(edgeValues)
		o.params["variant"] = strconv.Quote(g.pick([]string{"a", "b"}))
		o.params["text"] = g.pick(oddStrings[:4])
		if g.r.IntN(2) == 0 {
			o.labels["robustness.kontinue.dev/wave"] = "canary"
		}
	case "apps":
		o.params["image"] = g.image(o)
		o.params["rule"] = strconv.Quote(g.pick([]string{"health", "completion"}))
		o.params["exit"] = strconv.Quote(g.weighted("0", 8, "1", 2))
		o.params["runFor"] = strconv.Quote(g.pick([]string{"1s", "3s", "6s"}))
	case "deliver":
		o.params["image"] = g.image(o)
		o.revision++
		o.params["revision"] = strconv.Quote("r" + strconv.Itoa(o.revision))
	}
	if g.r.IntN(5) == 0 {
		o.labels[shardLabel] = "b"
	}
	t.owners[name] = o
	g.op(t, "create", kind, name, map[string]string{"chain": chain, "sa": o.sa, "params": paramsJSON(o.params),
		"labels": labelsJSON(o.labels), "commit": g.nextCommit()})
}

const shardLabel = "kontinue.dev/shard"

func paramsJSON(p map[string]string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := "["
	for i, k := range keys {
		if i > 0 {
			out += ","
		}
		out += `{"name":` + strconv.Quote(k) + `,"value":` + p[k] + `}`
	}
	return out + "]"
}

func labelsJSON(l map[string]string) string {
	b, _ := json.Marshal(l)
	return string(b)
}

// liveOwners are a tenant's owners that exist, by name, sorted.
func (t *genTenant) liveOwners(chain string) []string {
	var out []string
	for n, o := range t.owners {
		if o.live && (chain == "" || o.chain == chain) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// stepObjects are the names of the objects a chain's steps stamp for an
// owner (what a person may squat).
func stepObjects(chain, owner string) map[string]string {
	switch chain {
	case "main":
		return map[string]string{owner + "-src": "ConfigMap", owner + "-cfg": "ConfigMap", owner + "-w": "Widget", owner + "-echo": "Widget"}
	case "apps":
		return map[string]string{owner + "-src": "ConfigMap", owner + "-y": "Widget", owner + "-go": "ConfigMap"}
	default:
		return map[string]string{owner + "-manifest": "ConfigMap", owner + "-notify": "ConfigMap"}
	}
}

func (g *generator) tenantOp(t *genTenant) {
	live := t.liveOwners("")
	if len(live) == 0 {
		g.create(t, g.ownerName(t, g.r.IntN(8)))
		return
	}
	name := g.pick(live)
	o := t.owners[name]
	switch g.weighted(
		"value", 12, "param", 16, "commit", 8, "create", 5, "delete", 3, "label", 6, "sa", 3, "annotate", 4,
		"squat", 6, "collide", 3, "release", 5, "handedit", 3, "rbac", 3, "account", 2, "forge", 3,
		"deep", 1, "spin", 2, "burst", 4, "away", 2) {
	case "value":
		if o.chain != "main" {
			g.paramOp(t, name, o)
			return
		}
		if g.r.IntN(8) == 0 {
			g.op(t, "param", o.kind, name, map[string]string{"param": "value", "large": strconv.Itoa(200_000 + g.r.IntN(300_000))})
			return
		}
		v := g.pick(edgeValues)
		o.params["value"] = v
		g.op(t, "param", o.kind, name, map[string]string{"param": "value", "value": v})
	case "param":
		g.paramOp(t, name, o)
	case "commit":
		if o.kind != "Workload" {
			g.paramOp(t, name, o)
			return
		}
		g.op(t, "commit", o.kind, name, map[string]string{"commit": g.nextCommit()})
	case "create":
		// A new owner, or one made again under a name it had.
		n := g.ownerName(t, g.r.IntN(8))
		if ex := t.owners[n]; ex != nil && ex.live {
			g.op(t, "delete", ex.kind, n, nil)
			ex.live = false
			g.now += 500 * time.Millisecond
		}
		g.create(t, n)
	case "delete":
		g.op(t, "delete", o.kind, name, nil)
		o.live = false
	case "label":
		switch g.r.IntN(3) {
		case 0:
			v := g.weighted("", 6, "b", 4, "nowhere", 2)
			o.labels[shardLabel] = v
			g.op(t, "label", o.kind, name, map[string]string{"key": shardLabel, "value": v})
		case 1:
			v := g.weighted("canary", 1, "", 1)
			g.op(t, "label", o.kind, name, map[string]string{"key": "robustness.kontinue.dev/wave", "value": v})
		default:
			// Moved to another chain of its kind (or to none).
			c := g.pick(append(append([]string{}, chainsOfKind[o.kind]...), "none"))
			g.op(t, "label", o.kind, name, map[string]string{"key": "robustness.kontinue.dev/chain", "value": c})
			if c != "none" {
				o.chain = c
			}
		}
	case "sa":
		o.sa = g.weighted("builder", 4, "writer", 4, "default", 1, "ghost", 1)
		g.op(t, "sa", o.kind, name, map[string]string{"sa": o.sa})
	case "annotate":
		key := g.pick([]string{"kontinue.dev/reconcile-requested-at", "kontinue.dev/retry"})
		g.op(t, "annotate", o.kind, name, map[string]string{"key": key, "value": "tok-" + strconv.Itoa(g.r.IntN(1000))})
	case "squat":
		g.squat(t, o, name)
	case "collide":
		// Two steps of one owner at one name: src named like cfg.
		if o.chain != "main" {
			g.squat(t, o, name)
			return
		}
		if o.params["srcSuffix"] == `"cfg"` {
			// Already: cfg moves off the name (src takes the object over,
			// as a step that left it holds nothing), or back onto it
			// (src holds it now).
			v := `"x1"`
			if o.params["cfgSuffix"] == v {
				v = `"cfg"`
			}
			o.params["cfgSuffix"] = v
			g.op(t, "param", o.kind, name, map[string]string{"param": "cfgSuffix", "value": v})
			return
		}
		o.params["srcSuffix"] = `"cfg"`
		g.op(t, "param", o.kind, name, map[string]string{"param": "srcSuffix", "value": `"cfg"`})
	case "release":
		var names []string
		for n := range t.squats {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) == 0 {
			g.squat(t, o, name)
			return
		}
		n := names[g.r.IntN(len(names))]
		kind := t.squats[n]
		if g.r.IntN(2) == 0 {
			g.op(t, "release", kind, n, map[string]string{"how": "delete"})
			delete(t.squats, n)
		} else {
			// Handed to the owner whose step stamps it (or another one).
			owner := n
			for _, suffix := range []string{"-src", "-cfg", "-w", "-echo", "-go", "-manifest", "-notify", "-x1", "-x2", "-x3"} {
				if len(owner) > len(suffix) && owner[len(owner)-len(suffix):] == suffix {
					owner = owner[:len(owner)-len(suffix)]
				}
			}
			k := "Workload"
			if len(owner) > 3 && owner[:3] == "dl-" {
				k = "Deliverable"
			}
			g.op(t, "release", kind, n, map[string]string{"how": "adopt", "adopt": k + "/" + owner})
		}
	case "handedit":
		objs := stepObjects(o.chain, name)
		var names []string
		for n := range objs {
			names = append(names, n)
		}
		sort.Strings(names)
		n := g.pick(names)
		g.op(t, "handedit", objs[n], n, map[string]string{"value": "hand-" + strconv.Itoa(g.r.IntN(100))})
	case "rbac":
		sa := g.pick([]string{"builder", "writer", "default"})
		role := g.pick([]string{"full", "noget"})
		k := sa + "/" + role
		if t.grants[k] {
			g.op(t, "revoke", "", "", map[string]string{"sa": sa, "role": role})
		} else {
			g.op(t, "grant", "", "", map[string]string{"sa": sa, "role": role})
		}
		t.grants[k] = !t.grants[k]
	case "account":
		sa := g.pick([]string{"builder", "writer"})
		if t.sas[sa] {
			g.op(t, "sadelete", "", "", map[string]string{"sa": sa})
		} else {
			g.op(t, "sacreate", "", "", map[string]string{"sa": sa})
		}
		t.sas[sa] = !t.sas[sa]
	case "forge":
		if o.chain != "main" {
			g.paramOp(t, name, o)
			return
		}
		g.add(Op{At: g.now, Actor: "rogue", Do: "forge", Tenant: t.name, Kind: "Widget", Name: name + "-w",
			Args: map[string]string{"how": g.pick([]string{"stale", "ready", "fail"})}})
	case "deep":
		// As deep as the API server takes: a Workload whose param is
		// 9,996 levels deep (10,001 in a watch event), or a YAML text the
		// yaml step turns into a Widget 10,000 levels deep.
		switch o.chain {
		case "main":
			g.op(t, "param", o.kind, name, map[string]string{"param": "value", "deep": "9996"})
		case "apps":
			g.op(t, "param", o.kind, name, map[string]string{"param": "yaml", "deep": "9998", "as": "text"})
		default:
			g.paramOp(t, name, o)
		}
	case "spin":
		if o.chain != "apps" {
			g.paramOp(t, name, o)
			return
		}
		v := g.pick([]string{"3000", "20000", "1"})
		o.params["loops"] = v
		g.op(t, "param", o.kind, name, map[string]string{"param": "loops", "value": v})
	case "away":
		// A tenant joins the canary wave, then moves its owner to a shard
		// no replica serves.
		if o.chain != "main" {
			g.paramOp(t, name, o)
			return
		}
		g.op(t, "label", o.kind, name, map[string]string{"key": "robustness.kontinue.dev/wave", "value": "canary"})
		g.now += 200*time.Millisecond + g.jitter(time.Second)
		o.labels[shardLabel] = "nowhere"
		g.op(t, "label", o.kind, name, map[string]string{"key": shardLabel, "value": "nowhere"})
	case "burst":
		// Two changes a moment apart: the second arrives while the
		// object works on the first (a held input set).
		for range 2 {
			g.paramOp(t, name, o)
			g.now += 500*time.Millisecond + g.jitter(2500*time.Millisecond)
		}
	}
}

// paramOp changes a param the owner's chain reads.
func (g *generator) paramOp(t *genTenant, name string, o *genOwner) {
	var p, v string
	switch o.chain {
	case "main":
		switch g.r.IntN(5) {
		case 0:
			p, v = "variant", strconv.Quote(g.weighted("a", 5, "b", 5, "c", 1))
		case 1:
			p, v = "text", g.pick(oddStrings)
		case 2:
			p, v = "fail", g.weighted("false", 3, "true", 1)
		case 3:
			p, v = "hang", g.weighted("false", 4, "true", 1)
		default:
			p, v = "cfgSuffix", g.weighted(`"cfg"`, 4, `"x1"`, 1)
		}
	case "apps":
		// Images most often: a Deployment that rolled out a few times, then
		// crash-loops, is what a shadow is made for.
		switch g.r.IntN(8) {
		case 0, 1, 2, 3, 4:
			p, v = "image", g.image(o)
		case 5:
			p, v = "rule", strconv.Quote(g.pick([]string{"health", "completion"}))
		case 6:
			p, v = "exit", strconv.Quote(g.weighted("0", 3, "1", 1))
		default:
			p, v = "runFor", strconv.Quote(g.weighted("1s", 3, "4s", 2, "600s", 1))
		}
	default:
		if g.r.IntN(3) == 0 {
			p, v = "image", g.image(o)
		} else {
			o.revision++
			p, v = "revision", strconv.Quote("r"+strconv.Itoa(o.revision))
		}
	}
	o.params[p] = v
	g.op(t, "param", o.kind, name, map[string]string{"param": p, "value": v})
}

// squat: a person makes an object at a name a step stamps, sometimes with
// the owner's labels (labels are not proof): before the owner is made
// (then it is made), at a fresh name a step then moves onto (its suffix
// param), or at a step's current name (which then already exists).
func (g *generator) squat(t *genTenant, o *genOwner, name string) {
	args := func(owner string) map[string]string {
		if g.r.IntN(5) < 2 {
			return map[string]string{"labels": "kontinue", "owner": owner}
		}
		return nil
	}
	switch mode := g.r.IntN(5); {
	case mode < 2:
		// A name before its owner: the owner is (made again) after it.
		n := g.ownerName(t, g.r.IntN(8))
		if ex := t.owners[n]; ex != nil && ex.live {
			g.op(t, "delete", ex.kind, n, nil)
			ex.live = false
			g.now += 300 * time.Millisecond
		}
		target := n + "-src"
		kind := "Workload"
		if n[:3] == "dl-" {
			target, kind = n+"-manifest", "Deliverable"
		}
		t.squats[target] = "ConfigMap"
		g.op(t, "squat", "ConfigMap", target, args(kind+"/"+n))
		g.now += 300*time.Millisecond + g.jitter(2*time.Second)
		g.create(t, n)
	case mode < 4 && o.chain != "deliver":
		// A fresh name, then the step moves onto it.
		suffix := g.pick([]string{"x1", "x2", "x3"})
		target := name + "-" + suffix
		t.squats[target] = "ConfigMap"
		g.op(t, "squat", "ConfigMap", target, args(o.kind+"/"+name))
		g.now += 300*time.Millisecond + g.jitter(time.Second)
		p := "srcSuffix"
		if o.chain == "main" && g.r.IntN(2) == 0 {
			p = "cfgSuffix"
		}
		o.params[p] = strconv.Quote(suffix)
		g.op(t, "param", o.kind, name, map[string]string{"param": p, "value": strconv.Quote(suffix)})
	default:
		objs := stepObjects(o.chain, name)
		var names []string
		for n := range objs {
			names = append(names, n)
		}
		sort.Strings(names)
		target := g.pick(names)
		t.squats[target] = objs[target]
		g.op(t, "squat", objs[target], target, args(o.kind+"/"+name))
	}
}

// platform: the platform team edits a template, the roll-out policy, or
// pauses and resumes the main chain's roll-out.
func (g *generator) platform() {
	switch g.weighted("edit", 7, "policy", 2, "pause", 1) {
	case "edit":
		// A chain's template, the main chain's (with a roll-out) most often.
		n := g.pick(chainTemplates[g.weighted("main", 8, "apps", 5, "deliver", 4, "canary", 3)])
		g.edition[n]++
		g.add(Op{At: g.now, Actor: "platform", Do: "edit", Kind: "template", Name: n,
			Args: map[string]string{"edition": strconv.Itoa(1 + g.edition[n])}})
	case "policy":
		g.add(Op{At: g.now, Actor: "platform", Do: "policy", Kind: "chain", Name: "main",
			Args: map[string]string{"pauseOnFailure": strconv.FormatBool(g.r.IntN(2) == 0)}})
	default:
		do := "pause"
		if g.paused {
			do = "resume"
		}
		g.paused = !g.paused
		g.add(Op{At: g.now, Actor: "platform", Do: do, Kind: "chain", Name: "main"})
	}
}

// fault schedules one fault now and returns how long it lasts.
func (g *generator) fault() time.Duration {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	switch g.weighted("kill", 4, "failover", 2, "outage", 2, "slow", 2, "throttle", 2) {
	case "kill":
		r := g.pick([]string{"r1", "r2", "rb"})
		after := g.jitter(3 * time.Second)
		g.add(Op{At: g.now, Actor: "fault", Do: "kill", Args: map[string]string{"replica": r, "restartAfter": ms(after)}})
		return after
	case "failover":
		g.add(Op{At: g.now, Actor: "fault", Do: "failover", Args: map[string]string{"restartAfter": "2000"}})
		return 6 * time.Second
	case "outage":
		d := 2*time.Second + g.jitter(5*time.Second)
		g.add(Op{At: g.now, Actor: "fault", Do: "outage", Args: map[string]string{"for": ms(d)}})
		return d + 5*time.Second
	case "slow":
		d := 4*time.Second + g.jitter(6*time.Second)
		lat := 200*time.Millisecond + g.jitter(800*time.Millisecond)
		g.add(Op{At: g.now, Actor: "fault", Do: "slow", Args: map[string]string{"for": ms(d), "latency": ms(lat)}})
		return d
	default:
		d := 4*time.Second + g.jitter(6*time.Second)
		g.add(Op{At: g.now, Actor: "fault", Do: "throttle", Args: map[string]string{"for": ms(d),
			"fraction": fmt.Sprintf("%.2f", 0.2+0.4*g.r.Float64())}})
		return d
	}
}
