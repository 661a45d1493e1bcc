package e2e

// A small client of the Chrome DevTools protocol over a websocket, enough
// to drive Debian's headless chromium from a test: navigate, evaluate
// JavaScript, take screenshots. `make chromium` installs chromium.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/websocket"
)

// browser is one headless chromium with one page.
type browser struct {
	t       testing.TB
	cmd     *exec.Cmd
	profile string
	ws      *websocket.Conn
	mu      sync.Mutex
	next    int
	wait    map[int]chan cdpReply
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// startBrowser starts chromium (CHROMIUM, else /usr/bin/chromium) with a
// fresh profile and connects to its page.
func startBrowser(t testing.TB) *browser {
	t.Helper()
	bin := os.Getenv("CHROMIUM")
	if bin == "" {
		bin = "/usr/bin/chromium"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no chromium at %s: run `make chromium` (hack/install-chromium.sh) as root: %v", bin, err)
	}
	// Not t.TempDir: chromium's helpers may still write to the profile for
	// a moment after the browser is killed, which fails TempDir's cleanup.
	profile, err := os.MkdirTemp("", "kontinue-chromium-")
	require.NoError(t, err)
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=1440,1000",
		"--user-data-dir="+profile, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		"--remote-allow-origins=*", "about:blank")
	// Its own process group, so that close kills its helpers too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	b := &browser{t: t, cmd: cmd, profile: profile, wait: map[int]chan cdpReply{}}
	t.Cleanup(b.close)

	// Chromium prints "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/..."
	found := make(chan string, 1)
	var lines strings.Builder
	var linesMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			linesMu.Lock()
			lines.WriteString(line + "\n")
			linesMu.Unlock()
			if rest, ok := strings.CutPrefix(line, "DevTools listening on "); ok {
				found <- rest
			}
		}
	}()
	var browserURL string
	select {
	case browserURL = <-found:
	case <-time.After(30 * time.Second):
		linesMu.Lock()
		defer linesMu.Unlock()
		t.Fatalf("chromium did not start its DevTools endpoint:\n%s", lines.String())
	}
	host := strings.SplitN(strings.TrimPrefix(browserURL, "ws://"), "/", 2)[0]

	// The page target: connect to it directly.
	var pageURL string
	eventually(t, 10*time.Second, func() string {
		res, err := http.Get("http://" + host + "/json/list")
		if err != nil {
			return err.Error()
		}
		defer res.Body.Close()
		var targets []struct{ Type, WebSocketDebuggerURL string }
		if err := json.NewDecoder(res.Body).Decode(&targets); err != nil {
			return err.Error()
		}
		for _, tg := range targets {
			if tg.Type == "page" {
				pageURL = tg.WebSocketDebuggerURL
				return ""
			}
		}
		return fmt.Sprintf("no page target in %v", targets)
	})
	cfg, err := websocket.NewConfig(pageURL, "http://127.0.0.1/")
	require.NoError(t, err)
	b.ws, err = websocket.DialConfig(cfg)
	require.NoError(t, err)
	b.ws.MaxPayloadBytes = 64 << 20 // screenshots
	go b.read()
	b.call("Page.enable", nil)
	b.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1440, "height": 1000, "deviceScaleFactor": 1, "mobile": false})
	return b
}

// read dispatches replies to their callers; events are ignored.
func (b *browser) read() {
	for {
		var msg struct {
			ID int `json:"id"`
			cdpReply
		}
		if err := websocket.JSON.Receive(b.ws, &msg); err != nil {
			b.mu.Lock()
			for id, c := range b.wait {
				close(c)
				delete(b.wait, id)
			}
			b.mu.Unlock()
			return
		}
		if msg.ID == 0 {
			continue
		}
		b.mu.Lock()
		c := b.wait[msg.ID]
		delete(b.wait, msg.ID)
		b.mu.Unlock()
		if c != nil {
			c <- msg.cdpReply
		}
	}
}

// call sends one command and returns its result.
func (b *browser) call(method string, params any) json.RawMessage {
	b.t.Helper()
	b.mu.Lock()
	b.next++
	id := b.next
	c := make(chan cdpReply, 1)
	b.wait[id] = c
	b.mu.Unlock()
	if params == nil {
		params = map[string]any{}
	}
	require.NoError(b.t, websocket.JSON.Send(b.ws, map[string]any{"id": id, "method": method, "params": params}))
	select {
	case r, ok := <-c:
		require.True(b.t, ok, "chromium closed the connection during %s", method)
		if r.Error != nil {
			b.t.Fatalf("%s: %s", method, r.Error.Message)
		}
		return r.Result
	case <-time.After(60 * time.Second):
		b.t.Fatalf("%s: no reply from chromium", method)
		return nil
	}
}

// navigate opens url and waits until the document has loaded.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.call("Page.navigate", map[string]any{"url": url})
	eventually(b.t, 20*time.Second, func() string {
		if got := b.eval(`document.readyState`); got != "complete" {
			return "document " + fmt.Sprint(got)
		}
		return ""
	})
}

// eval evaluates a JavaScript expression in the page and returns its value.
func (b *browser) eval(expr string) any {
	b.t.Helper()
	res := b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true})
	var out struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	require.NoError(b.t, json.Unmarshal(res, &out))
	if e := out.ExceptionDetails; e != nil {
		msg := e.Text
		if e.Exception != nil {
			msg = e.Exception.Description
		}
		b.t.Fatalf("evaluating %s: %s", expr, msg)
	}
	return out.Result.Value
}

// evalString is eval of an expression whose value is a string.
func (b *browser) evalString(expr string) string {
	b.t.Helper()
	v, _ := b.eval(expr).(string)
	return v
}

// screenshot saves the whole page as a PNG at path (relative to the
// repository root) and returns the absolute path.
func (b *browser) screenshot(path string) string {
	b.t.Helper()
	res := b.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true})
	var out struct{ Data string }
	require.NoError(b.t, json.Unmarshal(res, &out))
	png, err := base64.StdEncoding.DecodeString(out.Data)
	require.NoError(b.t, err)
	abs := filepath.Join(env.root, path)
	require.NoError(b.t, os.MkdirAll(filepath.Dir(abs), 0o755))
	require.NoError(b.t, os.WriteFile(abs, png, 0o644))
	b.t.Logf("screenshot: %s", abs)
	return abs
}

func (b *browser) close() {
	if b.ws != nil {
		_ = b.ws.Close()
	}
	if b.cmd.Process != nil {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		_ = b.cmd.Wait()
	}
	// The group's last helpers exit just after the browser: try for a while.
	for i := 0; i < 50 && os.RemoveAll(b.profile) != nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
}

// startDashboard runs `kontinue dashboard` on a free port with args and
// returns its base URL; it stops when the test ends.
func startDashboard(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	args = append([]string{"dashboard", "--address", "127.0.0.1:0"}, args...)
	go func() { done <- runCLI(ctx, args, &out, &errb) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("kontinue dashboard exited %d: %s", code, errb.String())
			}
		case <-time.After(10 * time.Second):
			t.Errorf("kontinue dashboard did not stop when its context ended")
		}
	})
	var url string
	eventually(t, 20*time.Second, func() string {
		for _, line := range strings.Split(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "Kontinue dashboard at "); ok {
				url = strings.Fields(rest)[0]
				return ""
			}
		}
		return "no URL printed yet: " + out.String() + errb.String()
	})
	return url
}
