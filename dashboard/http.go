package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kontinue.dev/kontinue/reconciler/api"
)

//go:embed web
var web embed.FS

// CSRFHeader must be on every POST (reconcile now, a roll-out's buttons). A page from another
// origin cannot add a custom header without a CORS preflight, which this
// server never answers, so only the dashboard's own page can send it.
const CSRFHeader = "X-Kontinue-Dashboard"

// heartbeat keeps idle event streams open through proxies.
const heartbeat = 20 * time.Second

// Handler serves the page, its assets, /events (server-sent events),
// /api/state (the snapshot as JSON), /api/object and /api/events (a
// stamped object's YAML and events, read when a viewer asks), POST
// /api/reconcile and POST /api/rollout.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(web, "web")
	files := http.FileServerFS(static)
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Snapshot())
	})
	mux.HandleFunc("POST /api/reconcile", s.reconcile)
	mux.HandleFunc("POST /api/rollout", s.rollout)
	mux.HandleFunc("GET /api/object", s.object)
	mux.HandleFunc("GET /api/events", s.objectEvents)
	mux.HandleFunc("GET /api/history", s.ownerHistory)
	mux.HandleFunc("GET /api/dora", s.chainDora)
	if !s.opts.LocalOnly {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !localHost(r.Host) {
			http.Error(w, "refused: the dashboard answers only to localhost or an IP address (Host "+r.Host+")", http.StatusMisdirectedRequest)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// localHost tells whether a Host header names this machine in a way no web
// site can take over: localhost or an IP address. A site that points its
// own name at 127.0.0.1 (DNS rebinding) sends its own name, and is refused.
func localHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	return h == "localhost" || net.ParseIP(h) != nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	c := s.subscribe()
	defer s.unsubscribe(c)
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case msg, ok := <-c:
			if !ok {
				return // dropped (too slow) or shutting down: the browser reconnects
			}
			if _, err := w.Write(msg); err != nil {
				return
			}
			// Write what else is queued before flushing: one flush per burst.
			for more := true; more; {
				select {
				case msg, ok := <-c:
					if !ok {
						flusher.Flush()
						return
					}
					if _, err := w.Write(msg); err != nil {
						return
					}
				default:
					more = false
				}
			}
			flusher.Flush()
		case <-tick.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
			flusher.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

type reconcileRequest struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// writable refuses a write the server does not offer (enabled false: the
// controller's read-only page) or that may come from another site; true
// when the request may go on.
func writable(w http.ResponseWriter, r *http.Request, enabled bool) bool {
	if !enabled {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "this dashboard is read-only"})
		return false
	}
	if r.Header.Get(CSRFHeader) == "" || !sameOrigin(r) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "cross-site request refused: send the " + CSRFHeader + " header from the dashboard's own page"})
		return false
	}
	return true
}

// reconcile sets the reconcile request annotation, with the same function
// as `kontinue reconcile`.
func (s *Server) reconcile(w http.ResponseWriter, r *http.Request) {
	if !writable(w, r, s.opts.Reconcile != nil) {
		return
	}
	var req reconcileRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want JSON {kind, namespace, name}: " + err.Error()})
		return
	}
	if (req.Kind != api.KindWorkload && req.Kind != api.KindDeliverable) || req.Namespace == "" || req.Name == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want kind Workload or Deliverable, a namespace and a name"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	at, err := s.opts.Reconcile(ctx, req.Kind, req.Namespace, req.Name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"requestedAt": at})
}

type rolloutRequest struct {
	Verb string `json:"verb"`
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// rollout pauses, resumes or undoes a chain's roll-out, with the same
// function as `kontinue rollout pause|resume|undo`.
func (s *Server) rollout(w http.ResponseWriter, r *http.Request) {
	if !writable(w, r, s.opts.Rollout != nil) {
		return
	}
	var req rolloutRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want JSON {verb, kind, name}: " + err.Error()})
		return
	}
	if (req.Verb != "pause" && req.Verb != "resume" && req.Verb != "undo") ||
		(req.Kind != api.KindClusterSupplyChain && req.Kind != api.KindClusterDelivery) || req.Name == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want verb pause, resume or undo, kind ClusterSupplyChain or ClusterDelivery, and a name"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	did, err := s.opts.Rollout(ctx, req.Verb, req.Kind, req.Name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": did})
}

// writeError answers a failed write with the API server's code when it
// gave one (403 Forbidden for the caller's rights), else 502.
func writeError(w http.ResponseWriter, err error) {
	code := http.StatusBadGateway
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		code = int(status.Status().Code)
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// sameOrigin refuses a request whose Origin (browsers send it on a POST)
// names another host than the one the request was sent to.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not from a browser's cross-site form or fetch
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
