package robustness

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The generator is a function of the seed: the same seed is the same
// traffic, and a saved list reads back the same.
func TestGenerate(t *testing.T) {
	a, pofA := generate(7, 90*time.Second)
	b, pofB := generate(7, 90*time.Second)
	require.Equal(t, a, b)
	assert.Equal(t, pofA, pofB)
	c, _ := generate(8, 90*time.Second)
	assert.NotEqual(t, a, c)

	kinds := map[string]bool{}
	for i, o := range a {
		kinds[o.Do] = true
		if i > 0 {
			assert.LessOrEqual(t, a[i-1].At, o.At, "ops in time order")
		}
		assert.Less(t, o.At, 90*time.Second)
		assert.NotContains(t, o.String(), "\n", "one line an op")
	}
	assert.Greater(t, len(a), 60)
	for _, k := range []string{"create", "param", "tick", "squat", "edit"} {
		if k == "tick" {
			assert.True(t, strings.Contains(opsText(a), "Workload canary/canary param=tick"), "the canary ticks")
			continue
		}
		assert.True(t, kinds[k], "some %s", k)
	}

	path := filepath.Join(t.TempDir(), "ops.jsonl")
	require.NoError(t, saveOps(path, a))
	back, err := loadOps(path)
	require.NoError(t, err)
	assert.Equal(t, a, back)
}

// Over many seeds every kind of op and fault comes up.
func TestGenerateCoversEveryOp(t *testing.T) {
	kinds := map[string]int{}
	for seed := uint64(1); seed <= 40; seed++ {
		ops, _ := generate(seed, 90*time.Second)
		for _, o := range ops {
			kinds[o.Do]++
		}
	}
	for _, k := range []string{"create", "param", "commit", "sa", "label", "annotate", "delete", "squat", "release",
		"handedit", "grant", "revoke", "sadelete", "sacreate", "forge", "edit", "policy", "pause", "resume",
		"kill", "failover", "outage", "slow", "throttle", "pin", "retag", "regdown", "reghang"} {
		assert.Positive(t, kinds[k], "no %s in 40 seeds", k)
	}
}

// The lane's ops come on top of a seed's traffic: without them, a seed's
// ops are what they were before the lane (the fixed seeds stay theirs).
func TestLaneLeavesTheOtherOps(t *testing.T) {
	lanes := 0
	for seed := uint64(1); seed <= 20; seed++ {
		for _, traffic := range []time.Duration{45 * time.Second, 90 * time.Second} {
			with, pofWith := generate(seed, traffic)
			without, pofWithout := generateOps(seed, traffic, false)
			assert.Equal(t, pofWithout, pofWith)
			var rest []Op
			for _, o := range with {
				if o.Do == "pin" || strings.HasPrefix(o.Name, "run-") || strings.HasPrefix(o.Name, "hog-") || o.Kind == "template" && o.Name == "run" ||
					strings.HasPrefix(o.Name, "ver-") || o.Do == "retag" || o.Do == "regdown" || o.Do == "reghang" {
					lanes++
					continue
				}
				rest = append(rest, o)
			}
			require.Equal(t, without, rest, "seed %d, %s", seed, traffic)
		}
	}
	assert.Positive(t, lanes)
}

func TestCatalogRenders(t *testing.T) {
	for chain, ts := range chainTemplates {
		for _, n := range ts {
			assert.Contains(t, chainDocs[chain], "@P@-"+n, "chain %s names %s", chain, n)
		}
	}
	for _, n := range templateNames() {
		out := render(catalogDocs[n], "rbx", 3, false)
		assert.NotContains(t, out, "@P@")
		assert.NotContains(t, out, "@E:")
		assert.Contains(t, out, "rbx-"+n)
	}
	assert.Contains(t, render(chainDocs["main"], "rbx", 1, false), "pauseOnFailure: false")
}

// A storm ends with the traffic: every hog made is deleted at its last
// moment, so that the final checks see the namespace's render slots free.
func TestStormsEndWithTheTraffic(t *testing.T) {
	storms := 0
	for seed := uint64(1); seed <= 40; seed++ {
		traffic := 90 * time.Second
		ops, _ := generate(seed, traffic)
		last := map[string]Op{}
		for _, o := range ops {
			if strings.HasPrefix(o.Name, "hog-") {
				last[o.Tenant+"/"+o.Name] = o
			}
		}
		for k, o := range last {
			storms++
			assert.Equal(t, "delete", o.Do, "seed %d: %s's last op", seed, k)
			assert.Equal(t, traffic-time.Millisecond, o.At, "seed %d: %s", seed, k)
		}
	}
	assert.Positive(t, storms, "no storm in 40 seeds")
}
