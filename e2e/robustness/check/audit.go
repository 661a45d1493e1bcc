// Package check reads what the API server recorded of a robustness run
// (its audit log, and the cluster read at the end) and checks the
// invariants of e2e/robustness against it. Everything here is a pure
// function of those records: the oracle is the API server, never
// Kontinue, and each invariant is tested on small hand-made histories.
package check

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// Event is one write the API server answered, as its audit log has it.
type Event struct {
	Seq  int       // position in the log
	Time time.Time // when the response was complete (stageTimestamp)
	Verb string    // create, update, patch, delete, deletecollection
	// User wrote it; As is the user it impersonated ("" if none).
	User, As                     string
	Group, Resource, Subresource string
	Namespace, Name              string
	Code                         int
	// Obj is the object the response carried (nil when it was a Status or
	// nothing); for a delete answered with a Status, Obj holds only the uid
	// the Status names.
	Obj *Meta
	// Response is the response object's JSON, as the API server sent it.
	Response []byte
	// Req is the metadata of the object the request carried (nil when it
	// carried none, or a patch that is not an object): what the writer
	// meant, also when the write was refused.
	Req *Meta
}

// OK says the API server did the write.
func (e *Event) OK() bool { return e.Code >= 200 && e.Code < 300 }

// Key is the object the event wrote.
func (e *Event) Key() Key {
	name := e.Name
	if name == "" && e.Obj != nil {
		name = e.Obj.Name // a create with generateName
	}
	return Key{Group: e.Group, Resource: e.Resource, Namespace: e.Namespace, Name: name}
}

// Creates says the write made a new object: a create, or an apply of a
// name that did not exist.
func (e *Event) Creates() bool {
	return e.OK() && e.Subresource == "" && (e.Verb == "create" || (e.Verb == "patch" && e.Code == 201))
}

func (e *Event) String() string {
	who := e.User
	if e.As != "" {
		who += " as " + e.As
	}
	sub := ""
	if e.Subresource != "" {
		sub = "/" + e.Subresource
	}
	return fmt.Sprintf("%s %s %s %s%s (%d) by %s", e.Time.Format("15:04:05.000"), e.Verb, e.Key(), e.Resource, sub, e.Code, who)
}

// Key names an object: its resource (group and plural) and name.
type Key struct {
	Group, Resource, Namespace, Name string
}

func (k Key) String() string {
	r := k.Resource
	if k.Group != "" {
		r += "." + k.Group
	}
	if k.Namespace == "" {
		return r + "/" + k.Name
	}
	return r + "/" + k.Namespace + "/" + k.Name
}

// Meta is what the checks read of an object's metadata.
type Meta struct {
	Kind, Name, Namespace, UID string
	Generation                 int64
	ResourceVersion            int64
	Labels, Annotations        map[string]string
	Owners                     []OwnerRef
	Deleting                   bool
}

// OwnerRef is one of an object's ownerReferences.
type OwnerRef struct {
	Kind, Name, UID string
	Controller      bool
}

// Controller is the owner reference marked controller, or nil.
func (m *Meta) Controller() *OwnerRef {
	for i := range m.Owners {
		if m.Owners[i].Controller {
			return &m.Owners[i]
		}
	}
	return nil
}

// MetaOf reads the metadata of an object's JSON (nil when it has none).
func MetaOf(obj []byte) *Meta {
	md := gjson.GetBytes(obj, "metadata")
	if !md.IsObject() {
		return nil
	}
	m := &Meta{
		Kind:       gjson.GetBytes(obj, "kind").String(),
		Name:       md.Get("name").String(),
		Namespace:  md.Get("namespace").String(),
		UID:        md.Get("uid").String(),
		Generation: md.Get("generation").Int(),
		Deleting:   md.Get("deletionTimestamp").Exists(),
	}
	m.ResourceVersion, _ = strconv.ParseInt(md.Get("resourceVersion").String(), 10, 64)
	m.Labels = stringMap(md.Get("labels"))
	m.Annotations = stringMap(md.Get("annotations"))
	md.Get("ownerReferences").ForEach(func(_, r gjson.Result) bool {
		m.Owners = append(m.Owners, OwnerRef{Kind: r.Get("kind").String(), Name: r.Get("name").String(),
			UID: r.Get("uid").String(), Controller: r.Get("controller").Bool()})
		return true
	})
	return m
}

func stringMap(r gjson.Result) map[string]string {
	if !r.IsObject() {
		return nil
	}
	m := map[string]string{}
	r.ForEach(func(k, v gjson.Result) bool {
		m[k.String()] = v.String()
		return true
	})
	return m
}

// ReadAudit reads an audit log (JSON lines, audit.k8s.io/v1 Events) and
// keeps the events keep accepts (all when nil), in log order. It reads
// with gjson, which has no nesting limit: an object 10,000 levels deep is
// a write like any other.
func ReadAudit(r io.Reader, keep func(*Event) bool) ([]*Event, error) {
	var out []*Event
	br := bufio.NewReaderSize(r, 1<<20)
	seq := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			seq++
			ev, perr := parseEvent(line, seq)
			if perr != nil {
				// The last line of a log being written may be cut.
				if err == io.EOF {
					break
				}
				return out, fmt.Errorf("audit line %d: %w", seq, perr)
			}
			if ev != nil && (keep == nil || keep(ev)) {
				out = append(out, ev)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func parseEvent(line []byte, seq int) (*Event, error) {
	if !gjson.ValidBytes(line) {
		return nil, fmt.Errorf("not JSON: %.200s", line)
	}
	r := gjson.ParseBytes(line)
	if r.Get("stage").String() != "ResponseComplete" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, r.Get("stageTimestamp").String())
	if err != nil {
		return nil, fmt.Errorf("stageTimestamp: %w", err)
	}
	ev := &Event{
		Seq:         seq,
		Time:        t,
		Verb:        r.Get("verb").String(),
		User:        r.Get("user.username").String(),
		As:          r.Get("impersonatedUser.username").String(),
		Group:       r.Get("objectRef.apiGroup").String(),
		Resource:    r.Get("objectRef.resource").String(),
		Subresource: r.Get("objectRef.subresource").String(),
		Namespace:   r.Get("objectRef.namespace").String(),
		Name:        r.Get("objectRef.name").String(),
		Code:        int(r.Get("responseStatus.code").Int()),
	}
	if req := r.Get("requestObject"); req.IsObject() {
		ev.Req = MetaOf([]byte(req.Raw))
	}
	if resp := r.Get("responseObject"); resp.IsObject() {
		ev.Response = []byte(resp.Raw)
		if resp.Get("kind").String() == "Status" {
			if uid := resp.Get("details.uid").String(); uid != "" {
				ev.Obj = &Meta{UID: uid, Name: ev.Name, Namespace: ev.Namespace}
			}
		} else {
			ev.Obj = MetaOf(ev.Response)
		}
	}
	return ev, nil
}

// SortByTime orders events by time, then by their place in the log.
func SortByTime(evs []*Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		if !evs[i].Time.Equal(evs[j].Time) {
			return evs[i].Time.Before(evs[j].Time)
		}
		return evs[i].Seq < evs[j].Seq
	})
}
