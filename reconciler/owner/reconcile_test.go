package owner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLookAgain(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		steps                   time.Duration
		blockerWait, sweepLater bool
		want                    time.Duration
		wait                    bool
	}{
		{"nothing", 0, false, false, 0, false},
		{"a step's timer", 30 * time.Second, false, false, 30 * time.Second, false},
		{"a blocker's watch", blockerSync, true, false, blockerSync, true},
		{"a cache to sweep, nothing else", 0, false, true, sweepRetry, true},
		{"a cache to sweep before a later timer", time.Minute, false, true, sweepRetry, true},
		{"a sooner timer wins over the sweep, and stays a timer", 200 * time.Millisecond, false, true, 200 * time.Millisecond, false},
		{"a blocker's watch is sooner than the sweep", blockerSync, true, true, blockerSync, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, wait := lookAgain(tc.steps, tc.blockerWait, tc.sweepLater)
			assert.Equal(t, tc.want, d)
			assert.Equal(t, tc.wait, wait)
		})
	}
}
