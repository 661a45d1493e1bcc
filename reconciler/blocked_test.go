package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestBlockerReleasesOnlyWhatTheNewsIsAbout(t *testing.T) {
	var woken []Key
	b := newBlocker(func(k Key) { woken = append(woken, k) })
	rbac := Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	disc := Key{Kind: "Runnable", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "b"}}
	gone := Key{Kind: "Workload", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "c"}}
	b.block(rbac, blockedRBAC)
	b.block(disc, blockedDiscovery)
	b.block(gone, blockedRBAC)
	b.unblockOne(gone) // reconciled without the failure meanwhile

	b.unblock(blockedRBAC)
	assert.Equal(t, []Key{rbac}, woken, "RBAC news wakes the keys blocked on RBAC, and only them")
	b.unblock(blockedRBAC)
	assert.Len(t, woken, 1, "a released key is not woken again by later news")

	b.unblock(blockedDiscovery)
	assert.Equal(t, []Key{rbac, disc}, woken)
}
