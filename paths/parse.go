package paths

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

type stepKind uint8

const (
	stepRun    stepKind = iota // keys gjson reads literally, joined by '.': one gjson.Get
	stepKey                    // one key compared literally with the member names of an object
	stepIndex                  // array element; index < 0 counts from the end
	stepAll                    // [*]
	stepFilter                 // [?(...)]
)

type step struct {
	kind   stepKind
	key    string // stepRun: gjson path; stepKey: the key; stepIndex: strconv.Itoa(index) when index >= 0
	index  int
	filter *filter
}

type cmpOp uint8

const (
	opExists cmpOp = iota
	opEq
	opNe
	opLt
	opLe
	opGt
	opGe
)

type litKind uint8

const (
	litString litKind = iota
	litNumber
	litBool
)

type literal struct {
	kind  litKind
	str   string
	num   float64
	inum  int64
	isInt bool
	bool  bool
}

type filter struct {
	sub []step // stepRun, stepKey and stepIndex only; empty is the element itself
	op  cmpOp
	lit literal
}

// maxIndex bounds array indexes written in expressions.
const maxIndex = 1 << 30

func compile(expr string) (*Path, error) {
	start, end := 0, len(expr)
	for start < end && isSpace(expr[start]) {
		start++
	}
	for end > start && isSpace(expr[end-1]) {
		end--
	}
	if start == end {
		return nil, &SyntaxError{Path: expr, Pos: start, Msg: "empty path"}
	}
	if expr[start] == '{' {
		if expr[end-1] != '}' || end-start < 2 {
			return nil, &SyntaxError{Path: expr, Pos: start, Msg: "unbalanced '{'"}
		}
		open := start
		start, end = start+1, end-1
		for start < end && isSpace(expr[start]) {
			start++
		}
		for end > start && isSpace(expr[end-1]) {
			end--
		}
		if start == end {
			return nil, &SyntaxError{Path: expr, Pos: open + 1, Msg: "empty path"}
		}
	}
	ps := parser{expr: expr, pos: start, end: end}
	raw, err := ps.parsePath()
	if err != nil {
		return nil, err
	}
	p := &Path{expr: expr, steps: merge(raw), notFound: &NotFoundError{Path: expr}}
	for _, s := range p.steps {
		if s.kind == stepAll || s.kind == stepFilter {
			p.multi = true
		}
	}
	return p, nil
}

// merge joins consecutive keys that gjson reads literally into stepRun paths.
// Keys are parsed as stepKey.
func merge(raw []step) []step {
	out := make([]step, 0, len(raw))
	for _, s := range raw {
		if s.kind == stepKey && gjsonSafe(s.key) {
			if n := len(out); n > 0 && out[n-1].kind == stepRun {
				out[n-1].key += "." + s.key
			} else {
				out = append(out, step{kind: stepRun, key: s.key})
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// gjsonSafe reports whether gjson reads key as a plain object key inside a
// path: it has no byte gjson treats specially and is not all digits (which
// gjson would apply to arrays as an index).
func gjsonSafe(key string) bool {
	if key == "" {
		return false
	}
	digits := true
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= '0' && c <= '9':
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '-', c == ':', c >= utf8.RuneSelf:
			digits = false
		default:
			return false
		}
	}
	return !digits
}

type parser struct {
	expr string
	pos  int
	end  int
}

func (p *parser) errorf(pos int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Path: p.expr, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) skipSpace() {
	for p.pos < p.end && isSpace(p.expr[p.pos]) {
		p.pos++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isKeyChar reports whether c may appear unescaped in a dotted key.
func isKeyChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	case c == '_', c == '-', c == '/', c == ':', c == '+', c == '~', c == '%':
		return true
	}
	return c >= utf8.RuneSelf
}

// describe names the byte at pos for error messages.
func (p *parser) describe(pos int) string {
	if pos >= len(p.expr) {
		return "end of path"
	}
	return fmt.Sprintf("character %q", p.expr[pos])
}

// parsePath parses the whole (top-level) path between p.pos and p.end.
func (p *parser) parsePath() ([]step, error) {
	var steps []step
	if p.expr[p.pos] == '$' {
		p.pos++
		if p.pos == p.end {
			return nil, p.errorf(p.pos, "empty path")
		}
		if c := p.expr[p.pos]; c != '.' && c != '[' {
			return nil, p.errorf(p.pos, "expected '.' or '[' after '$'")
		}
	}
	first := true
	for p.pos < p.end {
		c := p.expr[p.pos]
		switch {
		case c == '.':
			if p.pos+1 < p.end && p.expr[p.pos+1] == '.' {
				return nil, p.errorf(p.pos, "recursive descent '..' is not supported")
			}
			p.pos++
			if first && p.pos < p.end && p.expr[p.pos] == '[' {
				break // ".[0]": the leading dot is optional
			}
			s, err := p.parseKey()
			if err != nil {
				return nil, err
			}
			steps = append(steps, s)
		case c == '[':
			s, err := p.parseBracket(false)
			if err != nil {
				return nil, err
			}
			steps = append(steps, s)
		case first && (isKeyChar(c) || c == '\\'):
			s, err := p.parseKey()
			if err != nil {
				return nil, err
			}
			steps = append(steps, s)
		default:
			return nil, p.unexpected(p.pos)
		}
		first = false
	}
	if len(steps) == 0 {
		return nil, p.errorf(p.pos, "empty path")
	}
	return steps, nil
}

func (p *parser) unexpected(pos int) *SyntaxError {
	switch p.expr[pos] {
	case '(':
		return p.errorf(pos, "function calls are not supported")
	case ']':
		return p.errorf(pos, "unbalanced ']'")
	case '}':
		return p.errorf(pos, "unbalanced '}'")
	case ')':
		return p.errorf(pos, "unbalanced ')'")
	case '\'', '"':
		return p.errorf(pos, "unexpected quote (use ['...'] for keys with special characters)")
	}
	return p.errorf(pos, "unexpected %s", p.describe(pos))
}

// parseKey parses a dotted key at p.pos.
func (p *parser) parseKey() (step, error) {
	start := p.pos
	var buf []byte // only used when the key has escapes
	for p.pos < p.end {
		c := p.expr[p.pos]
		if isKeyChar(c) {
			if buf != nil {
				buf = append(buf, c)
			}
			p.pos++
			continue
		}
		if c == '\\' {
			if p.pos+1 >= p.end {
				return step{}, p.errorf(p.pos, "dangling '\\' at end of path")
			}
			if buf == nil {
				buf = append(make([]byte, 0, p.end-start), p.expr[start:p.pos]...)
			}
			buf = append(buf, p.expr[p.pos+1])
			p.pos += 2
			continue
		}
		break
	}
	if p.pos == start {
		if p.pos >= p.end {
			return step{}, p.errorf(p.pos, "expected a key after '.'")
		}
		switch p.expr[p.pos] {
		case '*':
			return step{}, p.errorf(p.pos, "wildcard '.*' is not supported, use [*]")
		case '[':
			return step{}, p.errorf(p.pos, "expected a key after '.'")
		}
		return step{}, p.unexpected(p.pos)
	}
	if p.pos < p.end && p.expr[p.pos] == '(' {
		return step{}, p.errorf(p.pos, "function calls are not supported")
	}
	key := p.expr[start:p.pos]
	if buf != nil {
		key = string(buf)
	}
	return step{kind: stepKey, key: key}, nil
}

// parseBracket parses '[' ... ']' at p.pos. In a filter's path only keys and
// indexes are allowed.
func (p *parser) parseBracket(inFilter bool) (step, error) {
	open := p.pos
	p.pos++
	p.skipSpace()
	if p.pos >= p.end {
		return step{}, p.errorf(open, "unbalanced '['")
	}
	var s step
	switch c := p.expr[p.pos]; {
	case c == '\'' || c == '"':
		key, err := p.parseString()
		if err != nil {
			return step{}, err
		}
		s = step{kind: stepKey, key: key}
	case c == '*':
		if inFilter {
			return step{}, p.errorf(p.pos, "wildcards are not supported inside a filter")
		}
		p.pos++
		s = step{kind: stepAll}
	case c == '?':
		if inFilter {
			return step{}, p.errorf(p.pos, "nested filters are not supported")
		}
		f, err := p.parseFilter(open)
		if err != nil {
			return step{}, err
		}
		s = step{kind: stepFilter, filter: f}
	case c == '-' || (c >= '0' && c <= '9'):
		n, err := p.parseIndex()
		if err != nil {
			return step{}, err
		}
		s = step{kind: stepIndex, index: n}
		if n >= 0 {
			s.key = strconv.Itoa(n)
		}
	case c == ']':
		return step{}, p.errorf(p.pos, "empty brackets")
	case c == ':':
		return step{}, p.errorf(p.pos, "slices are not supported")
	case c == '[':
		return step{}, p.errorf(p.pos, "unexpected '[' inside brackets")
	default:
		return step{}, p.errorf(p.pos, "unexpected %s inside brackets", p.describe(p.pos))
	}
	p.skipSpace()
	if p.pos >= p.end {
		return step{}, p.errorf(open, "unbalanced '['")
	}
	switch p.expr[p.pos] {
	case ']':
		p.pos++
		return s, nil
	case ':':
		return step{}, p.errorf(p.pos, "slices are not supported")
	case ',':
		return step{}, p.errorf(p.pos, "unions are not supported")
	}
	return step{}, p.errorf(p.pos, "expected ']'")
}

func (p *parser) parseIndex() (int, error) {
	start := p.pos
	neg := false
	if p.expr[p.pos] == '-' {
		neg = true
		p.pos++
	}
	digits := p.pos
	n := 0
	for p.pos < p.end && p.expr[p.pos] >= '0' && p.expr[p.pos] <= '9' {
		n = n*10 + int(p.expr[p.pos]-'0')
		if n > maxIndex {
			return 0, p.errorf(start, "array index out of range")
		}
		p.pos++
	}
	if p.pos == digits {
		return 0, p.errorf(p.pos, "expected digits after '-'")
	}
	if neg {
		n = -n
	}
	return n, nil
}

// parseString parses a single or double quoted string at p.pos.
func (p *parser) parseString() (string, error) {
	open := p.pos
	quote := p.expr[open]
	p.pos++
	start := p.pos
	var buf []byte
	for p.pos < p.end {
		c := p.expr[p.pos]
		if c == quote {
			s := p.expr[start:p.pos]
			if buf != nil {
				s = string(buf)
			}
			p.pos++
			return s, nil
		}
		if c != '\\' {
			if buf != nil {
				buf = append(buf, c)
			}
			p.pos++
			continue
		}
		if buf == nil {
			buf = append(make([]byte, 0, p.end-start), p.expr[start:p.pos]...)
		}
		esc := p.pos
		p.pos++
		if p.pos >= p.end {
			break
		}
		switch e := p.expr[p.pos]; e {
		case '\\', '\'', '"', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4(p.pos + 1)
			if !ok {
				return "", p.errorf(esc, "invalid \\u escape")
			}
			p.pos += 4
			if r >= 0xD800 && r < 0xDC00 && p.pos+6 < p.end && p.expr[p.pos+1] == '\\' && p.expr[p.pos+2] == 'u' {
				if r2, ok := p.hex4(p.pos + 3); ok && r2 >= 0xDC00 && r2 < 0xE000 {
					r = (r-0xD800)<<10 + (r2 - 0xDC00) + 0x10000
					p.pos += 6
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.errorf(esc, "invalid escape '\\%c'", e)
		}
		p.pos++
	}
	return "", p.errorf(open, "unterminated string")
}

func (p *parser) hex4(at int) (rune, bool) {
	if at+4 > p.end {
		return 0, false
	}
	n, err := strconv.ParseUint(p.expr[at:at+4], 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}

// parseFilter parses "?(@... op literal)" with p.pos on '?'; open is the '['.
func (p *parser) parseFilter(open int) (*filter, error) {
	p.pos++
	if p.pos >= p.end {
		return nil, p.errorf(open, "unbalanced '['")
	}
	if p.expr[p.pos] != '(' {
		return nil, p.errorf(p.pos, "expected '(' after '?'")
	}
	paren := p.pos
	p.pos++
	p.skipSpace()
	if p.pos >= p.end {
		return nil, p.errorf(paren, "unbalanced '('")
	}
	if p.expr[p.pos] != '@' {
		return nil, p.errorf(p.pos, "a filter must start with '@'")
	}
	p.pos++
	var sub []step
	for p.pos < p.end {
		c := p.expr[p.pos]
		if c == '.' {
			if p.pos+1 < p.end && p.expr[p.pos+1] == '.' {
				return nil, p.errorf(p.pos, "recursive descent '..' is not supported")
			}
			p.pos++
			s, err := p.parseKey()
			if err != nil {
				return nil, err
			}
			sub = append(sub, s)
			continue
		}
		if c == '[' {
			s, err := p.parseBracket(true)
			if err != nil {
				return nil, err
			}
			sub = append(sub, s)
			continue
		}
		break
	}
	f := &filter{sub: merge(sub)}
	p.skipSpace()
	if p.pos >= p.end {
		return nil, p.errorf(paren, "unbalanced '('")
	}
	if p.expr[p.pos] != ')' {
		opPos := p.pos
		op, err := p.parseOp()
		if err != nil {
			return nil, err
		}
		f.op = op
		p.skipSpace()
		if p.pos >= p.end {
			return nil, p.errorf(paren, "unbalanced '('")
		}
		litPos := p.pos
		lit, err := p.parseLiteral()
		if err != nil {
			return nil, err
		}
		if lit.kind == litBool && op != opEq && op != opNe {
			return nil, p.errorf(opPos, "operator %s needs a string or number", p.expr[opPos:litPos])
		}
		f.lit = lit
		p.skipSpace()
		if p.pos >= p.end {
			return nil, p.errorf(paren, "unbalanced '('")
		}
		switch c := p.expr[p.pos]; {
		case c == ')':
		case c == '&' || c == '|':
			return nil, p.errorf(p.pos, "compound filters are not supported")
		default:
			return nil, p.errorf(p.pos, "expected ')'")
		}
	}
	p.pos++ // ')'
	return f, nil
}

func (p *parser) parseOp() (cmpOp, error) {
	rest := p.expr[p.pos:p.end]
	for _, o := range [...]struct {
		s  string
		op cmpOp
	}{{"==", opEq}, {"!=", opNe}, {"<=", opLe}, {">=", opGe}, {"<", opLt}, {">", opGt}} {
		if strings.HasPrefix(rest, o.s) {
			p.pos += len(o.s)
			return o.op, nil
		}
	}
	switch rest[0] {
	case '=':
		return 0, p.errorf(p.pos, "use '==' to compare")
	case '&', '|':
		return 0, p.errorf(p.pos, "compound filters are not supported")
	case '(':
		return 0, p.errorf(p.pos, "function calls are not supported")
	}
	return 0, p.errorf(p.pos, "expected a comparison operator or ')', found %s", p.describe(p.pos))
}

func (p *parser) parseLiteral() (literal, error) {
	c := p.expr[p.pos]
	switch {
	case c == '\'' || c == '"':
		s, err := p.parseString()
		if err != nil {
			return literal{}, err
		}
		return literal{kind: litString, str: s}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.pos
		for p.pos < p.end {
			c := p.expr[p.pos]
			if (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
				p.pos++
				continue
			}
			break
		}
		tok := p.expr[start:p.pos]
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			return literal{}, p.errorf(start, "invalid number %q", tok)
		}
		lit := literal{kind: litNumber, num: f}
		if i, err := strconv.ParseInt(tok, 10, 64); err == nil {
			lit.isInt, lit.inum = true, i
		}
		return lit, nil
	case c == '@':
		return literal{}, p.errorf(p.pos, "comparing two paths is not supported")
	}
	start := p.pos
	for p.pos < p.end && isKeyChar(p.expr[p.pos]) {
		p.pos++
	}
	switch word := p.expr[start:p.pos]; word {
	case "true", "false":
		return literal{kind: litBool, bool: word == "true"}, nil
	case "null":
		return literal{}, p.errorf(start, "null literals are not supported")
	case "":
		return literal{}, p.errorf(start, "expected a string, number, true or false, found %s", p.describe(start))
	default:
		return literal{}, p.errorf(start, "unknown literal %q (strings must be quoted)", word)
	}
}
