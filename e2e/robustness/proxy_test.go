package robustness

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"
)

// proxy stands between Kontinue and the API server and answers slowly or
// with 429 when a fault asks it to: every Kontinue replica talks to the
// API server through it. Bearer tokens pass through untouched, so the
// API server (and its audit log) sees Kontinue's own identity.
type proxy struct {
	srv *httptest.Server

	mu       sync.Mutex
	rnd      *rand.Rand
	latency  time.Duration // added to every request while set
	throttle float64       // fraction of requests answered 429
	// Counts of what was injected.
	slowed, refused int
}

func newProxy(upstream, caFile string, seed uint64) (*proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // watches stream
	rp.Transport = &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 100,
	}
	rp.ErrorLog = nil
	p := &proxy{rnd: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delay, refuse := p.decide()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		// The request body is read whole before it is forwarded: streamed
		// from one HTTP/2 stream to another, a body the API server answered
		// before reading to its end left ReverseProxy waiting for it, and
		// the client waiting for the end of the answer, for good.
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		if refuse {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
				`"message":"too many requests (injected by the robustness proxy)","reason":"TooManyRequests","code":429}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	return p, nil
}

func (p *proxy) decide() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var d time.Duration
	if p.latency > 0 {
		// Between half and all of the latency asked for.
		d = p.latency/2 + time.Duration(p.rnd.Int64N(int64(p.latency/2)+1))
		p.slowed++
	}
	refuse := p.throttle > 0 && p.rnd.Float64() < p.throttle
	if refuse {
		p.refused++
	}
	return d, refuse
}

// set changes the faults injected (0: none).
func (p *proxy) set(latency time.Duration, throttle float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency, p.throttle = latency, throttle
}

func (p *proxy) stats() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "slowed " + strconv.Itoa(p.slowed) + ", refused " + strconv.Itoa(p.refused)
}

func (p *proxy) URL() string { return p.srv.URL }

func (p *proxy) close() {
	p.srv.CloseClientConnections() // watches would hold Close forever
	p.srv.Close()
}
