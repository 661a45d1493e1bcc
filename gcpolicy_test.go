package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGCPercentFor(t *testing.T) {
	for _, tt := range []struct {
		name    string
		live    uint64
		current int
		want    int
	}{
		{"small heap keeps Go's default", 40 << 20, 100, 100},
		{"large heap collects at 1.5x live", 300 << 20, 100, 50},
		{"between the marks nothing changes (large)", 100 << 20, 50, 50},
		{"between the marks nothing changes (small)", 100 << 20, 100, 100},
		{"shrunk well below: back to the default", 80 << 20, 50, 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, gcPercentFor(tt.live, tt.current))
		})
	}
}
