package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// The launcher talks to the API server over plain HTTP with the admin
// certificate: it creates a handful of objects (Nodes, Tekton's CRDs and
// config maps) and polls a few more, so a client library adds nothing.

// apiError is an API server answer outside 2xx.
type apiError struct {
	method, path string
	code         int
	body         string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.path, e.code, e.body)
}

func isStatus(err error, code int) bool {
	e, ok := err.(*apiError)
	return ok && e.code == code
}

// call sends body (JSON-encoded unless it is []byte) with the given content
// type and decodes a JSON answer into out when out is not nil.
func (c *Cluster) call(ctx context.Context, method, path, contentType string, body, out any) error {
	client, err := c.HTTPClient()
	if err != nil {
		return err
	}
	var r io.Reader
	if body != nil {
		data, ok := body.([]byte)
		if !ok {
			if data, err = json.Marshal(body); err != nil {
				return err
			}
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Host+path, r)
	if err != nil {
		return err
	}
	if contentType == "" {
		contentType = "application/json"
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := string(data)
		var status struct{ Message string }
		if json.Unmarshal(data, &status) == nil && status.Message != "" {
			msg = status.Message
		}
		return &apiError{method: method, path: path, code: resp.StatusCode, body: msg}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// create POSTs obj to path; an object that exists already is left as is.
func (c *Cluster) create(ctx context.Context, path string, obj any) error {
	err := c.call(ctx, http.MethodPost, path, "", obj, nil)
	if isStatus(err, http.StatusConflict) {
		return nil
	}
	return err
}

// permanentError ends a poll at once.
type permanentError struct{ error }

// poll calls check every 200ms until it returns nil or a permanentError,
// ctx ends or timeout passes; the error then says what check last saw.
func poll(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if p, ok := err.(permanentError); ok {
			return fmt.Errorf("%s: %w", what, p.error)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not done after %s (last check: %v)", what, timeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// splitYAML returns the documents of a YAML stream as JSON objects,
// skipping empty ones.
func splitYAML(data []byte) ([]map[string]any, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(doc) > 0 {
			out = append(out, doc)
		}
	}
}

// str reads a string at path in a decoded JSON object ("" when absent).
func str(obj map[string]any, path ...string) string {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

// conditionStatus returns the status of the condition typ in
// obj.status.conditions ("" when absent) and its reason and message.
func conditionStatus(obj map[string]any, typ string) (status, reason, message string) {
	st, _ := obj["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return str(m, "status"), str(m, "reason"), str(m, "message")
		}
	}
	return "", "", ""
}
