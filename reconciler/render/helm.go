package render

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/api"
)

// HelmName is the name of the helm engine.
const HelmName = "helm"

func init() { Register(FieldHelm, Helm()) }

// Helm returns the engine that renders a Helm chart with the Helm SDK, as
// `helm template` would (without test hooks), in the owner's namespace.
// The chart comes from an http(s) chart repository, an OCI registry, or a
// ConfigMap holding the packaged chart (binaryData), read through the
// ObjectGetter of the render's context.Context.
//
// Templates render without access to the cluster (`lookup` finds nothing)
// or DNS. A render is cached by chart, values, release and namespace, so a
// chart that draws random values (generated passwords) renders them once
// instead of on every reconcile, which would re-apply its objects forever.
//
// Chart sources are bounded by HelmOptions (Helm() uses the defaults: https
// and oci only, public addresses only).
func Helm() Engine { return newHelmEngineWith(HelmOptions{}, nil) }

type helmEngine struct {
	opts    HelmOptions
	client  *http.Client
	charts  *lru // packaged charts by source
	indexes *lru // repository indexes, for a short while
	renders *lru // render results
}

func newHelmEngineWith(o HelmOptions, client *http.Client) *helmEngine {
	if client == nil {
		client = helmHTTPClient(o) // default transport: proxies from the environment
	}
	return &helmEngine{
		opts:    o,
		client:  client,
		charts:  newLRU(128, 128<<20),
		indexes: newLRU(16, 128<<20),
		renders: newLRU(1024, 128<<20),
	}
}

func (*helmEngine) Name() string { return HelmName }

// maxChartBytes bounds a chart's decompressed size (Helm allows 100 MiB).
const maxChartBytes = 32 << 20

type helmResult struct {
	objs []*unstructured.Unstructured
	err  error
}

func (h *helmEngine) Render(ctx context.Context, spec *api.TemplateSpec, tc Context) ([]*unstructured.Unstructured, error) {
	if spec == nil || spec.Helm == nil {
		return nil, &StampError{Engine: HelmName, Message: "helm is empty"}
	}
	hs := spec.Helm
	ctx, cancel := withTimeout(ctx)
	defer cancel()

	ns, owner := ownerOf(tc)
	if ns == "" {
		return nil, &StampError{Engine: HelmName, Message: "the owner has no namespace to render the chart in"}
	}
	rel := hs.ReleaseName
	if rel == "" {
		rel = owner
	}
	if err := chartutil.ValidateReleaseName(rel); err != nil {
		return nil, &StampError{Engine: HelmName, Message: fmt.Sprintf("release name [%s] is not valid (helm.releaseName, else the owner's name)", rel), Err: err}
	}
	values, err := renderValues(hs.Values, tc)
	if err != nil {
		return nil, err
	}
	archive, origin, err := h.chart(ctx, hs, ns)
	if err != nil {
		return nil, err
	}
	vdoc, err := contextJSON(values)
	if err != nil {
		return nil, contextError(HelmName, "helm.values", err)
	}
	inputs := digest([]byte(digest(archive) + "/" + digest(vdoc) + "/" + rel + "/" + ns))

	// A release kept in the cluster for this owner and step (see
	// release.go) whose inputs are these is the render: random values,
	// generated certificates and what `lookup` found stay as they were
	// until the inputs change. A new render is an upgrade of it.
	record := releaseFrom(ctx)
	revision, upgrade := 1, false
	if record != nil && record.Stored != nil {
		if record.Stored.Inputs == inputs {
			return record.Stored.objects(), nil
		}
		revision, upgrade = record.Stored.Revision+1, true
	}
	key := HelmName + "/" + inputs + "/" + strconv.Itoa(revision) + "/" + ownerKey(tc)
	if v, ok := h.renders.get(key); ok {
		r := v.(*helmResult)
		if r.err != nil {
			return nil, r.err
		}
		return h.done(record, inputs, revision, copyObjects(r.objs)), nil
	}
	req := &helmRequest{Archive: archive, Values: vdoc, Release: rel, Namespace: ns, Revision: revision, Upgrade: upgrade, MaxBytes: limits.bytes}
	lk := lookupFrom(ctx)
	v, err := bounded(ctx, ns, key, func(runCtx context.Context) (any, error) {
		msg, err := runHelm(runCtx, req, lk, ns)
		if errors.Is(err, context.DeadlineExceeded) {
			// A chart that ran out of time is not run again for a while:
			// each run would hold a slot until the deadline. It stays a
			// slow render, retried with backoff.
			h.renders.add(key, &helmResult{err: slowError{StampError: timeoutError(HelmName, runCtx)}}, 1024, timeoutMemo)
		}
		if err != nil {
			return nil, err
		}
		objs, err := helmObjects(&msg.helmMessage, origin)
		var se *StampError
		if err != nil && !errors.As(err, &se) {
			return nil, err // not the chart's fault: not kept
		}
		// The same chart, values and revision render the same way (or fail
		// the same way): remember it, so that a chart that fails slowly is
		// not rendered again. A chart that used `lookup` depends on the
		// cluster: its objects are kept in the release, not here.
		switch {
		case err != nil:
			h.renders.add(key, &helmResult{err: err}, 1024, 0)
		case !msg.lookedUp:
			h.renders.add(key, &helmResult{objs: objs}, int64(msg.size), 0)
		}
		return objs, err
	})
	if err != nil {
		return nil, boundedError(HelmName, ctx, err, origin+" failed to render")
	}
	return h.done(record, inputs, revision, copyObjects(v.([]*unstructured.Unstructured))), nil
}

// done hands the objects of a new render to the caller's release record,
// which keeps them in the cluster.
func (h *helmEngine) done(record *ReleaseRecord, inputs string, revision int, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	if record != nil {
		record.Next = newHelmRelease(inputs, revision, objs)
	}
	return objs
}

// helmObjects decodes the child's result.
func helmObjects(msg *helmMessage, origin string) ([]*unstructured.Unstructured, error) {
	switch {
	case msg.TooLarge:
		return nil, tooLarge(HelmName)
	case msg.Fail != "":
		var err error
		if msg.Detail != "" {
			err = errors.New(msg.Detail)
		}
		return nil, &StampError{Engine: HelmName, Message: origin + " " + msg.Fail, Err: err}
	}
	d := &objectDecoder{engine: HelmName}
	for _, doc := range msg.Docs {
		if err := d.decode(doc.Source, []byte(doc.Text)); err != nil {
			return nil, err
		}
	}
	if len(d.objs) == 0 {
		return nil, &StampError{Engine: HelmName, Message: origin + " rendered no object"}
	}
	return d.objs, nil
}

// ownerKey names the owner in render keys: renders that may call `lookup`
// depend on whose service account answers.
func ownerKey(tc Context) string {
	for _, k := range []string{"workload", "runnable", "deliverable"} {
		if o, ok := tc[k].(map[string]any); ok {
			md, _ := o["metadata"].(map[string]any)
			uid, _ := md["uid"].(string)
			name, _ := md["name"].(string)
			return k + ":" + name + ":" + uid
		}
	}
	return ""
}

// ownerOf returns the owner's namespace and name from the context.
func ownerOf(tc Context) (ns, name string) {
	for _, k := range []string{"workload", "runnable"} {
		if o, ok := tc[k].(map[string]any); ok {
			md, _ := o["metadata"].(map[string]any)
			ns, _ = md["namespace"].(string)
			name, _ = md["name"].(string)
			return ns, name
		}
	}
	return "", ""
}

// renderValues replaces the $(…)$ tags of helm.values, as the simple engine
// does in a template.
func renderValues(values map[string]any, tc Context) (map[string]any, error) {
	if len(values) == 0 {
		return map[string]any{}, nil
	}
	r := &renderer{tc: tc}
	out, werr := r.walk(values, 1)
	if werr != nil {
		// Walk again in key order so the error is always the same one.
		r = &renderer{tc: tc, sorted: true, doc: r.doc, docErr: r.docErr, marshaled: r.marshaled}
		if _, again := r.walk(values, 1); again != nil {
			werr = again
		}
		se := werr.stampError()
		return nil, &StampError{Engine: HelmName, Message: "helm.values: " + se.Message, Err: se.Err}
	}
	return out.(map[string]any), nil
}

// checkDependencies refuses a chart whose Chart.yaml lists dependencies that
// its charts/ directory does not hold, as `helm install` does.
func checkDependencies(ch *chart.Chart) error {
	have := map[string]bool{}
	for _, d := range ch.Dependencies() {
		have[d.Name()] = true
	}
	var missing []string
	for _, d := range ch.Metadata.Dependencies {
		if !have[d.Name] {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("dependencies %s are listed in Chart.yaml but missing from charts/", strings.Join(missing, ", "))
	}
	return nil
}

// checkDecompressed refuses archives that decompress to more than
// maxChartBytes before Helm loads them into memory.
func checkDecompressed(archive []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, io.LimitReader(zr, maxChartBytes+1))
	if err != nil {
		return err
	}
	if n > maxChartBytes {
		return fmt.Errorf("the chart decompresses to more than %d bytes", maxChartBytes)
	}
	return nil
}

// clientKubeVersion is the Kubernetes version of the client-go Kontinue is
// built with (v0.N.P is v1.N.P); a test keeps it in step with go.mod.
const clientKubeVersion = "v1.37.2"

// helmCapabilities are what charts see as .Capabilities: Helm's defaults
// with the Kubernetes version of the client libraries, as the helm CLI
// sets it at build time.
var helmCapabilities = func() *chartutil.Capabilities {
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(clientKubeVersion)
	if err != nil {
		panic("render: bad clientKubeVersion: " + err.Error())
	}
	caps.KubeVersion = *kv
	return caps
}()

// transientError marks a failure that retrying can fix: a repository, a
// registry or the API server did not answer.
type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

// IsTransient reports whether a render failed for a reason that retrying
// can fix (a chart could not be fetched), as opposed to a template or chart
// that is wrong until someone changes it.
func IsTransient(err error) bool {
	var t transientError
	return errors.As(err, &t)
}

// Transient marks err as a failure that retrying can fix (IsTransient).
func Transient(err error) error { return transientError{err} }
