package render

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"kontinue.dev/kontinue/paths"
)

// The $(…)$ tags of the simple engine: a string leaf compiled once
// to its literal text and tags, and cached by its text.

// A compiled string leaf: literal text and tags.
type leaf struct {
	segs      []segment
	whole     bool   // exactly one tag and nothing else: keep the value's type
	errMsg    string // a syntax error, cached like a success
	errDetail string
	errCause  error
}

type segment struct {
	lit  string      // literal text, when path is nil
	tag  string      // the tag as written, `$(…)$`
	path *paths.Path // nil for literal text
}

// nextTag finds the first tag of s at or after i: start is the index of
// its "$(" (-1: none), end the index of the ')' of its ")$" (-1: the tag is
// not closed). A tag runs to the first ")$".
func nextTag(s string, i int) (start, end int) {
	j := strings.Index(s[i:], "$(")
	if j < 0 {
		return -1, -1
	}
	start = i + j
	rel := strings.Index(s[start+2:], ")$")
	if rel < 0 {
		return start, -1
	}
	return start, start + 2 + rel
}

// RewriteTags replaces every closed tag $(expr)$ of s with $(f(expr))$ and
// keeps everything else; it finds tags exactly as the $(…)$ engine does.
func RewriteTags(s string, f func(expr string) string) string {
	var b strings.Builder
	i := 0
	for {
		start, end := nextTag(s, i)
		if start < 0 || end < 0 {
			break
		}
		b.WriteString(s[i:start])
		b.WriteString("$(" + f(s[start+2:end]) + ")$")
		i = end + 2
	}
	if i == 0 {
		return s
	}
	b.WriteString(s[i:])
	return b.String()
}

// compileLeaf splits s into literal text and tags. A tag runs from `$(` to
// the first `)$`, as in Cartographer; `$(` without a closing `)$`, or with
// another `$(` before it, is an error rather than silently kept text, so a
// misspelt tag is never stamped literally. The scan is linear in len(s).
func compileLeaf(s string) *leaf {
	var segs []segment
	i, litStart := 0, 0
	for {
		start, end := nextTag(s, i)
		if start < 0 {
			break
		}
		if end < 0 {
			return syntaxLeaf(fmt.Sprintf("unterminated tag at position %d", start), `"$(" has no closing ")$"`, nil)
		}
		expr := s[start+2 : end]
		if k := strings.Index(expr, "$("); k >= 0 {
			return syntaxLeaf(fmt.Sprintf("unterminated tag at position %d", start), fmt.Sprintf(`a new "$(" at position %d begins before it is closed`, start+2+k), nil)
		}
		tag := s[start : end+2]
		if strings.TrimSpace(expr) == "" {
			return syntaxLeaf(fmt.Sprintf("empty tag %s at position %d", tag, start), "", nil)
		}
		p, err := paths.Compile(expr)
		if err != nil {
			return syntaxLeaf(fmt.Sprintf("invalid tag %s at position %d", tag, start), "", err)
		}
		if start > litStart {
			segs = append(segs, segment{lit: s[litStart:start]})
		}
		segs = append(segs, segment{tag: tag, path: p})
		i = end + 2
		litStart = i
	}
	if litStart < len(s) {
		segs = append(segs, segment{lit: s[litStart:]})
	}
	return &leaf{segs: segs, whole: len(segs) == 1 && segs[0].path != nil}
}

func syntaxLeaf(msg, detail string, err error) *leaf {
	return &leaf{errMsg: msg, errDetail: detail, errCause: err}
}

// Compiled leaves are cached by their text: templates are shared, so the
// same strings come back on every reconcile. Only strings with a tag are
// cached, and the cache is emptied when it grows past its bounds, so
// templates that change over time cannot grow it forever.
const (
	maxCachedLeaves     = 8192
	maxCachedLeafBytes  = 8 << 20
	maxCacheableLeafLen = 64 << 10
)

var (
	leafCache      sync.Map // string -> *leaf
	leafCacheCount atomic.Int64
	leafCacheBytes atomic.Int64
)

func compiledLeaf(s string) *leaf {
	if v, ok := leafCache.Load(s); ok {
		return v.(*leaf)
	}
	l := compileLeaf(s)
	if len(s) > maxCacheableLeafLen {
		return l
	}
	if leafCacheCount.Add(1) > maxCachedLeaves || leafCacheBytes.Add(int64(len(s))) > maxCachedLeafBytes {
		leafCache.Clear()
		leafCacheCount.Store(1)
		leafCacheBytes.Store(int64(len(s)))
	}
	if _, loaded := leafCache.LoadOrStore(s, l); loaded {
		leafCacheCount.Add(-1)
		leafCacheBytes.Add(-int64(len(s)))
	}
	return l
}
