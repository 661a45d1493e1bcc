package attest

import (
	"context"
	"errors"
	"sort"
	"strings"

	intoto "github.com/in-toto/attestation/go/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// The controller's half: sign each step's statement when its current
// input set succeeds, kept in the owner's history ConfigMap under
// DataKey(step), written with the history (history.Recorder.Extra).

// DataKeyPrefix starts every attestation's key in the history ConfigMap.
const DataKeyPrefix = "attestation."

// MaxEnvelope bounds one signed envelope: values in provenance are cut to
// st.ValueLimit, so a real one takes a few KiB; past this something is
// wrong, and the ConfigMap (1 MiB, shared with the history) must not fill.
const MaxEnvelope = 32 << 10

// DataKey is the ConfigMap key of step's signed envelopes: one line of
// DSSE JSON each, the in-toto bundle format (.intoto.jsonl) tools read,
// oldest first (the last line is the current input set's).
func DataKey(step string) string { return DataKeyPrefix + step + ".intoto.jsonl" }

// KeepStatements is how many signed statements a step's key keeps: its
// last few input sets. A later step (a Deliverable the Workload stamped)
// may still hold an output of an earlier set, and its verification (rule
// kontinue) needs the statement naming that output, not only the newest.
const KeepStatements = 5

// MaxBundle bounds a step's key (all its envelopes): older envelopes are
// dropped first to fit; the newest (at most MaxEnvelope) always stays.
// With the history's half of the ConfigMap (history.MaxBytes), it leaves
// room for the keys of about seven steps at their largest, and for the
// keys of some fifty steps of the usual 2 KiB envelopes.
const MaxBundle = 64 << 10

// Envelopes are the envelopes a step's key holds, oldest first (one per
// line; blank lines skipped).
func Envelopes(stored string) []string {
	var out []string
	for _, l := range strings.Split(stored, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Retain is what a step's key keeps once fresh is signed: fresh last,
// after the newest of kept (oldest first) that fit in keep envelopes and
// max bytes (with their line ends). fresh itself is always kept.
func Retain(kept []string, fresh string, keep, max int) []string {
	out := []string{fresh}
	size := len(fresh) + 1
	for i := len(kept) - 1; i >= 0 && len(out) < keep; i-- {
		if size+len(kept[i])+1 > max {
			break
		}
		size += len(kept[i]) + 1
		out = append(out, kept[i])
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Due are the steps of next whose current input set succeeded, or whose
// outputs changed, since prev: the statements to sign now. The same status
// twice yields none, so a restart or a resync signs and writes nothing.
func Due(prev, next []st.Resource) []string {
	var out []string
	for i := range next {
		r := &next[i]
		if r.Provenance == nil || r.Provenance.Current == nil || r.Provenance.Current.Outcome != st.OutcomeSucceeded {
			continue
		}
		if b := findStep(prev, r.Name); b != nil && attested(b) == attested(r) {
			continue
		}
		out = append(out, r.Name)
	}
	return out
}

// attested is what a step's statement says that can change: the input
// set, its outcome, what it published, the object it applied and the
// template it was rendered from (a re-render keeps the set).
func attested(r *st.Resource) string {
	var b strings.Builder
	if t := r.TemplateRef; t != nil {
		b.WriteString(t.Kind + "/" + t.Name + "|")
	}
	if r.Provenance != nil && r.Provenance.Current != nil {
		b.WriteString(r.Provenance.Current.Digest + "|" + r.Provenance.Current.Outcome)
	}
	for _, o := range r.Outputs {
		b.WriteString("|" + o.Name + "=" + o.Digest)
	}
	if ref := r.StampedRef; ref != nil {
		b.WriteString("|" + ref.Kind + "/" + ref.Namespace + "/" + ref.Name)
	}
	return b.String()
}

// UpstreamOf is the Workload step that stamped owner, when owner is a
// Deliverable whose controller is a Workload: from the Deliverable's own
// metadata (controller reference, carto.run labels, applied digest), which
// the controller and the CLI read alike.
func UpstreamOf(owner *unstructured.Unstructured) *Upstream {
	if owner == nil || owner.GetKind() != api.KindDeliverable {
		return nil
	}
	ref := metav1.GetControllerOf(owner)
	if ref == nil || ref.Kind != api.KindWorkload {
		return nil
	}
	up := &Upstream{Kind: ref.Kind, Namespace: owner.GetNamespace(), Name: ref.Name, UID: string(ref.UID)}
	if l := owner.GetLabels(); l[api.LabelWorkloadName] == ref.Name {
		up.Step = l[api.LabelResourceName]
		// The Workload step's set, as its subject names it (DigestInputSet).
		ann := owner.GetAnnotations()
		if up.Digest = ann[api.AnnotationInputSet]; up.Digest == "" {
			up.Digest = ann[api.AnnotationDigest]
		}
	}
	return up
}

// Signer signs the statements of owners' steps as they succeed.
type Signer struct {
	Key     *Key
	Version string
	// logf is the log (tests replace it).
	logf func(msg string, kv ...any)
}

// NewSigner signs with key, as Kontinue version.
func NewSigner(key *Key, version string) *Signer {
	return &Signer{Key: key, Version: version, logf: klog.InfoS}
}

// Extra is history.Recorder.Extra: the signed envelope of each step Due,
// by its DataKey.
func (s *Signer) Extra(o history.Owner, prev, next []st.Resource) map[string]string {
	due := Due(prev, next)
	if len(due) == 0 {
		return nil
	}
	status := st.OwnerStatus{Resources: next}
	if o.Status != nil {
		status = *o.Status
	}
	in := Input{Owner: Owner{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID},
		Status: status, Upstream: UpstreamOf(o.Object), Version: s.Version}
	out := map[string]string{}
	sort.Strings(due)
	for _, step := range due {
		key := DataKey(step)
		if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
			s.logf("attestation not written: the step's name makes no ConfigMap key", "owner", o.Kind+"/"+o.Namespace+"/"+o.Name, "step", step, "err", strings.Join(errs, "; "))
			continue
		}
		in.Step = step
		stmt, err := Build(in)
		if err != nil {
			// A success with nothing to name (no outputs, no object): a
			// passThrough step.
			continue
		}
		env, err := Sign(context.Background(), s.Key, stmt)
		if err == nil && len(env) > MaxEnvelope {
			err = errTooLarge
		}
		if err != nil {
			s.logf("attestation not signed", "owner", o.Kind+"/"+o.Namespace+"/"+o.Name, "step", step, "err", err)
			continue
		}
		out[key] = string(env)
	}
	return out
}

var errTooLarge = errors.New("signed envelope larger than 32 KiB")

// Merge is history.Recorder.Merge: the value of a step's key once fresh
// (Extra's newest envelope) is signed, from what the ConfigMap holds
// (stored). Of stored it keeps the envelopes this key verifies that are
// about o (kind, namespace, name, uid) and about other subjects than
// fresh's (a set taken again is named once, by its newest statement),
// within KeepStatements and MaxBundle. What it cannot vouch for (an
// envelope edited, copied from another owner, or signed with an earlier
// key) is dropped, not carried along.
func (s *Signer) Merge(o history.Owner, key, stored, fresh string) string {
	if !strings.HasPrefix(key, DataKeyPrefix) || stored == "" {
		return fresh
	}
	ctx := context.Background()
	subjects := func(env string) (string, bool) {
		stmt, err := Verify(ctx, s.Key, []byte(env))
		if err != nil {
			return "", false
		}
		who, err := OwnerOf(stmt)
		if err != nil || who.Kind != o.Kind || who.Namespace != o.Namespace || who.Name != o.Name || (o.UID != "" && who.UID != o.UID) {
			return "", false
		}
		b, err := Marshal(&intoto.Statement{Subject: stmt.GetSubject()})
		return string(b), err == nil
	}
	same, ok := subjects(fresh)
	if !ok {
		return fresh
	}
	var kept []string
	for _, env := range Envelopes(stored) {
		if subj, ok := subjects(env); ok && subj != same {
			kept = append(kept, env)
		}
	}
	return strings.Join(Retain(kept, fresh, KeepStatements, MaxBundle), "\n")
}
