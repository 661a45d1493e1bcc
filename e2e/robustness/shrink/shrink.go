// Package shrink minimizes a failing list of operations by delta
// debugging (Zeller and Hildebrandt's ddmin): it removes chunks of the
// list, ever smaller, for as long as what is left still fails.
package shrink

// Minimize returns a sublist of ops (in their order) that still fails,
// from which no single chunk of the last granularity tried can be removed.
// fails runs a candidate list and says whether it still fails; it is
// called at most budget times (the list found so far is returned when the
// budget is spent). ops is assumed to fail.
func Minimize[T any](ops []T, fails func([]T) bool, budget int) []T {
	runs := 0
	try := func(c []T) bool {
		if runs >= budget {
			return false
		}
		runs++
		return fails(c)
	}
	n := 2
	for len(ops) >= 2 && runs < budget {
		chunks := split(ops, n)
		reduced := false
		for _, c := range chunks {
			if try(c) {
				ops, n, reduced = c, 2, true
				break
			}
		}
		if !reduced && n > 2 {
			for i := range chunks {
				c := complement(chunks, i)
				if try(c) {
					ops, n, reduced = c, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(ops) {
				break
			}
			n = min(2*n, len(ops))
		}
	}
	return ops
}

// split cuts ops into n chunks of nearly equal length.
func split[T any](ops []T, n int) [][]T {
	var out [][]T
	start := 0
	for i := range n {
		end := start + (len(ops)-start)/(n-i)
		if end > start {
			out = append(out, ops[start:end:end])
		}
		start = end
	}
	return out
}

// complement is every chunk but the i-th, in order.
func complement[T any](chunks [][]T, i int) []T {
	var out []T
	for j, c := range chunks {
		if j != i {
			out = append(out, c...)
		}
	}
	return out
}
