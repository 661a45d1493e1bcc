package paths

import "strings"

// Keys returns the member names a path walks when it is nothing but
// members (`a.b['c.d']`): ok is false for a path with an index, a
// wildcard, a filter, or one outside the compiled subset. Callers that
// know the shape of a document (a schema) use it to say what an absent
// member means.
func (p *Path) Keys() (keys []string, ok bool) {
	if p.fallback != nil {
		return nil, false
	}
	for _, s := range p.steps {
		switch s.kind {
		case stepRun:
			// Keys are merged into a run only when gjson reads them
			// literally, which rules out '.' in a key.
			keys = append(keys, strings.Split(s.key, ".")...)
		case stepKey:
			keys = append(keys, s.key)
		default:
			return nil, false
		}
	}
	return keys, len(keys) > 0
}
