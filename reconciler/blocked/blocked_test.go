package blocked

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBlockerReleasesOnlyWhatTheNewsIsAbout(t *testing.T) {
	var woken []string
	b := New(func(k string) { woken = append(woken, k) })
	rbac, disc, gone := "Workload/ns/a", "Runnable/ns/b", "Workload/ns/c"
	b.Block(rbac, RBAC)
	b.Block(disc, Discovery)
	b.Block(gone, RBAC)
	b.Unblock(gone) // reconciled without the failure meanwhile

	b.News(RBAC)
	assert.Equal(t, []string{rbac}, woken, "RBAC news wakes the keys blocked on RBAC, and only them")
	b.News(RBAC)
	assert.Len(t, woken, 1, "a released key is not woken again by later news")

	b.News(Discovery)
	assert.Equal(t, []string{rbac, disc}, woken)
}
