package render

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
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
func Helm() Engine { return newHelmEngine(nil) }

type helmEngine struct {
	client  *http.Client
	charts  *lru // packaged charts by source
	indexes *lru // repository indexes, for a short while
	renders *lru // render results
}

func newHelmEngine(client *http.Client) *helmEngine {
	if client == nil {
		client = &http.Client{} // default transport: proxies from the environment
	}
	return &helmEngine{
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
	archive, origin, err := h.chart(ctx, hs)
	if err != nil {
		return nil, err
	}
	vdoc, err := appendJSON(nil, values, 0)
	if err != nil {
		return nil, &StampError{Engine: HelmName, Message: "helm.values are not JSON", Err: err}
	}
	key := HelmName + "/" + digest(archive) + "/" + digest(vdoc) + "/" + rel + "/" + ns
	if v, ok := h.renders.get(key); ok {
		r := v.(*helmResult)
		if r.err != nil {
			return nil, r.err
		}
		return copyObjects(r.objs), nil
	}
	v, err := bounded(ctx, key, func(context.Context) (any, error) {
		objs, size, err := renderChart(archive, origin, values, rel, ns)
		if err != nil {
			// The same chart and values fail the same way: remember it,
			// so a chart that fails slowly is not rendered again.
			h.renders.add(key, &helmResult{err: err}, 1024, 0)
			return nil, err
		}
		h.renders.add(key, &helmResult{objs: objs}, int64(size), 0)
		return objs, nil
	})
	if err != nil {
		return nil, boundedError(HelmName, ctx, err, origin+" failed to render")
	}
	return copyObjects(v.([]*unstructured.Unstructured)), nil
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

// renderChart renders a packaged chart into objects, and returns them with
// the size of the rendered text.
func renderChart(archive []byte, origin string, values map[string]any, rel, ns string) ([]*unstructured.Unstructured, int, error) {
	fail := func(msg string, err error) ([]*unstructured.Unstructured, int, error) {
		return nil, 0, &StampError{Engine: HelmName, Message: origin + " " + msg, Err: err}
	}
	if err := checkDecompressed(archive); err != nil {
		return fail("cannot be loaded", err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return fail("cannot be loaded", err)
	}
	if ch.Metadata.Type == "library" {
		return fail("is a library chart, which cannot be rendered on its own", nil)
	}
	if err := checkDependencies(ch); err != nil {
		return fail("cannot be rendered", err)
	}
	vals := chartutil.Values(values)
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return fail("cannot be rendered", err)
	}
	caps := helmCapabilities
	if kv := ch.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return fail(fmt.Sprintf("requires Kubernetes %s, not %s", kv, caps.KubeVersion.String()), nil)
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: rel, Namespace: ns, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return fail("rejects its values", err)
	}
	// No client: `lookup` finds nothing, and DNS lookups are off.
	files, err := engine.Engine{}.Render(ch, top)
	if err != nil {
		return fail("failed to render", err)
	}
	size := 0
	for name, text := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
			continue
		}
		size += len(text)
	}
	if size > limits.bytes {
		return nil, 0, tooLarge(HelmName)
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return fail("rendered invalid YAML", err)
	}
	d := &objectDecoder{engine: HelmName}
	for _, m := range manifests {
		if err := d.decode(m.Name, []byte(m.Content)); err != nil {
			return nil, 0, err
		}
	}
	// Hooks are stamped like the other objects, as `helm template` prints
	// them; test hooks are not part of a release's workload.
	for _, hk := range hooks {
		if isTestHook(hk) {
			continue
		}
		if err := d.decode(hk.Path, []byte(hk.Manifest)); err != nil {
			return nil, 0, err
		}
	}
	if len(d.objs) == 0 {
		return fail("rendered no object", nil)
	}
	return d.objs, size, nil
}

func isTestHook(h *release.Hook) bool {
	for _, e := range h.Events {
		if e == release.HookTest {
			return true
		}
	}
	return false
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
