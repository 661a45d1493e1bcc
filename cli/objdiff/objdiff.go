// Package objdiff compares a stamped object as it lives with the object a
// new chain or template definition would stamp, and groups owners whose
// changes are the same: the pure half of `kontinue diff`. Nothing here
// reads a cluster.
package objdiff

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"
)

// Project keeps of live only the fields some shape sets (a rendered
// object: the fields Kontinue applies), so that what the API server and
// other controllers add (uid, status, defaults) does not show as a
// difference. Lists are projected element by element; a live element no
// shape has at its index is kept whole (the new render drops it).
func Project(live map[string]any, shapes ...map[string]any) map[string]any {
	out := map[string]any{}
	for k, lv := range live {
		var subs []any
		for _, s := range shapes {
			if sv, ok := s[k]; ok {
				subs = append(subs, sv)
			}
		}
		if len(subs) == 0 {
			continue
		}
		out[k] = projectValue(lv, subs)
	}
	return out
}

func projectValue(lv any, shapes []any) any {
	switch l := lv.(type) {
	case map[string]any:
		var ms []map[string]any
		for _, s := range shapes {
			if m, ok := s.(map[string]any); ok {
				ms = append(ms, m)
			}
		}
		if len(ms) == 0 {
			return lv
		}
		return Project(l, ms...)
	case []any:
		out := make([]any, len(l))
		for i, e := range l {
			var subs []any
			for _, s := range shapes {
				if sl, ok := s.([]any); ok && i < len(sl) {
					subs = append(subs, sl[i])
				}
			}
			if len(subs) == 0 {
				out[i] = e
				continue
			}
			out[i] = projectValue(e, subs)
		}
		return out
	}
	return lv
}

// Change is one field that differs.
type Change struct {
	Path string `json:"path"`
	Op   string `json:"op"` // OpChanged, OpAdded, OpRemoved
	Old  any    `json:"old,omitempty"`
	New  any    `json:"new,omitempty"`
}

// What a change does to a field (or an object).
const (
	OpChanged = "changed"
	OpAdded   = "added"
	OpRemoved = "removed"
)

// Changes lists the fields that differ from old to new, by path, in path
// order. Numbers compare by value (JSON decodes them as float64 or int64).
func Changes(old, new map[string]any) []Change {
	var out []Change
	walk("", old, new, &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func walk(path string, a, b any, out *[]Change) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k, av := range am {
			p := join(path, k)
			if bv, ok := bm[k]; ok {
				walk(p, av, bv, out)
			} else {
				*out = append(*out, Change{Path: p, Op: OpRemoved, Old: av})
			}
		}
		for k, bv := range bm {
			if _, ok := am[k]; !ok {
				*out = append(*out, Change{Path: join(path, k), Op: OpAdded, New: bv})
			}
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		for i := 0; i < len(al) || i < len(bl); i++ {
			p := path + "[" + strconv.Itoa(i) + "]"
			switch {
			case i >= len(al):
				*out = append(*out, Change{Path: p, Op: OpAdded, New: bl[i]})
			case i >= len(bl):
				*out = append(*out, Change{Path: p, Op: OpRemoved, Old: al[i]})
			default:
				walk(p, al[i], bl[i], out)
			}
		}
		return
	}
	if !equal(a, b) {
		*out = append(*out, Change{Path: path, Op: OpChanged, Old: a, New: b})
	}
}

// equal compares leaves, numbers by value whatever their Go type.
func equal(a, b any) bool {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func number(v any) (string, bool) {
	switch n := v.(type) {
	case int64:
		return strconv.FormatInt(n, 10), true
	case int:
		return strconv.Itoa(n), true
	case float64:
		return strconv.FormatFloat(n, 'f', -1, 64), true
	case json.Number:
		return n.String(), true
	}
	return "", false
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// join appends a map key to a path: .key, or ["a.b"] when the key is not
// a plain word (a label, a ConfigMap key with dots).
func join(path, k string) string {
	if plainKey.MatchString(k) {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	return path + "[" + strconv.Quote(k) + "]"
}

// Unified is a unified diff of two objects as YAML (nil: no object), with
// 3 lines of context, as kubectl diff shows; "" when they are equal.
func Unified(fromName, toName string, a, b map[string]any) (string, error) {
	ya, err := toYAML(a)
	if err != nil {
		return "", err
	}
	yb, err := toYAML(b)
	if err != nil {
		return "", err
	}
	if ya == yb {
		return "", nil
	}
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: lines(ya), B: lines(yb),
		FromFile: fromName, ToFile: toName, Context: 3,
	})
}

// lines splits text after each newline (difflib.SplitLines adds an empty
// last line, which shows as a change at the end).
func lines(s string) []string {
	if s == "" {
		return nil
	}
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

func toYAML(m map[string]any) (string, error) {
	if m == nil {
		return "", nil
	}
	b, err := yaml.Marshal(m)
	return string(b), err
}

// Summary says in a few words what changes do: "data.image: reg/app:v1 →
// reg/app:v2, data.mode added: std, data.old removed"; r (nil: none)
// rewrites values (an owner's name to a placeholder).
func Summary(cs []Change, r *strings.Replacer) string {
	var parts []string
	for _, c := range cs {
		switch c.Op {
		case OpChanged:
			parts = append(parts, c.Path+": "+short(c.Old, r)+" → "+short(c.New, r))
		case OpAdded:
			parts = append(parts, c.Path+" added: "+short(c.New, r))
		default:
			parts = append(parts, c.Path+" "+c.Op)
		}
	}
	return strings.Join(parts, ", ")
}

// short is a scalar as it reads, cut to 40 characters; a map or list as
// {…} or […].
func short(v any, r *strings.Replacer) string {
	var s string
	switch t := v.(type) {
	case map[string]any:
		return "{…}"
	case []any:
		return "[…]"
	case string:
		s = t
	case nil:
		return "null"
	default:
		s = sprint(v)
	}
	if r != nil {
		s = r.Replace(s)
	}
	if rs := []rune(s); len(rs) > 40 {
		s = string(rs[:39]) + "…"
	}
	return s
}

// Sprint is a value as a group key holds it.
func sprint(v any) string {
	if s, ok := number(v); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
