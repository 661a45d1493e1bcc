package status

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"kontinue.dev/kontinue/reconciler/jsonvalue"
)

// Size bounds of an owner's status. The API server refuses an object
// larger than etcd takes (1.5 MiB by default): a status that grows past it
// (large outputs kept for a gated step, a full last good object) would
// fail every write, and the owner would show a stale status for good.
const (
	// ObjectLimit is the size of a whole object the API server stores.
	ObjectLimit = 3 << 19
	// FieldLimit bounds one step's outputValues, lastGoodObject,
	// appliedObject and appliedOutputValues.
	FieldLimit = 256 << 10
	// MessageLimit bounds one condition message.
	MessageLimit = 32 << 10
)

// statusMargin is kept free of the object's limit for what the API server
// adds to it (managedFields of the status write, timestamps).
const statusMargin = 64 << 10

// Free is how much room the status of obj may take: the object's limit
// less the rest of the object and statusMargin.
func Free(obj map[string]any) int {
	rest := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			rest[k] = v
		}
	}
	b, _ := json.Marshal(rest)
	return ObjectLimit - len(b) - statusMargin
}

// Bound cuts what makes s too large and says what it cut, one sentence per
// cut (nil: nothing was cut). free is what the status may take: the
// object's limit less the rest of the object. Per field first (FieldLimit,
// MessageLimit), then the largest of the steps' bulky fields (bulky:
// outputValues, lastGoodObject, appliedObject, appliedOutputValues and
// provenance, which is bounded per value, st.ValueLimit, so rarely the
// largest) until the whole fits. Only those are dropped, never cut
// short: a value that is there is whole. Messages are cut with a marker.
func Bound(s *OwnerStatus, free int) []string {
	var notes []string
	for i := range s.Conditions {
		s.Conditions[i].Message = cutMessage(s.Conditions[i].Message)
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		for j := range r.Conditions {
			r.Conditions[j].Message = cutMessage(r.Conditions[j].Message)
		}
		// Copied from objects others can edit: small, but deep enough, they
		// would make the owner one the API server cannot list or read.
		// Every bulky field, so that a field added to bulky is checked too.
		for _, f := range bulky {
			if v := f.get(r); v != nil && TooDeep(v) {
				f.drop(r)
				notes = append(notes, dropped(r.Name, f.name, -1, tooDeep))
			}
		}
	}
	if total := size(s); total <= FieldLimit && total <= free {
		return notes // the usual case: one marshal
	}
	for i := range s.Resources {
		for _, f := range bulky {
			if f.name == "provenance" {
				continue // bounded per value
			}
			if v := f.get(&s.Resources[i]); v != nil {
				if n := size(v); n > FieldLimit {
					f.drop(&s.Resources[i])
					notes = append(notes, dropped(s.Resources[i].Name, f.name, n, fmt.Sprintf("over the %s one field may take", kib(FieldLimit))))
				}
			}
		}
	}
	for total := size(s); total > free; total = size(s) {
		i, f, n := largest(s.Resources)
		if i < 0 {
			break // nothing left to drop: the write says why it fails
		}
		f.drop(&s.Resources[i])
		notes = append(notes, dropped(s.Resources[i].Name, f.name, n, fmt.Sprintf("the status would take %s, over the %s left for it", kib(total), kib(free))))
	}
	return notes
}

// bulkyField is a field of a step's status that Bound may drop whole.
type bulkyField struct {
	name string
	get  func(*Resource) any // nil: not set
	drop func(*Resource)
	what string // what its loss means
}

var bulky = []bulkyField{
	{"lastGoodObject", func(r *Resource) any { return nilIfEmpty(r.LastGoodObject) }, func(r *Resource) { r.LastGoodObject = nil },
		"no shadow can be stamped from it"},
	{"outputValues", func(r *Resource) any { return nilIfEmpty(r.OutputValues) }, func(r *Resource) { r.OutputValues = nil },
		"downstream steps get no last good outputs from it while the step does not succeed"},
	{"appliedObject", func(r *Resource) any { return nilIfEmpty(r.AppliedObject) }, func(r *Resource) { r.AppliedObject = nil },
		"no shadow can be stamped from the input set on the object once it succeeds"},
	{"appliedOutputValues", func(r *Resource) any { return nilIfEmpty(r.AppliedOutputValues) }, func(r *Resource) { r.AppliedOutputValues = nil },
		"a success of the input set on the object is not recorded if a newer set is waiting by then"},
	{"provenance", func(r *Resource) any {
		if r.Provenance == nil {
			return nil
		}
		return r.Provenance
	}, func(r *Resource) { r.Provenance = nil },
		"the step's input values are not shown, and its sets' ends are not counted in the lead time metrics"},
}

func nilIfEmpty(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

func largest(rs []Resource) (idx int, field bulkyField, n int) {
	idx = -1
	for i := range rs {
		for _, f := range bulky {
			if v := f.get(&rs[i]); v != nil {
				if m := size(v); m > n {
					idx, field, n = i, f, m
				}
			}
		}
	}
	return idx, field, n
}

// TooDeep reports whether a value copied into a status (outputs, a last
// good object) nests deeper than Kontinue writes (jsonvalue.MaxDepth).
func TooDeep(v any) bool { return jsonvalue.DeeperThan(v, jsonvalue.MaxDepth) }

var tooDeep = fmt.Sprintf("nested deeper than the %d levels Kontinue writes", jsonvalue.MaxDepth)

func dropped(step, field string, n int, why string) string {
	what := ""
	for _, f := range bulky {
		if f.name == field {
			what = f.what
		}
	}
	if n < 0 {
		return fmt.Sprintf("step [%s]: %s not kept in status, %s; %s", step, field, why, what)
	}
	return fmt.Sprintf("step [%s]: %s (%s) not kept in status, %s; %s", step, field, kib(n), why, what)
}

// TruncatedMarker ends a message cut to MessageLimit.
const TruncatedMarker = "… [truncated]"

func cutMessage(m string) string {
	if len(m) <= MessageLimit {
		return m
	}
	cut := MessageLimit - len(TruncatedMarker)
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut-- // never half a character
	}
	return m[:cut] + TruncatedMarker
}

func size(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

func kib(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}
