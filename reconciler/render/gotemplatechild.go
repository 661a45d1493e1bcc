package render

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"sync/atomic"
	"time"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// goTemplateChildEnv, set to 1, makes any executable that links this
// package a goTemplate renderer, as yttChildEnv does for ytt.
//
// A Go text/template cannot be interrupted and allocates without asking:
// nested ranges that write nothing spin past any deadline, and a string
// doubled in a loop fills the heap. In the controller either would hold a
// render slot forever or end the process. In a child they are bounded for
// real: the child is killed at the deadline, its memory and stack are
// capped, and the parent reads at most a bounded answer. Unlike the ytt and
// Helm children, a goTemplate child is long-lived: it renders one request
// after another (see childPool), since goTemplates are rendered on the hot
// path and a process start costs far more than the render.
const goTemplateChildEnv = "KONTINUE_GOTEMPLATE_CHILD"

// Bounds of the goTemplate child beyond time and output.
const (
	goTemplateMaxMemory = 256 << 20 // data segment, the Go heap included
	goTemplateMaxStack  = 64 << 20  // the template's recursion (at most 100000 deep)
	// goTemplateRetireBytes: a child that has mapped more memory than this
	// exits after its answer, so that idle children stay small.
	goTemplateRetireBytes = 64 << 20
	// goTemplateGrace: a child whose render runs this long past the
	// request's deadline ends itself, should the parent fail to kill it.
	goTemplateGrace = 5 * time.Second
)

// A render is three length-prefixed frames on the child's stdin: a
// goTemplateRequest (JSON), the template, the context (JSON). The answer is
// a goTemplateAnswer (JSON) and then one frame per document: its JSON.
type goTemplateRequest struct {
	MaxBytes   int   `json:"maxBytes"`
	MaxObjects int   `json:"maxObjects"`
	TimeoutMS  int64 `json:"timeoutMs"`
}

// goTemplateAnswer is the rendered documents (where each comes from; the
// documents follow), or the StampError (message and cause) of a template
// at fault.
type goTemplateAnswer struct {
	Where    []string `json:"where,omitempty"`
	Fail     string   `json:"fail,omitempty"`
	Detail   string   `json:"detail,omitempty"`
	TooLarge bool     `json:"tooLarge,omitempty"`
	// Retire: the child exits after this answer.
	Retire bool `json:"retire,omitempty"`

	docs []jsonDoc
}

func init() {
	asChild(goTemplateChildEnv, goTemplateMaxMemory, goTemplateMaxStack, func() int { return goTemplateChild(os.Stdin, os.Stdout) })
}

// goTemplateChild answers requests from in until in ends. The exit code is
// not 0 only when the child itself fails.
func goTemplateChild(in io.Reader, out io.Writer) int {
	r, w := bufio.NewReader(in), bufio.NewWriter(out)
	var busySince atomic.Int64 // unix nanoseconds; 0: idle
	var deadline atomic.Int64
	go goTemplateWatchdog(&busySince, &deadline)
	for {
		var frames [3][]byte
		for i := range frames {
			f, err := readFrame(r, maxGoTemplateRequest)
			if i == 0 && errors.Is(err, io.EOF) {
				return 0
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "bad request:", err)
				return yttExitUsage
			}
			frames[i] = f
		}
		var req goTemplateRequest
		if err := json.Unmarshal(frames[0], &req); err != nil {
			fmt.Fprintln(os.Stderr, "bad request:", err)
			return yttExitUsage
		}
		deadline.Store(int64(time.Duration(req.TimeoutMS)*time.Millisecond + goTemplateGrace))
		busySince.Store(time.Now().UnixNano())
		a := answerGoTemplate(&req, string(frames[1]), frames[2])
		busySince.Store(0)
		frames = [3][]byte{}
		a.Retire = mappedBytes() > goTemplateRetireBytes
		if err := a.write(w); err != nil {
			fmt.Fprintln(os.Stderr, "cannot write the answer:", err)
			return yttExitUsage
		}
		if a.Retire {
			return 0
		}
	}
}

// write sends the answer and its documents.
func (a *goTemplateAnswer) write(w *bufio.Writer) error {
	a.Where = a.Where[:0]
	for _, d := range a.docs {
		a.Where = append(a.Where, d.Where)
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := writeFrame(w, b); err != nil {
		return err
	}
	for _, d := range a.docs {
		if err := writeFrame(w, d.JSON); err != nil {
			return err
		}
	}
	return w.Flush()
}

// read reads an answer and its documents, at most maxDocs bytes of them.
func (a *goTemplateAnswer) read(r *bufio.Reader, maxDocs int) error {
	b, err := readFrame(r, maxGoTemplateHeader)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, a); err != nil {
		return err
	}
	for _, where := range a.Where {
		j, err := readFrame(r, maxDocs)
		if err != nil {
			return err
		}
		maxDocs -= len(j)
		if where == goTemplateOutput {
			where = goTemplateOutput // one string for the usual name, not one per cached result
		}
		a.docs = append(a.docs, jsonDoc{Where: where, JSON: j})
	}
	return nil
}

// goTemplateWatchdog ends the child when its parent is gone or when a
// render runs well past its deadline: a backstop, the parent kills it at
// the deadline.
func goTemplateWatchdog(busySince, deadline *atomic.Int64) {
	parent := os.Getppid()
	for range time.Tick(500 * time.Millisecond) {
		if os.Getppid() != parent {
			os.Exit(yttExitUsage)
		}
		if s := busySince.Load(); s != 0 && time.Since(time.Unix(0, s)) > time.Duration(deadline.Load()) {
			fmt.Fprintln(os.Stderr, "the render ran past its deadline")
			os.Exit(yttExitUsage)
		}
	}
}

// answerGoTemplate renders one request as the engine did in the
// controller: the same parse, functions, data and decoding, so the same
// objects and the same messages.
func answerGoTemplate(req *goTemplateRequest, text string, ctx []byte) (a goTemplateAnswer) {
	fail := func(msg string, err error) goTemplateAnswer {
		a := goTemplateAnswer{Fail: msg}
		if err != nil {
			a.Detail = err.Error()
			if len(a.Detail) > maxGoTemplateDetail {
				a.Detail = a.Detail[:maxGoTemplateDetail] + "… [truncated]"
			}
		}
		return a
	}
	defer func() {
		if r := recover(); r != nil {
			a = fail("goTemplate failed to render", fmt.Errorf("render panicked: %v", r))
		}
	}()
	// repeat and the decoder read the bounds of the request.
	limits.bytes, limits.objects = req.MaxBytes, req.MaxObjects
	t, err := parseGoTemplate(text)
	if err != nil {
		return fail("goTemplate does not parse", err)
	}
	var data map[string]any
	if err := utiljson.Unmarshal(ctx, &data); err != nil {
		return fail("template context is not JSON", err)
	}
	w := &limitWriter{ctx: context.Background(), max: req.MaxBytes}
	if err := t.Execute(w, data); err != nil {
		if errors.Is(err, errTooLarge) {
			return goTemplateAnswer{TooLarge: true}
		}
		return fail("goTemplate failed to render", err)
	}
	d := &objectDecoder{engine: GoTemplateName, keep: true}
	if err := d.decode(goTemplateOutput, w.buf.Bytes()); err != nil {
		var se *StampError
		if errors.As(err, &se) {
			return fail(se.Message, se.Err)
		}
		return fail("goTemplate output cannot be decoded", err)
	}
	if len(d.objs) == 0 {
		return fail("goTemplate rendered no object", nil)
	}
	size := 0
	for _, doc := range d.docs {
		size += len(doc.JSON)
	}
	// YAML anchors can make the JSON larger than the text.
	if size > maxGoTemplateDocs(req.MaxBytes) {
		return goTemplateAnswer{TooLarge: true}
	}
	return goTemplateAnswer{docs: d.docs}
}

// mappedBytes is the memory the Go runtime has mapped, which is what the
// data segment limit counts.
func mappedBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// goTemplateOutput names the rendered text in messages.
const goTemplateOutput = "goTemplate output"

// Bounds of the frames between the controller and a goTemplate child.
const (
	// A template or a context is at most an object the API server took
	// (1.5 MiB by default).
	maxGoTemplateRequest = 64 << 20
	maxGoTemplateDetail  = 32 << 10
	// The answer without its documents: messages, JSON-escaped, and at
	// most limits.objects (and List items) document names.
	maxGoTemplateHeader = 1 << 20
)

// maxGoTemplateDocs bounds the JSON of the documents of one answer.
func maxGoTemplateDocs(maxBytes int) int { return 2*maxBytes + 1<<20 }

var errFrameTooLarge = errors.New("frame too large")

// writeFrame writes b with its length in front (buffered: Flush sends).
func writeFrame(w *bufio.Writer, b []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// readFrame reads one frame of at most max bytes. io.EOF: none began.
func readFrame(r io.Reader, max int) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if uint64(size) > uint64(max) {
		return nil, errFrameTooLarge
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}
