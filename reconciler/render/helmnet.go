package render

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"kontinue.dev/kontinue/reconciler/netguard"
)

// HelmOptions bound what a template author can make Kontinue fetch with a
// helm template's chart source (the platform team sets them, as flags).
type HelmOptions struct {
	// AllowPrivateNetworks lets charts come from loopback, private,
	// link-local and other non-public addresses (refused by default: a
	// chart URL must not reach the cluster's internal services or a cloud
	// metadata endpoint with the controller's network position).
	AllowPrivateNetworks bool
	// AllowHTTP lets chart repositories, their index entries and token
	// realms use plain http (by default: https and oci only).
	AllowHTTP bool
}

// HelmWith returns the helm engine with options.
func HelmWith(o HelmOptions) Engine { return newHelmEngineWith(o, nil) }

// maxRedirects bounds the redirects of one download.
const maxRedirects = 5

// publicIP reports whether ip is an address charts may be fetched from
// (netguard.Public, shared with notification providers).
func publicIP(ip net.IP) bool { return netguard.Public(ip) }

// refusedError is a download refused by the bounds: not transient, the
// template must change (or the platform team's flags).
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func refuse(format string, a ...any) error { return &refusedError{fmt.Sprintf(format, a...)} }

type crossHostKey struct{}

// allowCrossHost marks a download whose content is verified by its digest
// (an OCI blob): registries redirect those to storage on another host.
func allowCrossHost(ctx context.Context) context.Context {
	return context.WithValue(ctx, crossHostKey{}, true)
}

// helmHTTPClient is the client of chart downloads: addresses are checked
// after name resolution, at dial time (a name cannot resolve to a public
// address for the check and a private one for the connection), redirects
// stay on the same host and scheme bounds, credentials never follow a
// redirect to another host.
func helmHTTPClient(o HelmOptions) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if o.AllowPrivateNetworks || isProxy(tr, host) {
			return dialer.DialContext(ctx, network, addr)
		}
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, err
		}
		var last error
		for _, ip := range ips {
			if !publicIP(ip.IP) {
				last = refuse("host [%s] is at %s, a loopback, private or link-local address: charts are fetched only from public addresses unless Kontinue runs with --helm-allow-private-networks", host, ip.IP)
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
	return &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return refuse("more than %d redirects", maxRedirects)
		}
		if err := checkScheme(req.URL.Scheme, o); err != nil {
			return err
		}
		first := via[0].URL
		if req.URL.Host != first.Host {
			if ok, _ := req.Context().Value(crossHostKey{}).(bool); !ok {
				return refuse("[%s] redirects to another host [%s]: chart downloads follow redirects only on the same host", first.Redacted(), req.URL.Host)
			}
			// Content checked by digest: follow, without credentials.
			req.Header.Del("Authorization")
			req.Header.Del("Cookie")
		}
		return nil
	}}
}

// isProxy reports whether host is the proxy of the transport's environment
// (HTTPS_PROXY, ...): the platform team's choice, dialed as it is.
func isProxy(tr *http.Transport, host string) bool {
	if tr.Proxy == nil {
		return false
	}
	for _, scheme := range []string{"https", "http"} {
		req, _ := http.NewRequest(http.MethodGet, scheme+"://example.com/", nil)
		if u, err := tr.Proxy(req); err == nil && u != nil && u.Hostname() == host {
			return true
		}
	}
	return false
}

// checkScheme refuses what is neither https nor (with AllowHTTP) http.
func checkScheme(scheme string, o HelmOptions) error {
	switch {
	case scheme == "https":
		return nil
	case scheme == "http" && o.AllowHTTP:
		return nil
	case scheme == "http":
		return refuse("plain http is refused: use https (or run Kontinue with --helm-allow-http)")
	}
	return refuse("scheme [%s] is refused: use https", scheme)
}

func isRefused(err error) (*refusedError, bool) {
	var r *refusedError
	return r, errors.As(err, &r)
}
