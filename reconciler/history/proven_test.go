package history

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestProven: a revision is known for sure only when every root is what a
// first step published.
func TestProven(t *testing.T) {
	h := hashOf("sha256:a", "sha256:b")
	for _, tt := range []struct {
		name  string
		roots []string
		want  bool
	}{
		{"a source's outputs", []string{"source@" + h}, true},
		{"two first steps", []string{"config@" + h, "source@" + h}, true},
		{"a step name with odd characters", []string{"a@b#c?d@" + h}, true},
		{"a first step that published nothing", []string{"source#3:0a1b2c3d4e5f"}, false},
		{"a short digest", []string{"x@#12345678:abc"}, false},
		{"an input traced no further", []string{"build?" + h}, false},
		{"one of two unknown", []string{"source@" + h, "build?" + h}, false},
		{"not hex", []string{"source@0a1b2c3d4e5g"}, false},
		{"too short", []string{"@0a1b2c"}, false},
		{"no roots", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := Revision{}
			for _, k := range tt.roots {
				r.Roots = append(r.Roots, Root{Key: k})
			}
			assert.Equal(t, tt.want, r.Proven())
		})
	}
}
