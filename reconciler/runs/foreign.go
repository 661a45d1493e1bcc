package runs

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/jsonvalue"
)

// Foreign runs are runs of a step or a Runnable that another controller
// created: Cartographer's, found after a switch (docs/migration.md). They
// carry the step's (Runnable's) labels and controller reference, but no
// input digest, and Kontinue's watches do not see them. Cartographer knew
// which inputs a run had only in memory; Kontinue recognises the run of
// the current inputs by what the run holds, as Cartographer compared a run
// with the object it created, and adopts every foreign run (labels them
// as its own), so that retention counts them and no run is created again
// for inputs that ran.

// ForeignDigest is the input digest an adopted foreign run that is not of
// the current inputs is labelled with: no input set has it.
const ForeignDigest = "foreign"

// NewestForeign returns the foreign run that may be of the current
// inputs: the newest, unless a run Kontinue created is newer (the newest
// run decides, NeedsCreate). ours must be sorted newest first; nil: none
// may be.
func NewestForeign(foreign []*unstructured.Unstructured, ours []Run) *unstructured.Unstructured {
	var newest *unstructured.Unstructured
	for _, f := range foreign {
		if newest == nil || newerObject(f, newest) {
			newest = f
		}
	}
	if newest != nil && len(ours) > 0 && ours[0].Created.After(newest.GetCreationTimestamp().Time) {
		return nil
	}
	return newest
}

func newerObject(a, b *unstructured.Unstructured) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return tb.Before(&ta)
	}
	return a.GetName() > b.GetName()
}

// SameInputs reports whether live, a foreign run, is a run of desired, the
// run rendered now, given dryRun, desired as the API server would store
// it (a dry-run create: its defaults and admission webhooks' changes):
//   - it has desired's name, or was generated from desired's generateName;
//   - every label and annotation desired renders (Kontinue's own,
//     kontinue.dev/…, aside) has the same value on live;
//   - everything but metadata and status is the same in live and dryRun,
//     where each object's own name and UID (which the API server puts in
//     what it generates, e.g. a Job's selector) read alike.
//
// So a run with other inputs, from a template that changed (a field added,
// removed or changed, defaults included), or that someone edited, is not
// the current inputs' run: the safe side is one more run.
func SameInputs(desired, dryRun, live *unstructured.Unstructured) bool {
	if n := desired.GetName(); n != "" {
		if live.GetName() != n {
			return false
		}
	} else if live.GetGenerateName() != desired.GetGenerateName() {
		return false
	}
	if !rendered(desired.GetLabels(), live.GetLabels()) || !rendered(desired.GetAnnotations(), live.GetAnnotations()) {
		return false
	}
	return jsonvalue.Equal(body(dryRun), body(live))
}

// rendered reports whether have holds every entry of want but Kontinue's.
func rendered(want, have map[string]string) bool {
	for k, v := range want {
		if strings.HasPrefix(k, "kontinue.dev/") {
			continue
		}
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Placeholders of an object's own identity in body.
const (
	ownName = "\x00name"
	ownUID  = "\x00uid"
)

// body is u's content but metadata and status, with the strings equal to
// its own name or UID replaced by placeholders.
func body(u *unstructured.Unstructured) map[string]any {
	name, uid := u.GetName(), string(u.GetUID())
	var walk func(v any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			m := make(map[string]any, len(t))
			for k, e := range t {
				m[k] = walk(e)
			}
			return m
		case []any:
			l := make([]any, len(t))
			for i, e := range t {
				l[i] = walk(e)
			}
			return l
		case string:
			switch {
			case t == "":
			case t == uid:
				return ownUID
			case t == name:
				return ownName
			}
		}
		return v
	}
	out := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "metadata" && k != "status" {
			out[k] = walk(v)
		}
	}
	return out
}
