// Package netguard decides which addresses Kontinue may connect to on
// behalf of what users wrote (a helm template's chart URL, a notification
// Provider's address): not the cluster's internal services, nor a cloud
// metadata endpoint, with the controller's network position. Addresses
// are checked after name resolution, at dial time, so that a name cannot
// resolve to a public address for the check and a private one for the
// connection.
package netguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"
)

// nonPublic are address ranges that are not public, beyond what net.IP's
// predicates cover.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (carrier NAT, often cluster networks)
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("64:ff9b::/96"),  // NAT64 (reaches IPv4, private ones included)
}

// Public reports whether ip is a public address: not loopback, private,
// link-local (cloud metadata endpoints: 169.254.169.254, fd00:ec2::254 is
// private), unspecified, multicast or one of nonPublic.
func Public(ip net.IP) bool {
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return false
	}
	a = a.Unmap()
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Metadata reports whether ip is never to be dialed, whatever the
// options: link-local (where clouds serve instance metadata and
// credentials), unspecified or multicast.
func Metadata(ip net.IP) bool {
	return ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.Equal(net.ParseIP("fd00:ec2::254"))
}

// RefusedError is a connection refused by a Guard: not transient, the
// address must change.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

// Guard checks the addresses a dial resolves to.
type Guard struct {
	// AllowPrivate allows loopback and private addresses (the platform
	// team's choice; tests' local servers). Metadata addresses and Deny
	// stay refused.
	AllowPrivate bool
	// Deny are host:port addresses always refused (the cluster's API
	// server), compared after resolution.
	Deny []string
	// Why ends the refusal's message: how the platform team would allow
	// private addresses.
	Why string
}

// Check says why ip:port may not be dialed, or nil.
func (g Guard) Check(host string, ip net.IP, port string) error {
	for _, d := range g.Deny {
		dh, dp, err := net.SplitHostPort(d)
		if err != nil || dp != port {
			continue
		}
		if dip := net.ParseIP(dh); dip != nil && dip.Equal(ip) {
			return &RefusedError{fmt.Sprintf("host [%s] is at %s, the cluster's API server: refused", host, net.JoinHostPort(ip.String(), port))}
		}
	}
	if Metadata(ip) {
		return &RefusedError{fmt.Sprintf("host [%s] is at %s, a link-local or metadata address: refused", host, ip)}
	}
	if !g.AllowPrivate && !Public(ip) {
		return &RefusedError{fmt.Sprintf("host [%s] is at %s, a loopback, private or link-local address: refused%s", host, ip, g.Why)}
	}
	return nil
}

// ResolveDeny resolves the hosts of host:port addresses (the API server's
// URL host) to IP:port ones for Deny; names that do not resolve are left.
func ResolveDeny(ctx context.Context, addrs ...string) []string {
	var out []string
	for _, a := range addrs {
		h, p, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			out = append(out, net.JoinHostPort(ip.String(), p))
			continue
		}
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, h)
		if err != nil {
			continue
		}
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip.IP.String(), p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckHost says why host:port would not be dialed: the refusal when
// every address host resolves to is refused, else nil (also when host
// does not resolve: the dial will say). A check ahead of the dial, for a
// status; the dial checks again.
func (g Guard) CheckHost(ctx context.Context, host, port string) error {
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	var last error
	for _, ip := range ips {
		if last = g.Check(host, ip, port); last == nil {
			return nil
		}
	}
	return last
}

// DialContext dials as dialer does, to the first address host resolves
// to that the guard allows.
func (g Guard) DialContext(dialer *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dialer == nil {
		dialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, err
		}
		var last error
		for _, ip := range ips {
			if err := g.Check(host, ip.IP, port); err != nil {
				last = err
				continue
			}
			c, err := dialer.DialContext(ctx, network, net.JoinHostPort(ip.IP.String(), port))
			if err == nil {
				return c, nil
			}
			last = err
		}
		if last == nil {
			last = fmt.Errorf("host [%s] has no address", host)
		}
		return nil, last
	}
}
