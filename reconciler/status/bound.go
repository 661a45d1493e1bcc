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
	// FieldLimit bounds one step's outputValues and its lastGoodObject.
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
// MessageLimit), then the largest of the steps' outputValues,
// lastGoodObjects and provenance (bounded per value, st.ValueLimit, so
// rarely the largest) until the whole fits. Only those are dropped, never cut
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
		if r.LastGoodObject != nil && TooDeep(r.LastGoodObject) {
			r.LastGoodObject = nil
			notes = append(notes, dropped(r.Name, "lastGoodObject", -1, tooDeep))
		}
		if r.OutputValues != nil && TooDeep(r.OutputValues) {
			r.OutputValues = nil
			notes = append(notes, dropped(r.Name, "outputValues", -1, tooDeep))
		}
	}
	if total := size(s); total <= FieldLimit && total <= free {
		return notes // the usual case: one marshal
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		if n := size(r.LastGoodObject); r.LastGoodObject != nil && n > FieldLimit {
			r.LastGoodObject = nil
			notes = append(notes, dropped(r.Name, "lastGoodObject", n, fmt.Sprintf("over the %s one field may take", kib(FieldLimit))))
		}
		if n := size(r.OutputValues); r.OutputValues != nil && n > FieldLimit {
			r.OutputValues = nil
			notes = append(notes, dropped(r.Name, "outputValues", n, fmt.Sprintf("over the %s one field may take", kib(FieldLimit))))
		}
	}
	for total := size(s); total > free; total = size(s) {
		i, field, n := largest(s.Resources)
		if i < 0 {
			break // nothing left to drop: the write says why it fails
		}
		switch field {
		case "lastGoodObject":
			s.Resources[i].LastGoodObject = nil
		case "provenance":
			s.Resources[i].Provenance = nil
		default:
			s.Resources[i].OutputValues = nil
		}
		notes = append(notes, dropped(s.Resources[i].Name, field, n, fmt.Sprintf("the status would take %s, over the %s left for it", kib(total), kib(free))))
	}
	return notes
}

func largest(rs []Resource) (idx int, field string, n int) {
	idx = -1
	for i, r := range rs {
		if r.LastGoodObject != nil {
			if m := size(r.LastGoodObject); m > n {
				idx, field, n = i, "lastGoodObject", m
			}
		}
		if r.OutputValues != nil {
			if m := size(r.OutputValues); m > n {
				idx, field, n = i, "outputValues", m
			}
		}
		if r.Provenance != nil {
			if m := size(r.Provenance); m > n {
				idx, field, n = i, "provenance", m
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
	what := "no shadow can be stamped from it"
	switch field {
	case "outputValues":
		what = "downstream steps get no last good outputs from it while the step does not succeed"
	case "provenance":
		what = "the step's input values are not shown, and its sets' ends are not counted in the lead time metrics"
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
