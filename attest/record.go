package attest

import (
	"context"
	"errors"
	"sort"
	"strings"

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

// DataKey is the ConfigMap key of step's signed envelope: one line of
// DSSE JSON, the in-toto bundle format (.intoto.jsonl) tools read.
func DataKey(step string) string { return DataKeyPrefix + step + ".intoto.jsonl" }

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
