package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"k8s.io/client-go/rest"

	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
)

// otlpReceiver is an OTLP/HTTP trace endpoint in the test: it keeps every
// span it is sent.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []gotSpan
	errs  []string
}

type gotSpan struct {
	trace, id, parent string
	name              string
	start, end        time.Time
	status            int32 // 1 ok, 2 error
	attrs             map[string]string
	links             []gotLink
}

// gotLink is a span link: the span (of another trace) and its attributes.
type gotLink struct {
	trace, id string
	attrs     map[string]string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "want a POST of OTLP/JSON to /v1/traces", http.StatusUnsupportedMediaType)
		return
	}
	b, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The OpenTelemetry Collector's own OTLP/JSON decoder: what a
	// collector would read.
	traces, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		r.mu.Lock()
		r.errs = append(r.errs, err.Error())
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for i := 0; i < traces.ResourceSpans().Len(); i++ {
		rs := traces.ResourceSpans().At(i)
		if v, _ := rs.Resource().Attributes().Get("service.name"); v.Str() != "kontinue" {
			r.errs = append(r.errs, "service.name "+v.Str())
		}
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				s := ss.At(k)
				g := gotSpan{trace: s.TraceID().String(), id: s.SpanID().String(), name: s.Name(),
					start: s.StartTimestamp().AsTime(), end: s.EndTimestamp().AsTime(), status: int32(s.Status().Code()), attrs: map[string]string{}}
				if !s.ParentSpanID().IsEmpty() {
					g.parent = s.ParentSpanID().String()
				}
				s.Attributes().Range(func(k string, v pcommon.Value) bool { g.attrs[k] = v.Str(); return true })
				for l := 0; l < s.Links().Len(); l++ {
					sl := s.Links().At(l)
					gl := gotLink{trace: sl.TraceID().String(), id: sl.SpanID().String(), attrs: map[string]string{}}
					sl.Attributes().Range(func(k string, v pcommon.Value) bool { gl.attrs[k] = v.Str(); return true })
					g.links = append(g.links, gl)
				}
				r.spans = append(r.spans, g)
			}
		}
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte("{}"))
}

// tracer runs an OTLP receiver in the test and restarts the in-process
// Kontinue with spans sent to it (on) or without (off: the suite's); the
// suite's is back at the end of the test.
type tracer struct {
	recv *otlpReceiver
	x    *spans.Exporter
	cfg  *rest.Config // Kontinue's (nil: the suite's)
}

func newTracer(t *testing.T) *tracer {
	t.Helper()
	require.False(t, env.external, "the test restarts Kontinue in this process with an OTLP endpoint")
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	x, err := spans.New(context.Background(), srv.URL)
	require.NoError(t, err)
	tr := &tracer{recv: recv, x: x}
	t.Cleanup(func() {
		env.kontinue.stop()
		_ = x.Shutdown(context.Background())
		env.kontinue = startKontinue(env.cfg)
	})
	return tr
}

func (tr *tracer) config() *rest.Config {
	if tr.cfg != nil {
		return tr.cfg
	}
	return env.cfg
}

// on restarts Kontinue with traces, off without.
func (tr *tracer) on() {
	env.kontinue.stop()
	env.kontinue = startKontinueWith(tr.config(), func(o *reconciler.Options) { o.Spans = tr.x.StatusWritten })
}

func (tr *tracer) off() {
	env.kontinue.stop()
	env.kontinue = startKontinue(tr.config())
}

// byRevision are the spans received for namespace ns, by revision label
// (the commit) and step.
func (r *otlpReceiver) byRevision(ns string) map[string]map[string]gotSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]map[string]gotSpan{}
	for _, s := range r.spans {
		if s.attrs["kontinue.owner.namespace"] != ns {
			continue
		}
		rev := strings.TrimPrefix(s.attrs["kontinue.revision"], "https://git.example/app.git@")
		if out[rev] == nil {
			out[rev] = map[string]gotSpan{}
		}
		out[rev][s.name] = s
	}
	return out
}

// TestSpans: with an OTLP endpoint, Kontinue sends a trace per input
// revision of an owner: a span per step from taking the revision to its
// end, each under the span of the step it read (source → build →
// deploy), a failure as an error span in its own revision's trace.
func TestSpans(t *testing.T) {
	tr := newTracer(t)
	tr.on()
	recv := tr.recv

	ns := newNamespace(t)
	apply(t, ns, provChain(ns))
	apply(t, ns, provWorkload(ns, "c1"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c1", "spec", "commit"))
	time.Sleep(time.Second) // whole seconds: the build span lasts at least one
	build(t, ns, "True", "img-c1")
	waitDeployed(t, ns, "img-c1")
	apply(t, ns, provWorkload(ns, "c2"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c2", "spec", "commit"))
	build(t, ns, "False", "img-broken")
	waitProvenance(t, ns, "build", func(p st.Provenance) string { return setIs(p.Latest, "c2", st.OutcomeFailed) })

	var got map[string]map[string]gotSpan
	eventually(t, 20*time.Second, func() string {
		got = recv.byRevision(ns)
		if len(got["c1"]) != 3 || got["c2"]["build"].name == "" {
			return fmt.Sprintf("spans %v: want source, build, deploy of c1 and the build of c2", got)
		}
		return ""
	})
	recv.mu.Lock()
	assert.Empty(t, recv.errs, "what the collector's decoder refused")
	recv.mu.Unlock()
	c1 := got["c1"]
	src, bld, dep := c1["source"], c1["build"], c1["deploy"]
	assert.Equal(t, src.trace, bld.trace, "one trace per revision")
	assert.Equal(t, src.trace, dep.trace)
	assert.Empty(t, src.parent, "the first step's span is the root")
	assert.Equal(t, src.id, bld.parent, "build under source")
	assert.Equal(t, bld.id, dep.parent, "deploy under build")
	assert.GreaterOrEqual(t, bld.end.Sub(bld.start), time.Second, "from taking c1 to its success")
	assert.Equal(t, int32(1), bld.status, "ok")
	assert.Equal(t, "Workload", bld.attrs["kontinue.owner.kind"])
	assert.Equal(t, uniq(ns, "prov"), bld.attrs["kontinue.chain"])
	assert.Equal(t, st.OutcomeSucceeded, bld.attrs["kontinue.outcome"])

	c2 := got["c2"]["build"]
	assert.NotEqual(t, src.trace, c2.trace, "another revision, another trace")
	assert.Equal(t, int32(2), c2.status, "a failure is an error span")
	assert.Equal(t, st.OutcomeFailed, c2.attrs["kontinue.outcome"])
	assert.Equal(t, got["c2"]["source"].id, c2.parent, "under c2's source span")
}
