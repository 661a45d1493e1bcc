package render

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"kontinue.dev/kontinue/reconciler/api"
)

// GoTemplateName is the name of the goTemplate engine.
const GoTemplateName = "goTemplate"

func init() { Register(FieldGoTemplate, GoTemplate()) }

// GoTemplate returns the engine that renders spec.goTemplate, a Go
// text/template with the Sprig functions, into one or more YAML objects.
// Its data is the same context the $(…)$ engine reads: {{ .workload.metadata.name }},
// {{ .params.greeting }}, {{ .sources.src.url }}, ... A key that does not
// exist is an error (missingkey=error), as a $(…)$ tag resolving to nothing
// is; `dig`, `hasKey` and `index` read optional values.
//
// Templates execute in long-lived child processes of Kontinue's own
// executable (gotemplatechild.go, childpool.go), not in the controller: a
// template cannot be interrupted, and one that spins or allocates without
// end would hold a render slot forever or take the controller down. The
// controller parses the template (to report a template that does not
// parse at once) and decodes the child's JSON; results are cached by
// template and context, so a step whose inputs did not change costs no
// child at all.
func GoTemplate() Engine { return goTemplateEngine{} }

type goTemplateEngine struct{}

func (goTemplateEngine) Name() string { return GoTemplateName }

// goTemplateChildren render goTemplates.
var goTemplateChildren = newChildPool(goTemplateChildEnv)

// Rendered documents (or the failure of a template at fault), one entry
// per step of an owner (goTemplateStep): the template and context it was
// rendered with (key) and the result. A reconcile renders every step
// again; unless the owner or an input changed, the answer is here. A step
// whose context changed replaces its entry: an owner's earlier contexts do
// not come back, and need not be kept.
var goTemplateResults = newLRU(8192, 32<<20)

type goTemplateResult struct {
	key  string
	docs []jsonDoc
	err  error
}

// goTemplateStep names a step of an owner in goTemplateResults: the owner,
// the step's labels (which name the step) and the template.
func goTemplateStep(tc Context, template []byte) string {
	labels, _ := contextJSON(tc["labels"])
	l, t := sha256.Sum256(labels), sha256.Sum256(template)
	return ownerKey(tc) + "/" + string(l[:]) + string(t[:])
}

// cachedGoTemplate returns the result kept for step if it was rendered
// with key.
func cachedGoTemplate(step, key string) (goTemplateResult, bool) {
	if v, ok := goTemplateResults.get(step); ok && v.(goTemplateResult).key == key {
		return v.(goTemplateResult), true
	}
	return goTemplateResult{}, false
}

func (goTemplateEngine) Render(ctx context.Context, spec *api.TemplateSpec, tc Context) ([]*unstructured.Unstructured, error) {
	if spec == nil || strings.TrimSpace(spec.GoTemplate) == "" {
		return nil, &StampError{Engine: GoTemplateName, Message: "goTemplate is empty"}
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := parseGoTemplate(spec.GoTemplate); err != nil {
		return nil, &StampError{Engine: GoTemplateName, Message: "goTemplate does not parse", Err: err}
	}
	// The child decodes its own copy of the context: Sprig's set, unset
	// and merge modify the maps they are given, and the owner is shared.
	doc, err := contextJSON(map[string]any(tc))
	if err != nil {
		return nil, contextError(GoTemplateName, "template context", err)
	}
	t, c := sha256.Sum256([]byte(spec.GoTemplate)), sha256.Sum256(doc)
	key := GoTemplateName + "/" + string(t[:]) + string(c[:])
	step := goTemplateStep(tc, []byte(spec.GoTemplate))
	res, ok := cachedGoTemplate(step, key)
	if !ok {
		hdr, err := json.Marshal(goTemplateRequest{MaxBytes: limits.bytes, MaxObjects: limits.objects, TimeoutMS: limits.timeout.Milliseconds()})
		if err != nil {
			return nil, &StampError{Engine: GoTemplateName, Message: "cannot encode the render request", Err: err}
		}
		req := [][]byte{hdr, []byte(spec.GoTemplate), doc}
		ns, _ := ownerOf(tc)
		v, err := bounded(ctx, ns, key, func(runCtx context.Context) (any, error) { return runGoTemplate(runCtx, step, key, req) })
		if err != nil {
			return nil, boundedError(GoTemplateName, ctx, err, "goTemplate failed to render")
		}
		res = v.(goTemplateResult)
	}
	if res.err != nil {
		return nil, res.err
	}
	d := &objectDecoder{engine: GoTemplateName}
	for _, doc := range res.docs {
		if err := d.decodeJSON(doc.Where, doc.JSON); err != nil {
			return nil, err
		}
	}
	if len(d.objs) == 0 {
		return nil, &StampError{Engine: GoTemplateName, Message: "goTemplate rendered no object"}
	}
	return d.objs, nil
}

// runGoTemplate renders one request in a child and keeps what it learned
// in goTemplateResults: the documents, a template at fault, or (for a
// while) that it ran out of time.
func runGoTemplate(ctx context.Context, step, key string, req [][]byte) (any, error) {
	var a goTemplateAnswer
	err := goTemplateChildren.exchange(ctx, req, func(r *bufio.Reader) (bool, error) {
		a = goTemplateAnswer{}
		err := a.read(r, maxGoTemplateDocs(limits.bytes))
		return a.Retire, err
	})
	res := goTemplateResult{key: key}
	var fail *childFailure
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		goTemplateResults.add(step, goTemplateResult{key: key, err: slowError{StampError: timeoutError(GoTemplateName, ctx)}}, 1024, timeoutMemo)
		return nil, err
	case errors.As(err, &fail):
		var templates bool
		if res.err, templates = childError(GoTemplateName, "goTemplate failed to render: the template", fail, goTemplateMaxMemory, goTemplateMaxStack); !templates {
			return nil, res.err // not the template's fault: not kept
		}
	case err != nil:
		return nil, &StampError{Engine: GoTemplateName, Message: "cannot run the goTemplate renderer", Err: err}
	default:
		switch {
		case a.TooLarge:
			res.err = tooLarge(GoTemplateName)
		case a.Fail != "":
			var cause error
			if a.Detail != "" {
				cause = errors.New(a.Detail)
			}
			res.err = &StampError{Engine: GoTemplateName, Message: a.Fail, Err: cause}
		default:
			res.docs = a.docs
		}
	}
	size := int64(len(step) + len(key) + 256)
	for _, d := range res.docs {
		size += int64(len(d.JSON) + len(d.Where) + 64)
	}
	goTemplateResults.add(step, res, size, 0)
	return res, nil
}

// childError is the StampError of a child renderer that ended without
// answering: out of memory or stack (the template's fault, templates true;
// subject names it), or the renderer itself failing.
func childError(engine, subject string, f *childFailure, maxMemory, maxStack int) (err *StampError, templates bool) {
	switch {
	case strings.Contains(f.stderr, "stack overflow"), strings.Contains(f.stderr, "stack exceeds"):
		return &StampError{Engine: engine, Message: fmt.Sprintf("%s recursed too deeply (more than %d MiB of stack)", subject, maxStack>>20)}, true
	case outOfMemory(f.stderr):
		return &StampError{Engine: engine, Message: fmt.Sprintf("%s needs more than %d MiB of memory", subject, maxMemory>>20)}, true
	}
	return &StampError{Engine: engine, Message: "the " + engine + " renderer failed: " + f.Error()}, false
}

// boundedError turns an error of bounded() into the engine's StampError.
func boundedError(engine string, ctx context.Context, err error, what string) error {
	var se *StampError
	var nb nsBusyError
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &nb):
		return slowError{&StampError{Engine: engine, Message: fmt.Sprintf("%s: %s (templates or charts that take too long)", what, nb.Error())}, nb.ns}
	case errors.Is(err, errBusy):
		return slowError{StampError: &StampError{Engine: engine, Message: fmt.Sprintf("%s: all %d render slots are held by renders that have not finished (templates or charts that take too long)", what, cap(renderSlots))}}
	case errors.Is(err, errTooLarge):
		return tooLarge(engine)
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded):
		return slowError{StampError: timeoutError(engine, ctx)}
	}
	return &StampError{Engine: engine, Message: what, Err: err}
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Parsed templates by their text: templates are shared, so the same text
// comes back on every reconcile. A parsed template is safe for concurrent
// Execute.
var goTemplates = newLRU(512, 16<<20)

type parsedTemplate struct {
	t   *template.Template
	err error
}

func parseGoTemplate(text string) (*template.Template, error) {
	if v, ok := goTemplates.get(text); ok {
		p := v.(parsedTemplate)
		return p.t, p.err
	}
	t, err := template.New("goTemplate").Option("missingkey=error").Funcs(goTemplateFuncs).Parse(text)
	goTemplates.add(text, parsedTemplate{t, err}, int64(len(text)), 0)
	return t, err
}

// maxListLen bounds the lists and strings that Sprig functions build from a
// number alone (until, seq, repeat, indent), which could otherwise exhaust
// memory before any bound on the output is reached.
const maxListLen = 1 << 16

// goTemplateFuncs are Sprig's functions less what must not run in a
// controller, plus toYaml, fromYaml and required as in Helm.
var goTemplateFuncs = func() template.FuncMap {
	f := sprig.TxtFuncMap()
	// The controller's environment (credentials, tokens) must not leak.
	delete(f, "env")
	delete(f, "expandenv")
	// A result that changes on every render would re-apply the object on
	// every reconcile, and the update would trigger the next reconcile.
	for _, name := range []string{"now", "ago", "randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "randInt",
		"uuidv4", "shuffle", "bcrypt", "htpasswd", "encryptAES", "genPrivateKey", "genCA", "genCAWithKey",
		"genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey"} {
		f[name] = refused(name, "its result changes on every render, so the object would be re-applied on every reconcile")
	}
	f["getHostByName"] = refused("getHostByName", "rendering must not depend on the network")

	until := f["until"].(func(int) []int)
	f["until"] = func(n int) ([]int, error) {
		if err := checkCount("until", absf(n)); err != nil {
			return nil, err
		}
		return until(n), nil
	}
	untilStep := f["untilStep"].(func(int, int, int) []int)
	f["untilStep"] = func(start, stop, step int) ([]int, error) {
		if step != 0 {
			if err := checkCount("untilStep", math.Abs(float64(stop)-float64(start))/absf(step)); err != nil {
				return nil, err
			}
		}
		return untilStep(start, stop, step), nil
	}
	seq := f["seq"].(func(...int) string)
	f["seq"] = func(p ...int) (string, error) {
		n := 0.0
		switch len(p) {
		case 1:
			n = absf(p[0])
		case 2:
			n = math.Abs(float64(p[1]) - float64(p[0]))
		case 3:
			if p[1] != 0 {
				n = math.Abs(float64(p[2])-float64(p[0])) / absf(p[1])
			}
		}
		if err := checkCount("seq", n); err != nil {
			return "", err
		}
		return seq(p...), nil
	}
	f["repeat"] = func(count int, s string) (string, error) {
		if count > 0 && len(s) > 0 && count > limits.bytes/len(s) {
			return "", fmt.Errorf("repeat: %d copies of a %d-byte string exceed %d bytes", count, len(s), limits.bytes)
		}
		return strings.Repeat(s, max(count, 0)), nil
	}
	indent := f["indent"].(func(int, string) string)
	nindent := f["nindent"].(func(int, string) string)
	f["indent"] = func(n int, s string) (string, error) {
		if err := checkCount("indent", float64(n)); err != nil {
			return "", err
		}
		return indent(n, s), nil
	}
	f["nindent"] = func(n int, s string) (string, error) {
		if err := checkCount("nindent", float64(n)); err != nil {
			return "", err
		}
		return nindent(n, s), nil
	}

	f["toYaml"] = func(v any) (string, error) {
		b, err := yaml.Marshal(v)
		return strings.TrimSuffix(string(b), "\n"), err
	}
	// Decoded as apimachinery decodes objects: integers stay int64, exact
	// past 2^53 (Sprig's and sigs.k8s.io/yaml's decoders make every
	// number a float64).
	f["fromYaml"] = func(s string) (map[string]any, error) {
		var m map[string]any
		err := utilyaml.Unmarshal([]byte(s), &m)
		return m, err
	}
	f["mustFromJson"] = func(s string) (any, error) {
		var v any
		err := utiljson.Unmarshal([]byte(s), &v)
		return v, err
	}
	f["fromJson"] = func(s string) any {
		var v any
		_ = utiljson.Unmarshal([]byte(s), &v) // as Sprig's: nil when it is not JSON
		return v
	}
	f["required"] = func(msg string, v any) (any, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	return f
}()

func refused(name, why string) func(...any) (any, error) {
	return func(...any) (any, error) {
		return nil, fmt.Errorf("function %s is not available in goTemplate: %s", name, why)
	}
}

// checkCount takes a float64 so that extreme ints cannot overflow the check.
func checkCount(fn string, n float64) error {
	if n > maxListLen {
		return fmt.Errorf("%s: %.0f is more than the %d allowed", fn, n, maxListLen)
	}
	return nil
}

func absf(n int) float64 { return math.Abs(float64(n)) }
