package check

import (
	"sort"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Snapshot is the cluster as read at one moment: every object of the run,
// as the JSON the API server sent.
type Snapshot struct {
	At      time.Time
	Objects map[Key][]byte
}

// Put adds an object (its key from its own metadata).
func (s *Snapshot) Put(group, resource string, obj []byte) {
	if s.Objects == nil {
		s.Objects = map[Key][]byte{}
	}
	m := MetaOf(obj)
	if m == nil {
		return
	}
	s.Objects[Key{Group: group, Resource: resource, Namespace: m.Namespace, Name: m.Name}] = obj
}

// Keys are the snapshot's keys in order.
func (s *Snapshot) Keys() []Key {
	ks := make([]Key, 0, len(s.Objects))
	for k := range s.Objects {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].String() < ks[j].String() })
	return ks
}

// Owner is a Workload or Deliverable of the snapshot.
type Owner struct {
	Key  Key
	Kind string
	Meta *Meta
	JSON []byte
}

// Owners are the snapshot's Workloads and Deliverables.
func (s *Snapshot) Owners() []Owner {
	var out []Owner
	for _, k := range s.Keys() {
		if k.Group != OwnGroup || (k.Resource != "workloads" && k.Resource != "deliverables") {
			continue
		}
		obj := s.Objects[k]
		m := MetaOf(obj)
		out = append(out, Owner{Key: k, Kind: m.Kind, Meta: m, JSON: obj})
	}
	return out
}

// OwnerByUID finds the owner an object's controller reference names.
func (s *Snapshot) OwnerByUID(uid string) *Owner {
	for _, o := range s.Owners() {
		if o.Meta.UID == uid {
			return &o
		}
	}
	return nil
}

// Settled says whether the owner's status describes its current generation.
func (o *Owner) Settled() bool {
	return gjson.GetBytes(o.JSON, "status.observedGeneration").Int() == o.Meta.Generation
}

// Step is the owner's status entry for a step.
func (o *Owner) Step(name string) gjson.Result { return stepStatus(o.JSON, name) }

// Param is the raw JSON of the owner's param name (spec.params).
func (o *Owner) Param(name string) (string, bool) {
	var raw string
	found := false
	gjson.GetBytes(o.JSON, "spec.params").ForEach(func(_, p gjson.Result) bool {
		if p.Get("name").String() == name {
			raw, found = p.Get("value").Raw, p.Get("value").Exists()
			return false
		}
		return true
	})
	return raw, found
}

// KeyOfRef is the key of a stampedRef (resource is "plural.group").
func KeyOfRef(ref gjson.Result) Key {
	res := ref.Get("resource").String()
	plural, group, _ := strings.Cut(res, ".")
	if plural == "" {
		plural = strings.ToLower(ref.Get("kind").String()) + "s"
	}
	return Key{Group: group, Resource: plural, Namespace: ref.Get("namespace").String(), Name: ref.Get("name").String()}
}

// condition is a condition of a conditions array.
func condition(conds gjson.Result, typ string) gjson.Result {
	var out gjson.Result
	conds.ForEach(func(_, c gjson.Result) bool {
		if c.Get("type").String() == typ {
			out = c
			return false
		}
		return true
	})
	return out
}

// Served says which owners a replica serves: its shard label names a shard
// a replica runs for ("" is the default shard).
type Served func(shard string) bool

func (o *Owner) served(served Served) bool {
	return served == nil || served(o.Meta.Labels[LabelShard])
}

// createdByKontinue is the set of uids of the incarnations Kontinue created.
func createdByKontinue(h *History) map[string]bool {
	out := map[string]bool{}
	for uid, in := range h.Incarnations() {
		if in.Created != nil && h.ByKontinue(in.Created) {
			out[uid] = true
		}
	}
	return out
}
