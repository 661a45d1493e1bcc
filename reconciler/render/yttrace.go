//go:build race

package render

// The race detector's shadow memory does not fit the child's memory limit.
const raceEnabled = true
