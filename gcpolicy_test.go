package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGCPercent(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		want int
		set  bool
	}{
		{"nothing set: 1.5x live", nil, 50, true},
		{"GOGC set: the operator's", map[string]string{"GOGC": "200"}, 0, false},
		{"GOMEMLIMIT set: the operator's", map[string]string{"GOMEMLIMIT": "400MiB"}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, set := gcPercent(func(k string) string { return tt.env[k] })
			assert.Equal(t, tt.set, set)
			assert.Equal(t, tt.want, p)
		})
	}
}
