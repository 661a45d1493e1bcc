package netguard

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheck(t *testing.T) {
	deny := Guard{Deny: ResolveDeny(t.Context(), "127.0.0.1:6443", "[::1]:6443", "not-a-host-port")}
	for _, c := range []struct {
		ip, port        string
		strict, lenient bool // allowed without, with AllowPrivate
	}{
		{"140.82.112.3", "443", true, true},
		{"2606:4700::1111", "443", true, true},
		{"127.0.0.1", "8080", false, true},
		{"10.96.0.1", "443", false, true},       // a Service's cluster IP
		{"100.64.1.1", "443", false, true},      // carrier NAT, often pods
		{"64:ff9b::a00:1", "443", false, true},  // NAT64 of 10.0.0.1
		{"169.254.169.254", "80", false, false}, // cloud metadata
		{"fe80::1", "80", false, false},
		{"fd00:ec2::254", "80", false, false}, // AWS metadata over IPv6
		{"0.0.0.0", "80", false, false},
		{"127.0.0.1", "6443", false, false}, // the API server
		{"::1", "6443", false, false},
	} {
		g := deny
		assert.Equal(t, c.strict, g.Check("h", net.ParseIP(c.ip), c.port) == nil, "%s:%s", c.ip, c.port)
		g.AllowPrivate = true
		assert.Equal(t, c.lenient, g.Check("h", net.ParseIP(c.ip), c.port) == nil, "%s:%s allowing private", c.ip, c.port)
	}
}

// CheckHost refuses a host whose every address is refused; a name that
// does not resolve is left to the dial.
func TestCheckHost(t *testing.T) {
	g := Guard{AllowPrivate: true, Deny: []string{"127.0.0.1:6443"}}
	var refused *RefusedError
	assert.ErrorAs(t, g.CheckHost(t.Context(), "169.254.169.254", "80"), &refused)
	assert.ErrorAs(t, g.CheckHost(t.Context(), "127.0.0.1", "6443"), &refused)
	assert.NoError(t, g.CheckHost(t.Context(), "127.0.0.1", "8080"))
	assert.NoError(t, g.CheckHost(t.Context(), "localhost", "8080"))
	g.AllowPrivate = false
	assert.ErrorAs(t, g.CheckHost(t.Context(), "localhost", "8080"), &refused)
	assert.NoError(t, g.CheckHost(t.Context(), "no-such-host.invalid", "443"), "the dial says")
}
