package stamp

// Fights: Kontinue never fights another writer over a field. An object
// Kontinue has to write again and again with the same desired content
// (nothing it renders changed) is being changed back by someone else after
// each write: another controller that owns the field (the deployment
// controller's revision annotation), a webhook, a person. Each side would
// write forever. So Kontinue counts, per object, its repairs of one desired
// object (applies that change the object again although Kontinue's own
// last write of the same content is what it had), and past FightRepairs of
// them within FightWindow it stops writing that content to that object:
// the write fails with a Fight (failure.Contested) that names the field
// and the manager that sets it back (from the object's managedFields), the
// owner gets a Warning event, and the fight is counted (Fights.Declared).
//
// The bound: after its create, one desired object is applied to one object
// at most 1 + FightRepairs times within FightWindow (its first apply and
// the repairs); the next repair is refused, and so is every write of that
// content for FightWindow from then. A new desired object (an input or a
// template changed), a new object of that name, or the end of the hold
// starts the count again. Legitimate repairs stay far below the bound: a
// hand edit is repaired once, a template change is new content. The hot
// path costs nothing: an object already up to date is never looked at, and
// a write costs one digest of what it writes; only the repair past the
// bound reads the object (for its managedFields).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"kontinue.dev/kontinue/reconciler/apply"
	"kontinue.dev/kontinue/reconciler/failure"
	"kontinue.dev/kontinue/reconciler/jsonvalue"
	"kontinue.dev/kontinue/tracking"
)

// The fight bound (see above).
const (
	FightRepairs = 5
	FightWindow  = 10 * time.Minute
)

// Fight is a write Kontinue refused: another manager keeps changing Field
// of Object back after each of Kontinue's writes of the same content.
type Fight struct {
	Object  string // "Deployment ns/name"
	Field   string // the first field that differs ("": none found)
	Manager string // who owns it now, from managedFields ("": not known)
	Repairs int    // Kontinue's repairs of the same content
	Within  time.Duration
	Until   time.Time // writes of this content resume then
	// declared: this write found the fight (its event is due); later ones
	// only repeat it.
	declared bool
}

func (f *Fight) Error() string {
	who := "another writer"
	if f.Manager != "" {
		who = fmt.Sprintf("manager [%s]", f.Manager)
	}
	field := "a field Kontinue applies"
	if f.Field != "" {
		field = fmt.Sprintf("field [%s]", f.Field)
	}
	return fmt.Sprintf("Kontinue stopped writing %s: %s sets %s back after each write (%d writes of the same content in %s); "+
		"Kontinue does not fight another controller over a field: leave the field to one of them (drop it from the template, "+
		"or stop the other writer). Kontinue writes it again when what it renders changes, or after %s",
		f.Object, who, field, f.Repairs+1, f.Within.Round(100*time.Millisecond), f.Until.Format(time.RFC3339))
}

// Fights is the memory behind the bound: per object (UID), the content
// Kontinue last wrote to it, the version that write made and its repairs.
type Fights struct {
	mu    sync.Mutex
	m     map[types.UID]*fightMemo
	swept time.Time
	now   func() time.Time
	// Declared, when set, is told of each fight found (metrics).
	Declared func()
}

type fightMemo struct {
	digest  string    // the content (its digest)
	rv      string    // the version Kontinue's last write of it made
	repairs int       // writes of it since first that changed the object again
	first   time.Time // the first of those repairs
	last    time.Time // the last write (sweeping)
	fight   *Fight    // found: writes of digest refused until fight.Until
}

// fightSweepAt is the size past which memories older than FightWindow are
// dropped (at most once per FightWindow).
const fightSweepAt = 4096

// NewFights returns an empty memory.
func NewFights() *Fights { return &Fights{m: map[types.UID]*fightMemo{}, now: time.Now} }

// fightWrite is one apply under way: what Fights learns once it is done.
type fightWrite struct {
	f      *Fights
	uid    types.UID
	digest string
}

// fightCheck decides, before desired is applied over cached (not up to
// date with it), whether the apply would fight: then it refuses it (a
// failure.Contested error) or, when a fresh read shows the object up to
// date after all (the cache was behind), returns that object, to be taken
// as the apply's without writing. Otherwise the apply goes on, and its
// result is told to the fightWrite.
func (w *Session) fightCheck(ctx context.Context, cl dynamic.Interface, gvr schema.GroupVersionResource, desired, cached *unstructured.Unstructured) (fightWrite, *unstructured.Unstructured, error) {
	fs := w.Writer.Fights
	if fs == nil || cached == nil || cached.GetUID() == "" {
		return fightWrite{}, nil, nil
	}
	fw := fightWrite{f: fs, uid: cached.GetUID(), digest: apply.Digest(desired.Object)}
	fight, due := fs.check(fw.uid, fw.digest)
	switch {
	case fight != nil:
		return fw, nil, &failure.Error{Class: failure.Contested, Err: fight}
	case !due:
		return fw, nil, nil
	}
	// One repair too many, by the cache. The object as it is now, with its
	// managedFields: the cache may be behind (then there is nothing to
	// write), else it names who changed it.
	full, err := resource(cl, gvr, desired.GetNamespace()).Get(ctx, desired.GetName(), metav1.GetOptions{})
	if err != nil || full.GetUID() != fw.uid {
		return fw, nil, nil // the apply decides, as it would have
	}
	if upToDate(desired, full) {
		tracking.Compact(full)
		return fw, full, nil
	}
	field, manager, ok := contested(unridden(desired, full), full)
	if !ok {
		// Every field that differs is Kontinue's own: the API server keeps
		// it otherwise than written (a quantity, a default), and no one
		// else set it. No fight; the count starts again.
		fs.forgive(fw.uid, fw.digest)
		return fw, nil, nil
	}
	fight = fs.declare(fw.uid, fw.digest, full, field, manager)
	return fw, nil, &failure.Error{Class: failure.Contested, Err: fight}
}

// wrote tells the memory that the apply over cached made version live.
func (fw fightWrite) wrote(cached, live *unstructured.Unstructured) {
	if fw.f == nil || live == nil || live.GetUID() != fw.uid {
		return
	}
	fw.f.wrote(fw.uid, fw.digest, cached.GetResourceVersion(), live.GetResourceVersion())
}

// check says whether a write of content digest to uid is refused (the
// fight found before, still held), or due for a look (it would be one
// repair past the bound).
func (f *Fights) check(uid types.UID, digest string) (*Fight, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.m[uid]
	if m == nil || m.digest != digest {
		return nil, false
	}
	now := f.now()
	if m.fight != nil {
		if now.Before(m.fight.Until) {
			c := *m.fight
			c.declared = false
			return &c, false
		}
		delete(f.m, uid) // held long enough: the count starts again
		return nil, false
	}
	return nil, m.repairs >= FightRepairs && now.Sub(m.first) <= FightWindow
}

// wrote records that Kontinue's apply of content digest over version
// before of uid left version rv. A repair changed the object (rv is not
// before) that Kontinue's own last write of the same content had made (rv
// is not that write's either: an apply over a cached copy that was behind
// changes nothing).
func (f *Fights) wrote(uid types.UID, digest, before, rv string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	m := f.m[uid]
	switch {
	case m == nil || m.digest != digest:
		f.m[uid] = &fightMemo{digest: digest, rv: rv, last: now}
		f.sweep(now)
		return
	case m.rv == rv:
		return
	case rv == before:
		m.rv = rv // changed nothing: others changed the object (its status), not Kontinue
		return
	case m.repairs == 0 || now.Sub(m.first) > FightWindow:
		m.repairs, m.first = 1, now
	default:
		m.repairs++
	}
	m.rv, m.last = rv, now
}

// forgive drops the repairs counted for content digest of uid: they were
// no fight.
func (f *Fights) forgive(uid types.UID, digest string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.m[uid]; m != nil && m.digest == digest {
		m.repairs = 0
	}
}

// declare records the fight over uid found with live (read afresh) over
// field, which manager owns.
func (f *Fights) declare(uid types.UID, digest string, live *unstructured.Unstructured, field, manager string) *Fight {
	f.mu.Lock()
	now := f.now()
	m := f.m[uid]
	if m == nil || m.digest != digest {
		m = &fightMemo{digest: digest, first: now}
		f.m[uid] = m
	}
	fight := &Fight{Object: fmt.Sprintf("%s %s/%s", live.GetKind(), live.GetNamespace(), live.GetName()), Field: field, Manager: manager,
		Repairs: m.repairs, Within: now.Sub(m.first), Until: now.Add(FightWindow), declared: true}
	m.fight, m.last = fight, now
	declared := f.Declared
	f.mu.Unlock()
	if declared != nil {
		declared()
	}
	return fight
}

// sweep drops memories older than FightWindow whose hold is over, when
// there are many (f.mu held).
func (f *Fights) sweep(now time.Time) {
	if len(f.m) <= fightSweepAt || now.Sub(f.swept) <= FightWindow {
		return
	}
	f.swept = now
	for uid, m := range f.m {
		if now.Sub(m.last) > FightWindow && (m.fight == nil || now.After(m.fight.Until)) {
			delete(f.m, uid)
		}
	}
}

// Forget drops what is remembered of uid (deleted).
func (f *Fights) Forget(uid types.UID) {
	if f == nil {
		return
	}
	f.mu.Lock()
	delete(f.m, uid)
	f.mu.Unlock()
}

// Len is the number of objects remembered (tests).
func (f *Fights) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// Declared reports whether err is a fight found by this very write (its
// event is due), and the fight.
func Declared(err error) (*Fight, bool) {
	var fight *Fight
	if !errors.As(err, &fight) {
		return nil, false
	}
	return fight, fight.declared
}

// contested names the first field of desired (fields in order) that live
// holds otherwise and that another manager than Kontinue owns in live's
// managedFields, and that manager: whoever set it back. A field someone
// removed has no owner: then the other manager that wrote last is named.
// ok is false when every field that differs is still Kontinue's own (the
// API server keeps it otherwise than written): no one set it back.
func contested(desired, live *unstructured.Unstructured) (field, manager string, ok bool) {
	type entry struct {
		manager string
		set     map[string]any
	}
	var others []entry
	var latest string
	var latestAt time.Time
	for _, e := range live.GetManagedFields() {
		if e.Manager == FieldManager || e.FieldsV1 == nil {
			continue
		}
		if e.Time != nil && (latest == "" || e.Time.After(latestAt)) {
			latest, latestAt = e.Manager, e.Time.Time
		}
		var set map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &set) == nil && len(set) > 0 {
			others = append(others, entry{e.Manager, set})
		}
	}
	for _, d := range diffs(desired.Object, live.Object, nil, nil) {
		if !d.present {
			return pathString(d.path), latest, true
		}
		for _, e := range others {
			if owns(e.set, live.Object, d.path) {
				return pathString(d.path), e.manager, true
			}
		}
	}
	return "", "", false
}

// diff is a field of want that live holds otherwise (present) or not at
// all.
type diff struct {
	path    []any
	present bool
}

// maxDiffs bounds the fields diffs lists: a fight is over a few.
const maxDiffs = 32

// diffs lists the fields of want that live does not hold (as
// apply.UpToDate compares), in key order: the leaves, or the list whose
// length differs.
func diffs(want, live any, path []any, out []diff) []diff {
	if len(out) >= maxDiffs {
		return out
	}
	switch w := want.(type) {
	case map[string]any:
		l, _ := live.(map[string]any)
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lv, ok := l[k]
			switch {
			case !ok && !empty(w[k]):
				out = append(out, diff{path: appendPath(path, k)})
			case ok:
				out = diffs(w[k], lv, appendPath(path, k), out)
			}
		}
		return out
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return append(out, diff{path: path, present: ok})
		}
		for i := range w {
			out = diffs(w[i], l[i], appendPath(path, i), out)
		}
		return out
	default:
		if jsonvalue.Equal(want, live) {
			return out
		}
		return append(out, diff{path: path, present: true})
	}
}

// appendPath is path and p, in a new slice (paths are kept).
func appendPath(path []any, p any) []any {
	return append(append(make([]any, 0, len(path)+1), path...), p)
}

func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// owns reports whether a managedFields set (FieldsV1, decoded) holds the
// field at path of obj, or an atomic value around it.
func owns(set map[string]any, obj any, path []any) bool {
	node, cur := set, obj
	for _, p := range path {
		if len(node) == 0 {
			return true // an atomic value, owned whole
		}
		switch k := p.(type) {
		case string:
			child, ok := node["f:"+k].(map[string]any)
			if !ok {
				return false
			}
			m, _ := cur.(map[string]any)
			node, cur = child, m[k]
		case int:
			l, _ := cur.([]any)
			if k >= len(l) {
				return false
			}
			child := item(node, l[k], k)
			if child == nil {
				return false
			}
			node, cur = child, l[k]
		}
	}
	return true
}

// item is the set of list item it (at index i) in node: keyed by its
// key fields ("k:{…}"), its value ("v:…") or its index ("i:N").
func item(node map[string]any, it any, i int) map[string]any {
	for key, v := range node {
		child, _ := v.(map[string]any)
		if child == nil {
			child = map[string]any{}
		}
		switch {
		case strings.HasPrefix(key, "k:"):
			var fields map[string]any
			m, ok := it.(map[string]any)
			if !ok || json.Unmarshal([]byte(key[2:]), &fields) != nil {
				continue
			}
			match := true
			for f, want := range fields {
				if !jsonvalue.Equal(want, m[f]) {
					match = false
				}
			}
			if match {
				return child
			}
		case strings.HasPrefix(key, "v:"):
			var want any
			if json.Unmarshal([]byte(key[2:]), &want) == nil && jsonvalue.Equal(want, it) {
				return child
			}
		case key == fmt.Sprintf("i:%d", i):
			return child
		}
	}
	return nil
}

// pathString writes a path as people read it: spec.template.spec.
// containers[0].image, metadata.annotations["deployment.kubernetes.io/revision"].
func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch k := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		case string:
			if strings.ContainsAny(k, "./") {
				fmt.Fprintf(&b, "[%q]", k)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		}
	}
	return b.String()
}
