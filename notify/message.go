package notify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"kontinue.dev/kontinue/notify/api"
)

// Target is a Provider resolved for sending: its address and token read
// from its Secret.
type Target struct {
	Type, Address, Token, Repository string
	// Dashboard is Kontinue's dashboard URL (links in messages), or "".
	Dashboard string
}

// maxLines bounds the events one chat message lists (the rest are
// counted): a template wave over thousands of owners is one message.
const maxLines = 20

// Requests are the HTTP requests that deliver evs (the events of one
// alert, whose summary starts chat messages) to t: one message for the
// chat and generic providers, one commit status per step and commit for
// github and gitlab, one CloudEvent per event for cdevents.
func Requests(t Target, summary string, evs []Event) ([]*http.Request, error) {
	switch t.Type {
	case api.TypeGeneric:
		b, err := json.Marshal(genericPayload{Summary: summary, Events: wire(evs, t.Dashboard)})
		if err != nil {
			return nil, err
		}
		req, err := post(t.Address, b)
		if err != nil {
			return nil, err
		}
		if t.Token != "" {
			req.Header.Set("X-Signature", "sha256="+Sign([]byte(t.Token), b))
		}
		return []*http.Request{req}, nil
	case api.TypeSlack:
		// Slack's control sequences (<!channel>, <@user>, links) start
		// with < and are escaped as Slack asks: a step's message is
		// whatever the stamped object said, not a way to ping a channel.
		b, _ := json.Marshal(map[string]any{"text": slackEscape.Replace(Text(summary, evs, t.Dashboard))})
		req, err := post(t.Address, b)
		return []*http.Request{req}, err
	case api.TypeMSTeams:
		// An Adaptive Card, as Teams' incoming webhooks (and Workflows)
		// take it.
		card := map[string]any{"type": "AdaptiveCard", "version": "1.4",
			"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
			"body":    []any{map[string]any{"type": "TextBlock", "wrap": true, "text": Text(summary, evs, t.Dashboard)}}}
		b, _ := json.Marshal(map[string]any{"type": "message", "attachments": []any{
			map[string]any{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}}})
		req, err := post(t.Address, b)
		return []*http.Request{req}, err
	case api.TypeGitHub, api.TypeGitLab:
		return statuses(t, evs)
	case api.TypeCDEvents:
		return cdEvents(t, evs)
	}
	return nil, fmt.Errorf("unknown provider type [%s]", t.Type)
}

var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Sign is the hex HMAC-SHA256 of body with key: a generic webhook's
// X-Signature header is sha256=<Sign>.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func post(address string, body []byte) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, address, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// genericPayload is what a generic webhook receives.
type genericPayload struct {
	Summary string      `json:"summary,omitempty"`
	Events  []wireEvent `json:"events"`
}

type wireEvent struct {
	Type       string            `json:"type"`
	Severity   string            `json:"severity"`
	Kind       string            `json:"kind"`
	Namespace  string            `json:"namespace"`
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels,omitempty"`
	Chain      string            `json:"chain,omitempty"`
	Step       string            `json:"step"`
	Reason     string            `json:"reason,omitempty"`
	Message    string            `json:"message,omitempty"`
	Repository string            `json:"repository,omitempty"`
	Revision   string            `json:"revision,omitempty"`
	Image      string            `json:"image,omitempty"`
	Time       time.Time         `json:"time"`
	URL        string            `json:"url,omitempty"`
	// TraceParent joins the event with the owner's trace.
	TraceParent string `json:"traceparent,omitempty"`
}

func wire(evs []Event, dashboard string) []wireEvent {
	out := make([]wireEvent, 0, len(evs))
	for _, e := range evs {
		out = append(out, wireEvent{Type: e.Type, Severity: e.Severity, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name,
			Labels: e.Labels, Chain: e.Chain, Step: e.Step, Reason: e.Reason, Message: e.Message,
			Repository: e.Repository, Revision: e.Revision, Image: e.Image, Time: e.At.UTC(), URL: Link(dashboard, &e), TraceParent: e.TraceParent})
	}
	return out
}

// Link is the owner's page on the dashboard, or "".
func Link(dashboard string, e *Event) string {
	if dashboard == "" {
		return ""
	}
	return strings.TrimRight(dashboard, "/") + "/#/owner/" + url.PathEscape(e.Kind) + "/" + url.PathEscape(e.Namespace) + "/" + url.PathEscape(e.Name)
}

// Line is one event in words: the owner, the step, the commit, what
// happened and why.
func Line(e *Event, dashboard string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s: step [%s] %s", e.Kind, e.Namespace, e.Name, e.Step, verb(e))
	if e.Revision != "" {
		fmt.Fprintf(&b, " at commit %s", short(e.Revision))
		if r := Repository(e.Repository); r != "" {
			fmt.Fprintf(&b, " of %s", r)
		}
	}
	if e.Image != "" {
		fmt.Fprintf(&b, ": %s", e.Image)
	}
	if e.Reason != "" || e.Message != "" {
		fmt.Fprintf(&b, ": %s", strings.TrimPrefix(e.Reason+": "+cut(e.Message, 500), ": "))
	}
	if l := Link(dashboard, e); l != "" {
		fmt.Fprintf(&b, " (%s)", l)
	}
	return b.String()
}

func verb(e *Event) string {
	switch e.Type {
	case api.EventStepFailed:
		return "failed"
	case api.EventStepRecovered:
		return "recovered (resolved)"
	case api.EventStepStarted:
		return "started"
	case api.EventStepSucceeded:
		return "succeeded"
	case api.EventDeployed:
		return "deployed"
	case api.EventArtifactPublished:
		return "published an image"
	case api.EventSourceChanged:
		return "saw a new source revision"
	case api.EventRolledBack:
		return "is served by its shadow (rolled back)"
	}
	return e.Type
}

// Text is a chat message: the summary, then a line per event, at most
// maxLines (the rest counted).
func Text(summary string, evs []Event, dashboard string) string {
	var lines []string
	if summary != "" {
		lines = append(lines, summary)
	}
	for i := range evs {
		if i == maxLines {
			lines = append(lines, fmt.Sprintf("... and %d more events", len(evs)-maxLines))
			break
		}
		lines = append(lines, Line(&evs[i], dashboard))
	}
	return strings.Join(lines, "\n")
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// state is a commit status's state for an event ("" none): GitHub's
// (pending, success, failure) or GitLab's (running, success, failed).
func state(typ string, e *Event) string {
	var s string
	switch e.Type {
	case api.EventStepFailed, api.EventRolledBack:
		s = "failure"
	case api.EventStepRecovered, api.EventStepSucceeded, api.EventDeployed:
		s = "success"
	case api.EventStepStarted:
		s = "pending"
	default:
		return ""
	}
	if typ == api.TypeGitLab {
		s = map[string]string{"failure": "failed", "success": "success", "pending": "running"}[s]
	}
	return s
}

// statuses are commit statuses, one per owner, step and commit (the last
// event of each wins), for the events that have a commit.
func statuses(t Target, evs []Event) ([]*http.Request, error) {
	type key struct{ repo, rev, ctx string }
	last := map[key]int{}
	var order []key
	for i := range evs {
		e := &evs[i]
		repo := t.Repository
		if repo == "" {
			repo = Repository(e.Repository)
		}
		if e.Revision == "" || repo == "" || state(t.Type, e) == "" {
			continue
		}
		k := key{repo, e.Revision, StatusContext(e)}
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = i
	}
	var out []*http.Request
	for _, k := range order {
		e := &evs[last[k]]
		desc := cut(e.Kind+" "+e.Namespace+"/"+e.Name+": step ["+e.Step+"] "+verb(e), 139)
		if e.Message != "" {
			desc = cut(desc+": "+e.Message, 139)
		}
		base := strings.TrimRight(t.Address, "/")
		var req *http.Request
		var err error
		if t.Type == api.TypeGitHub {
			if base == "" {
				base = "https://api.github.com"
			}
			b, _ := json.Marshal(map[string]any{"state": state(t.Type, e), "context": k.ctx, "description": desc,
				"target_url": Link(t.Dashboard, e)})
			req, err = post(base+"/repos/"+k.repo+"/statuses/"+url.PathEscape(k.rev), b)
			if err == nil {
				req.Header.Set("Accept", "application/vnd.github+json")
				if t.Token != "" {
					req.Header.Set("Authorization", "Bearer "+t.Token)
				}
			}
		} else {
			if base == "" {
				base = "https://gitlab.com"
			}
			b, _ := json.Marshal(map[string]any{"state": state(t.Type, e), "name": k.ctx, "description": desc,
				"target_url": Link(t.Dashboard, e)})
			req, err = post(base+"/api/v4/projects/"+url.PathEscape(k.repo)+"/statuses/"+url.PathEscape(k.rev), b)
			if err == nil && t.Token != "" {
				req.Header.Set("PRIVATE-TOKEN", t.Token)
			}
		}
		if err != nil {
			return nil, err
		}
		out = append(out, req)
	}
	return out, nil
}

// StatusContext names a commit status: one per owner and step.
func StatusContext(e *Event) string {
	return "kontinue/" + e.Namespace + "/" + e.Name + "/" + e.Step
}
