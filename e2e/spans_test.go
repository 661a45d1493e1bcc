package e2e

import (
	"compress/gzip"
	"context"
	"encoding/hex"
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
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"kontinue.dev/kontinue/reconciler"
	"kontinue.dev/kontinue/reconciler/spans"
	st "kontinue.dev/kontinue/reconciler/status"
)

// otlpReceiver is an OTLP/HTTP trace endpoint in the test: it keeps every
// span it is sent.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []gotSpan
}

type gotSpan struct {
	trace, id, parent string
	name              string
	start, end        time.Time
	status            int32 // 1 ok, 2 error
	attrs             map[string]string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = z
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				g := gotSpan{trace: hex.EncodeToString(s.GetTraceId()), id: hex.EncodeToString(s.GetSpanId()),
					parent: hex.EncodeToString(s.GetParentSpanId()), name: s.GetName(),
					start: time.Unix(0, int64(s.GetStartTimeUnixNano())), end: time.Unix(0, int64(s.GetEndTimeUnixNano())),
					status: int32(s.GetStatus().GetCode()), attrs: map[string]string{}}
				for _, a := range s.GetAttributes() {
					g.attrs[a.GetKey()] = a.GetValue().GetStringValue()
				}
				r.spans = append(r.spans, g)
			}
		}
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
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
	require.False(t, env.external, "the test starts Kontinue in this process with an OTLP endpoint")
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	x, err := spans.New(context.Background(), srv.URL)
	require.NoError(t, err)
	env.kontinue.stop()
	env.kontinue = startKontinueWith(env.cfg, func(o *reconciler.Options) { o.Spans = x.StatusWritten })
	t.Cleanup(func() {
		// Back to the suite's Kontinue, without spans.
		env.kontinue.stop()
		_ = x.Shutdown(context.Background())
		env.kontinue = startKontinue(env.cfg)
	})

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
