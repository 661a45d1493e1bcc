package spans

// OpenTelemetry's standard exporter environment (the specification's
// "OTLP Exporter Configuration" and "SDK environment variables"), read so
// that Kontinue plugs into a collector as an SDK-based exporter would:
// the same variables, the same precedence (the signal's own variable over
// the generic one), the same defaults.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config is where and how spans are sent.
type Config struct {
	// URL is the traces endpoint, whole (…/v1/traces).
	URL string
	// Headers are sent with every request (…_HEADERS: an API key).
	Headers http.Header
	// Timeout bounds one request (…_TIMEOUT; 10 s).
	Timeout time.Duration
	// Gzip compresses request bodies (…_COMPRESSION=gzip).
	Gzip bool
	// Protobuf sends the binary encoding (…_PROTOCOL=http/protobuf);
	// else JSON (http/json).
	Protobuf bool
	// Resource are the resource's attributes, service.name first.
	Resource [][2]string
	// TLS, when set, is the client's TLS configuration (…_CERTIFICATE,
	// …_CLIENT_CERTIFICATE, …_CLIENT_KEY).
	TLS *tls.Config
}

// The variables read; each generic OTEL_EXPORTER_OTLP_X has its
// OTEL_EXPORTER_OTLP_TRACES_X, which wins.
const (
	envPrefix       = "OTEL_EXPORTER_OTLP_"
	envTracesPrefix = "OTEL_EXPORTER_OTLP_TRACES_"
)

// ConfigFromEnv is the exporter's configuration: the flag's endpoint
// (flagEndpoint, the path /v1/traces added when it has none, as before),
// else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended to its path; the
// rest from the environment. on is false when no endpoint is set, or
// OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none (the flag still
// wins over those: it is the operator's explicit word).
func ConfigFromEnv(flagEndpoint string, getenv func(string) string) (c Config, on bool, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	get := func(name string) (string, string) {
		if v := strings.TrimSpace(getenv(envTracesPrefix + name)); v != "" {
			return v, envTracesPrefix + name
		}
		return strings.TrimSpace(getenv(envPrefix + name)), envPrefix + name
	}
	switch {
	case flagEndpoint != "":
		if c.URL, err = endpointURL(flagEndpoint, false); err != nil {
			return c, false, fmt.Errorf("--otlp-traces-endpoint: %w", err)
		}
	case strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true"),
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none"):
		return c, false, nil
	case strings.TrimSpace(getenv(envTracesPrefix+"ENDPOINT")) != "":
		if c.URL, err = endpointURL(getenv(envTracesPrefix+"ENDPOINT"), false); err != nil {
			return c, false, fmt.Errorf("%sENDPOINT: %w", envTracesPrefix, err)
		}
	case strings.TrimSpace(getenv(envPrefix+"ENDPOINT")) != "":
		if c.URL, err = endpointURL(getenv(envPrefix+"ENDPOINT"), true); err != nil {
			return c, false, fmt.Errorf("%sENDPOINT: %w", envPrefix, err)
		}
	default:
		return c, false, nil
	}
	c.Headers = http.Header{}
	// The generic headers, then the signal's over them, key by key.
	for _, name := range []string{envPrefix + "HEADERS", envTracesPrefix + "HEADERS"} {
		kv, err := keyValues(getenv(name))
		if err != nil {
			return c, false, fmt.Errorf("%s: %w", name, err)
		}
		for _, p := range kv {
			c.Headers.Set(p[0], p[1])
		}
	}
	c.Timeout = 10 * time.Second
	if v, name := get("TIMEOUT"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return c, false, fmt.Errorf("%s: want a positive number of milliseconds, got %q", name, v)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	switch v, name := get("COMPRESSION"); strings.ToLower(v) {
	case "", "none":
	case "gzip":
		c.Gzip = true
	default:
		return c, false, fmt.Errorf("%s: want gzip or none, got %q", name, v)
	}
	switch v, name := get("PROTOCOL"); strings.ToLower(v) {
	case "", "http/json":
		// JSON stays the default: what Kontinue sent before, which every
		// collector's OTLP/HTTP receiver takes.
	case "http/protobuf":
		c.Protobuf = true
	default:
		return c, false, fmt.Errorf("%s: Kontinue sends OTLP over HTTP: want http/protobuf or http/json, got %q", name, v)
	}
	if c.Resource, err = resourceOf(getenv); err != nil {
		return c, false, err
	}
	if c.TLS, err = tlsOf(get); err != nil {
		return c, false, err
	}
	return c, true, nil
}

// endpointURL checks an endpoint; signal appends /v1/traces to its path
// (the generic endpoint is a base URL), else /v1/traces is added only
// when it has no path (the flag's rule, and harmless for a traces URL).
func endpointURL(s string, signal bool) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("want an http or https URL, got %q", s)
	}
	switch {
	case signal:
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	case u.Path == "" || u.Path == "/":
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// keyValues reads the W3C Baggage-like lists the specification uses for
// headers and resource attributes: key=value pairs separated by commas,
// values percent-decoded, blanks around them trimmed.
func keyValues(s string) ([][2]string, error) {
	var out [][2]string
	for _, item := range strings.Split(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("want key=value pairs separated by commas, got %q", item)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", k, err)
		}
		out = append(out, [2]string{k, dv})
	}
	return out, nil
}

// resourceOf is the resource's attributes: OTEL_RESOURCE_ATTRIBUTES, with
// service.name from OTEL_SERVICE_NAME (else kontinue) and service.version
// Kontinue's unless given; service.name first, the rest by key.
func resourceOf(getenv func(string) string) ([][2]string, error) {
	kv, err := keyValues(getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	attrs := map[string]string{"service.name": "kontinue", "service.version": versionString()}
	for _, p := range kv {
		attrs[p[0]] = p[1]
	}
	if v := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); v != "" {
		attrs["service.name"] = v
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		if k != "service.name" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := [][2]string{{"service.name", attrs["service.name"]}}
	for _, k := range keys {
		out = append(out, [2]string{k, attrs[k]})
	}
	return out, nil
}

// tlsOf is the client's TLS configuration from …_CERTIFICATE (the CA
// bundle that verifies the collector), …_CLIENT_CERTIFICATE and
// …_CLIENT_KEY (mutual TLS); nil when none is set.
func tlsOf(get func(string) (string, string)) (*tls.Config, error) {
	ca, caName := get("CERTIFICATE")
	cert, certName := get("CLIENT_CERTIFICATE")
	key, keyName := get("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		b, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caName, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s: no PEM certificate in %s", caName, ca)
		}
		c.RootCAs = pool
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%s and %s go together", certName, keyName)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", certName, keyName, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
