package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRewriteTags(t *testing.T) {
	up := func(expr string) string { return strings.ToUpper(expr) }
	cases := map[string]string{
		"no tags":                           "no tags",
		"$(a.b)$":                           "$(A.B)$",
		"x-$(a)$-y-$(b.c)$":                 "x-$(A)$-y-$(B.C)$",
		"open $(a without close":            "open $(a without close",
		"$(a)$ then $(unclosed":             "$(A)$ then $(unclosed",
		"tag runs to the first $(a)$b)$":    "tag runs to the first $(A)$b)$",
		"$(workload.metadata.labels['x'])$": "$(WORKLOAD.METADATA.LABELS['X'])$",
	}
	for in, want := range cases {
		assert.Equal(t, want, RewriteTags(in, up), in)
	}
}
