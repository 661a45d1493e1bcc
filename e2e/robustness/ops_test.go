package robustness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Op is one thing the traffic does: a tenant's person, the platform team,
// a rogue controller, the canary or a fault. Ops are generated from the
// seed alone (gen_test.go), never from what the cluster answers, so that
// a seed or a saved list (ops.jsonl) replays the same traffic, and a
// failing list can be shrunk by leaving ops out.
type Op struct {
	At     time.Duration     `json:"at"`               // after the traffic began
	Actor  string            `json:"actor"`            // person-t1, platform, rogue, fault, person-canary
	Do     string            `json:"do"`               // what (the executors in exec_test.go)
	Tenant string            `json:"tenant,omitempty"` // t1, t2, t3, canary: the namespace
	Kind   string            `json:"kind,omitempty"`   // the object's kind
	Name   string            `json:"name,omitempty"`   // the object's name
	Args   map[string]string `json:"args,omitempty"`
}

// String is the op as one line a person can read.
func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "+%7.3fs %-14s %-9s", o.At.Seconds(), o.Actor, o.Do)
	if (o.Kind != "" || o.Name != "") && o.Tenant != "" {
		fmt.Fprintf(&b, " %s %s/%s", o.Kind, o.Tenant, o.Name)
	} else if o.Kind != "" || o.Name != "" {
		fmt.Fprintf(&b, " %s %s", o.Kind, o.Name)
	} else if o.Tenant != "" {
		fmt.Fprintf(&b, " %s", o.Tenant)
	}
	keys := make([]string, 0, len(o.Args))
	for k := range o.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := o.Args[k]
		if len(v) > 80 {
			v = v[:80] + "…"
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	return b.String()
}

// Scope is the namespace the op changes ("" for the whole cluster: the
// platform's edits, faults).
func (o Op) Scope(prefix string) string {
	if o.Tenant == "" {
		return ""
	}
	return prefix + "-" + o.Tenant
}

func saveOps(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, o := range ops {
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return w.Flush()
}

func loadOps(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var o Op
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			return nil, fmt.Errorf("%s: %w: %s", path, err, line)
		}
		ops = append(ops, o)
	}
	return ops, sc.Err()
}

// opsText is the op list, one line each.
func opsText(ops []Op) string {
	var b strings.Builder
	for _, o := range ops {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	return b.String()
}
