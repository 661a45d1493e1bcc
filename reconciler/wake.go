package reconciler

import (
	"k8s.io/apimachinery/pkg/types"
)

// Why a key waits: Kontinue's own writes coming back as watch events are
// no news to the owner that made them (stamp.Echoes), but the event can
// reach routing before the write's answer reaches the reconcile that sent
// it. So an event of a stamped object is not judged when it arrives: its
// version is kept with the key, and judged when a worker takes the key. A
// key is never taken while it is reconciled, so by then the reconcile
// that wrote has recorded what it wrote. A key woken only by versions
// Kontinue wrote is not reconciled; any other reason (an edit, a fan-out,
// a timed look again, a retry) reconciles it.

// version is one version of a stamped object.
type version struct {
	uid types.UID
	rv  string
}

// wake is why a key was added since a worker last took it.
type wake struct {
	other    bool      // anything but a stamped object's version
	versions []version // the versions of its stamped objects seen
}

// maxVersions bounds what one key keeps: a key woken by more versions
// than that is reconciled (a busy object is news enough).
const maxVersions = 8

// woke records that key was added for a reason other than a stamped
// object's version.
func (c *Controller) woke(key Key) {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	if c.wakes == nil {
		c.wakes = map[Key]*wake{}
	}
	w := c.wakes[key]
	if w == nil {
		w = &wake{}
		c.wakes[key] = w
	}
	w.other, w.versions = true, nil
}

// wokeBy records that key was added because its stamped object uid
// reached version rv.
func (c *Controller) wokeBy(key Key, uid types.UID, rv string) {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	if c.wakes == nil {
		c.wakes = map[Key]*wake{}
	}
	w := c.wakes[key]
	if w == nil {
		w = &wake{}
		c.wakes[key] = w
	}
	if w.other {
		return
	}
	if len(w.versions) == maxVersions {
		w.other, w.versions = true, nil
		return
	}
	w.versions = append(w.versions, version{uid, rv})
}

// onlyEchoes takes key's reasons (a worker took it) and reports whether
// every one is a version Kontinue wrote: then it is not reconciled. A key
// with no reason recorded (a timed look again, a retry after backoff,
// added to the queue directly) is reconciled.
func (c *Controller) onlyEchoes(key Key) bool {
	c.wakeMu.Lock()
	w := c.wakes[key]
	delete(c.wakes, key)
	c.wakeMu.Unlock()
	if w == nil || w.other || len(w.versions) == 0 || c.Echo == nil {
		return false
	}
	echoes := true
	for _, v := range w.versions {
		// Every version is looked at (and forgotten when it was Kontinue's).
		echoes = c.Echo(v.uid, v.rv) && echoes
	}
	return echoes
}
