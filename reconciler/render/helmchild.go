package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"
)

// helmChildEnv, set to 1, makes any executable that links this package a
// Helm renderer, as yttChildEnv does for ytt (see yttchild.go).
//
// Helm's templates are Go text/templates with Sprig: `until`, `repeat`,
// `tpl` and nested ranges fed by params can allocate or loop without end,
// and Helm's engine takes no function map of ours to check them. In a child
// process they are bounded for real: the child is killed at the deadline
// (so a render slot is free again only once the render has stopped), its
// memory is capped, and the parent reads at most limits.bytes of its output.
const helmChildEnv = "KONTINUE_HELM_CHILD"

// Bounds of the Helm child beyond time and output.
const (
	helmMaxMemory = 256 << 20
	helmMaxStack  = 64 << 20
	// helmMaxLookups bounds the `lookup` calls of one render.
	helmMaxLookups = 64
)

// helmRequest is what the controller sends the child on stdin; the child
// then reads one helmAnswer per lookup it asks for.
type helmRequest struct {
	Archive   []byte          `json:"archive"`
	Values    json.RawMessage `json:"values"`
	Release   string          `json:"release"`
	Namespace string          `json:"namespace"`
	Revision  int             `json:"revision"`
	Upgrade   bool            `json:"upgrade"`
	MaxBytes  int             `json:"maxBytes"`
}

// helmMessage is what the child writes on stdout: lookups, then one result.
type helmMessage struct {
	Lookup *helmLookup `json:"lookup,omitempty"`
	// The result: the rendered documents, or a failure (Fail is the
	// message after the chart's origin, Detail the cause).
	Done     bool      `json:"done,omitempty"`
	Docs     []helmDoc `json:"docs,omitempty"`
	Fail     string    `json:"fail,omitempty"`
	Detail   string    `json:"detail,omitempty"`
	TooLarge bool      `json:"tooLarge,omitempty"`
}

type helmDoc struct {
	Source string `json:"source"`
	Text   string `json:"text"`
}

type helmLookup struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
}

type helmAnswer struct {
	Object   map[string]any `json:"object,omitempty"`
	NotFound bool           `json:"notFound,omitempty"`
	Err      string         `json:"err,omitempty"`
}

func init() {
	asChild(helmChildEnv, helmMaxMemory, helmMaxStack, func() int { return helmChild(os.Stdin, os.Stdout) })
}

// helmChild renders one request. Every outcome is a message on out; the exit
// code is not 0 only when the child itself fails.
func helmChild(in io.Reader, out io.Writer) int {
	dec := json.NewDecoder(in)
	enc := json.NewEncoder(out)
	var req helmRequest
	if err := dec.Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "bad request:", err)
		return yttExitUsage
	}
	msg := renderChartChild(&req, &ipcProvider{enc: enc, dec: dec})
	msg.Done = true
	if err := enc.Encode(msg); err != nil {
		return yttExitUsage
	}
	return 0
}

// renderChartChild renders a packaged chart into YAML documents.
func renderChartChild(req *helmRequest, lookups engine.ClientProvider) helmMessage {
	fail := func(msg string, err error) helmMessage {
		m := helmMessage{Fail: msg}
		if err != nil {
			m.Detail = err.Error()
		}
		return m
	}
	if err := checkDecompressed(req.Archive); err != nil {
		return fail("cannot be loaded", err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(req.Archive))
	if err != nil {
		return fail("cannot be loaded", err)
	}
	if ch.Metadata.Type == "library" {
		return fail("is a library chart, which cannot be rendered on its own", nil)
	}
	if err := checkDependencies(ch); err != nil {
		return fail("cannot be rendered", err)
	}
	var values map[string]any
	// Integers as int64, exact: as Helm's own --set gives them, and as the
	// other engines see the context.
	if err := utiljson.Unmarshal(req.Values, &values); err != nil {
		return fail("cannot be rendered: values are not a JSON object", err)
	}
	vals := chartutil.Values(values)
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return fail("cannot be rendered", err)
	}
	caps := helmCapabilities
	if kv := ch.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return fail(fmt.Sprintf("requires Kubernetes %s, not %s", kv, caps.KubeVersion.String()), nil)
	}
	opts := chartutil.ReleaseOptions{Name: req.Release, Namespace: req.Namespace, Revision: req.Revision, IsInstall: !req.Upgrade, IsUpgrade: req.Upgrade}
	top, err := chartutil.ToRenderValues(ch, vals, opts, caps)
	if err != nil {
		return fail("rejects its values", err)
	}
	// DNS lookups stay off (the engine's default); `lookup` asks the parent.
	files, err := engine.RenderWithClientProvider(ch, top, lookups)
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
	if size > req.MaxBytes {
		return helmMessage{TooLarge: true}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return fail("rendered invalid YAML", err)
	}
	// Kontinue applies a release's objects and watches them; it does not run
	// hooks (at install, upgrade, delete, with their weights and delete
	// policies). Stamping them as plain objects would run a pre-upgrade Job
	// once and never again: refuse instead. Test hooks are not part of a
	// release's workload and are left out, as `helm install` leaves them.
	var refused []string
	for _, hk := range hooks {
		if isTestHook(hk) {
			continue
		}
		events := make([]string, len(hk.Events))
		for i, e := range hk.Events {
			events[i] = string(e)
		}
		refused = append(refused, fmt.Sprintf("%s (%s)", hk.Path, strings.Join(events, ",")))
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return fail("renders Helm hooks, which Kontinue does not run: "+strings.Join(refused, ", ")+"; turn them off in the chart's values or use a chart without hooks", nil)
	}
	m := helmMessage{}
	for _, mf := range manifests {
		m.Docs = append(m.Docs, helmDoc{Source: mf.Name, Text: mf.Content})
	}
	return m
}

func isTestHook(h *release.Hook) bool {
	for _, e := range h.Events {
		if e == release.HookTest {
			return true
		}
	}
	return false
}

// ipcProvider answers Helm's `lookup` by asking the parent, which reads
// the owner's namespace as the owner's service account.
type ipcProvider struct {
	enc *json.Encoder
	dec *json.Decoder
	n   int
}

func (p *ipcProvider) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	// Namespaced: the parent refuses cluster-scoped kinds itself.
	return &ipcResource{p: p, apiVersion: apiVersion, kind: kind}, true, nil
}

func (p *ipcProvider) ask(l helmLookup) (map[string]any, error) {
	if p.n++; p.n > helmMaxLookups {
		return nil, fmt.Errorf("more than %d lookups in one render", helmMaxLookups)
	}
	if err := p.enc.Encode(helmMessage{Lookup: &l}); err != nil {
		return nil, err
	}
	var a helmAnswer
	if err := p.dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("lookup: no answer: %w", err)
	}
	switch {
	case a.NotFound:
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: l.Kind}, l.Name)
	case a.Err != "":
		return nil, errors.New(a.Err)
	}
	return a.Object, nil
}

// ipcResource is the part of a dynamic client that Helm's lookup uses.
type ipcResource struct {
	dynamic.NamespaceableResourceInterface
	p                    *ipcProvider
	apiVersion, kind, ns string
}

func (r *ipcResource) Namespace(ns string) dynamic.ResourceInterface {
	c := *r
	c.ns = ns
	return &c
}

func (r *ipcResource) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	o, err := r.p.ask(helmLookup{APIVersion: r.apiVersion, Kind: r.kind, Namespace: r.ns, Name: name})
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: o}, nil
}

func (r *ipcResource) List(_ context.Context, _ metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	o, err := r.p.ask(helmLookup{APIVersion: r.apiVersion, Kind: r.kind, Namespace: r.ns})
	if err != nil {
		return nil, err
	}
	l := &unstructured.UnstructuredList{}
	l.SetUnstructuredContent(o)
	return l, nil
}
