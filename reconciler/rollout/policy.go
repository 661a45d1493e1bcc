package rollout

// A roll-out policy compiled once, and which owners its waves admit: by a
// label selector, or by a stable bucket of the owner's name against a
// percentage.

import (
	"fmt"
	"hash/fnv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"kontinue.dev/kontinue/reconciler/api"
)

// Policy is a chain's spec.rollout; Wave one of its waves.
type (
	Policy = api.RolloutPolicy
	Wave   = api.RolloutWave
)

// Compiled is a validated policy.
type Compiled struct {
	waves          []compiledWave
	pauseOnFailure bool
}

type compiledWave struct {
	sel     labels.Selector // nil: a percentage
	percent int
}

// Compile validates p; nil p is no policy (nil, nil).
func Compile(p *Policy) (*Compiled, error) {
	if p == nil {
		return nil, nil
	}
	c := &Compiled{pauseOnFailure: p.PauseOnFailure == nil || *p.PauseOnFailure}
	for i, w := range p.Waves {
		switch {
		case (w.Selector == nil) == (w.Percent == nil):
			return nil, fmt.Errorf("wave [%d]: give exactly one of selector and percent", i)
		case w.Percent != nil:
			if *w.Percent < 0 || *w.Percent > 100 {
				return nil, fmt.Errorf("wave [%d]: percent %d is not within 0..100", i, *w.Percent)
			}
			c.waves = append(c.waves, compiledWave{percent: *w.Percent})
		default:
			sel, err := metav1.LabelSelectorAsSelector(w.Selector)
			if err != nil {
				return nil, fmt.Errorf("wave [%d]: %w", i, err)
			}
			c.waves = append(c.waves, compiledWave{sel: sel})
		}
	}
	if n := len(c.waves); n == 0 || c.waves[n-1].sel != nil || c.waves[n-1].percent != 100 {
		c.waves = append(c.waves, compiledWave{percent: 100})
	}
	return c, nil
}

// Waves is how many waves the policy has (the implied last one included).
func (c *Compiled) Waves() int { return len(c.waves) }

// Owner is what deciding needs of an owner.
type Owner struct {
	Namespace, Name string
	Labels          map[string]string
	// Revision is the revision its status says it rendered with ("": none).
	Revision string
	// Ready is its Ready condition's status ("True", "False", "Unknown",
	// "" none); Current is false while its status describes an older
	// generation.
	Ready   string
	Current bool
	// Deleting: it has a deletionTimestamp. Kontinue no longer reconciles
	// it (another finalizer holds it).
	Deleting bool
	// ChainReason is the reason of its SupplyChainReady (DeliveryReady)
	// condition when that is False ("" otherwise).
	ChainReason string
}

// Key names an owner in messages and lists: namespace/name.
func (o Owner) Key() string { return o.Namespace + "/" + o.Name }

// Bucket places an owner among the percentages: stable for its name, so an
// owner stays in its wave whatever the other owners do.
func Bucket(namespace, name string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace + "/" + name))
	return int(h.Sum32() % 100)
}

// Admitted reports whether one of waves 0..upTo admits o.
func (c *Compiled) Admitted(upTo int, o Owner) bool {
	b := -1
	for i := 0; i <= upTo && i < len(c.waves); i++ {
		w := c.waves[i]
		if w.sel != nil {
			if w.sel.Matches(labels.Set(o.Labels)) {
				return true
			}
			continue
		}
		if b < 0 {
			b = Bucket(o.Namespace, o.Name)
		}
		if b < w.percent {
			return true
		}
	}
	return false
}
