package stamp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// Clients are kept per account, at most max of them, the least recently
// used dropped first and made again when asked for.
func TestClientsAreBounded(t *testing.T) {
	c := NewClients(&rest.Config{Host: "https://127.0.0.1:1", QPS: -1}, 2)
	a, err := c.For("dev", "a")
	require.NoError(t, err)
	again, _ := c.For("dev", "a")
	assert.Same(t, a, again, "one client per account")
	_, _ = c.For("dev", "b")
	_, _ = c.For("dev", "a") // a is now the most recently used
	_, _ = c.For("dev", "c") // drops b
	assert.Equal(t, 2, c.Len())
	kept, _ := c.For("dev", "a")
	assert.Same(t, a, kept, "a was used recently: kept")
	_, _ = c.For("dev", "b") // made again, drops c
	assert.Equal(t, 2, c.Len())
	assert.Contains(t, c.m, "dev/b")
	assert.NotContains(t, c.m, "dev/c")
}

// Every account's client takes its requests from one budget: the base's
// rate limiter (none with a negative QPS, client-go's default rate with 0).
func TestClientsShareOneRateLimiter(t *testing.T) {
	for _, tt := range []struct {
		name    string
		qps     float32
		limited bool
	}{{"positive QPS", 20, true}, {"QPS 0: client-go's default", 0, true}, {"negative QPS: no client limit", -1, false}} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClients(&rest.Config{Host: "https://127.0.0.1:1", QPS: tt.qps, Burst: 40}, 0)
			a, b := c.configFor("dev", "a"), c.configFor("prod", "b")
			if !tt.limited {
				assert.Nil(t, a.RateLimiter)
				assert.Nil(t, b.RateLimiter)
				return
			}
			require.NotNil(t, a.RateLimiter)
			assert.Same(t, a.RateLimiter, b.RateLimiter, "one budget for every account")
			assert.Same(t, c.base.RateLimiter, a.RateLimiter, "and for Kontinue's own client made from the same config")
			assert.Equal(t, "system:serviceaccount:dev:a", a.Impersonate.UserName)
		})
	}
	own := &rest.Config{Host: "https://127.0.0.1:1", QPS: 5}
	shared := SharedRateLimiter(own)
	assert.Nil(t, own.RateLimiter, "the caller's config is not changed")
	assert.Same(t, shared.RateLimiter, SharedRateLimiter(shared).RateLimiter, "a config with a limiter keeps it")
}

// An account that does not exist gets no client: the API server would let
// Kontinue act as it while a RoleBinding names it.
func TestClientsRefuseAnAccountThatDoesNotExist(t *testing.T) {
	c := NewClients(&rest.Config{Host: "https://127.0.0.1:1", QPS: -1}, 0)
	c.Exists = func(ns, name string) bool { return name == "there" }
	_, err := c.For("dev", "there")
	require.NoError(t, err)
	_, err = c.For("dev", "gone")
	var nf *ServiceAccountNotFound
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, `failed to get service account object from api server [dev/gone]: failed to get object [dev/gone] from api server: serviceaccounts "gone" not found`, err.Error())
	assert.Equal(t, 1, c.Len(), "nothing kept for it")
}
