package paths

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// rootOf returns the document as a gjson value without scanning it. Only
// objects and arrays can have something at a path, so anything else is
// returned as "not found".
func rootOf(doc string) gjson.Result {
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		if c <= ' ' {
			continue
		}
		if c == '{' || c == '[' {
			return gjson.Result{Type: gjson.JSON, Raw: doc[i:]}
		}
		break
	}
	return gjson.Result{}
}

// evalSingle applies steps that yield at most one value (no [*] or filter).
func evalSingle(steps []step, cur gjson.Result) (gjson.Result, bool) {
	for i := range steps {
		cur = steps[i].apply(cur)
		if !cur.Exists() {
			return cur, false
		}
	}
	return cur, cur.Exists()
}

// apply evaluates a single-valued step; a missing value is the zero Result.
func (s *step) apply(cur gjson.Result) gjson.Result {
	switch s.kind {
	case stepRun:
		if cur.Type != gjson.JSON {
			return gjson.Result{}
		}
		return gjson.Get(cur.Raw, s.key)
	case stepKey:
		return member(cur, s.key)
	case stepIndex:
		if !cur.IsArray() {
			return gjson.Result{}
		}
		if s.index >= 0 {
			return gjson.Get(cur.Raw, s.key)
		}
		n := 0
		cur.ForEach(func(_, _ gjson.Result) bool {
			n++
			return true
		})
		if n+s.index < 0 {
			return gjson.Result{}
		}
		return element(cur, n+s.index)
	}
	return gjson.Result{}
}

// member returns the first member of the object obj named key, comparing
// names literally.
func member(obj gjson.Result, key string) (found gjson.Result) {
	if !obj.IsObject() {
		return found
	}
	obj.ForEach(func(k, v gjson.Result) bool {
		if k.Str == key {
			found = v
			return false
		}
		return true
	})
	return found
}

// element returns element i of the array arr.
func element(arr gjson.Result, i int) (found gjson.Result) {
	n := 0
	arr.ForEach(func(_, v gjson.Result) bool {
		if n == i {
			found = v
			return false
		}
		n++
		return true
	})
	return found
}

// accum counts the values a multi-valued path yields and keeps the first.
type accum struct {
	count int
	first gjson.Result
	limit int // stop after this many values; 0 counts them all
}

func (a *accum) more() bool { return a.limit == 0 || a.count < a.limit }

// walk evaluates steps on cur, adding every value it yields to acc.
func walk(steps []step, cur gjson.Result, acc *accum) {
	for i := range steps {
		s := &steps[i]
		if s.kind == stepAll || s.kind == stepFilter {
			if !cur.IsArray() {
				return
			}
			rest := steps[i+1:]
			cur.ForEach(func(_, v gjson.Result) bool {
				if s.kind == stepAll || s.filter.match(v) {
					walk(rest, v, acc)
				}
				return acc.more()
			})
			return
		}
		cur = s.apply(cur)
		if !cur.Exists() {
			return
		}
	}
	if acc.count == 0 {
		acc.first = cur
	}
	acc.count++
}

// match reports whether the array element elem passes the filter.
func (f *filter) match(elem gjson.Result) bool {
	v, ok := evalSingle(f.sub, elem)
	if !ok {
		return false
	}
	switch {
	case f.op == opExists:
		return true
	case f.lit.kind == litString:
		return v.Type == gjson.String && holds(f.op, strings.Compare(v.Str, f.lit.str))
	case f.lit.kind == litBool:
		if v.Type != gjson.True && v.Type != gjson.False {
			return false
		}
		return ((v.Type == gjson.True) == f.lit.bool) == (f.op == opEq)
	default: // litNumber
		return v.Type == gjson.Number && holds(f.op, compareNumber(v, &f.lit))
	}
}

// compareNumber compares the JSON number v with a literal: exactly when both
// are integers that fit an int64, as float64 otherwise.
func compareNumber(v gjson.Result, lit *literal) int {
	if lit.isInt && isIntLiteral(v.Raw) {
		if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
			switch {
			case n < lit.inum:
				return -1
			case n > lit.inum:
				return 1
			}
			return 0
		}
	}
	switch {
	case v.Num < lit.num:
		return -1
	case v.Num > lit.num:
		return 1
	}
	return 0
}

func isIntLiteral(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func holds(op cmpOp, c int) bool {
	switch op {
	case opEq:
		return c == 0
	case opNe:
		return c != 0
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	case opGt:
		return c > 0
	case opGe:
		return c >= 0
	}
	return false
}
