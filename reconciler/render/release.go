package render

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// A Helm step's release: what its last render produced, kept in the
// cluster in a Secret of the owner's namespace, owned by the owner, so that
// values a chart draws at random (randAlphaNum, genCA, uuidv4, ...) or finds
// with `lookup` stay the same across reconciles, restarts and leader
// changes until the step's inputs (chart, values, release name) change.
// A render with new inputs is an upgrade: the revision goes up by one and
// .Release.IsUpgrade is true. The Secret is the helm engine's memory, as
// Helm's own release Secrets are; the reconciler reads it before rendering
// and has stamp write it before it applies the new objects.

// HelmRelease is one kept render.
type HelmRelease struct {
	Inputs   string           `json:"inputs"` // digest of chart, values, release name and namespace
	Revision int              `json:"revision"`
	Objects  []map[string]any `json:"objects"`
}

func newHelmRelease(inputs string, revision int, objs []*unstructured.Unstructured) *HelmRelease {
	r := &HelmRelease{Inputs: inputs, Revision: revision, Objects: make([]map[string]any, len(objs))}
	for i, o := range objs {
		r.Objects[i] = o.DeepCopy().Object
	}
	return r
}

func (r *HelmRelease) objects() []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(r.Objects))
	for i, o := range r.Objects {
		out[i] = (&unstructured.Unstructured{Object: o}).DeepCopy()
	}
	return out
}

// ReleaseRecord carries a step's kept release into a render (Stored, nil if
// none) and the new one out of it (Next, set when the engine rendered).
type ReleaseRecord struct {
	Stored *HelmRelease
	Next   *HelmRelease
}

type releaseKey struct{}

// WithRelease returns ctx carrying r for the helm engine.
func WithRelease(ctx context.Context, r *ReleaseRecord) context.Context {
	return context.WithValue(ctx, releaseKey{}, r)
}

func releaseFrom(ctx context.Context) *ReleaseRecord {
	r, _ := ctx.Value(releaseKey{}).(*ReleaseRecord)
	return r
}

// The release Secret.
const (
	ReleaseSecretType  = "kontinue.dev/helm-release"
	ReleaseLabel       = "kontinue.dev/helm-release"
	ReleaseSelector    = ReleaseLabel + "=true"
	releaseKeyData     = "release.json.gz"
	releaseAnnRevision = "kontinue.dev/helm-revision"
	releaseAnnOwner    = "kontinue.dev/helm-owner"
	// maxReleaseBytes keeps the Secret under the API server's 1 MiB.
	maxReleaseBytes = 768 << 10
)

// ReleaseSecretName names the Secret of an owner's step: a digest, since
// owner and step names together can exceed a name's length.
func ReleaseSecretName(ownerKind, ownerName, step string) string {
	s := sha256.Sum256([]byte(ownerKind + "/" + ownerName + "/" + step))
	return "kontinue-helm-" + hex.EncodeToString(s[:10])
}

// ReleaseSecret is the Secret that keeps r, owned by owner. It fails when
// the compressed release does not fit in a Secret.
func ReleaseSecret(namespace, name string, owner metav1.OwnerReference, step string, r *HelmRelease) (*unstructured.Unstructured, error) {
	doc, err := json.Marshal(r)
	if err != nil {
		return nil, &StampError{Engine: HelmName, Message: "cannot keep the release", Err: err}
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(doc)
	_ = zw.Close()
	if buf.Len() > maxReleaseBytes {
		return nil, &StampError{Engine: HelmName, Message: fmt.Sprintf("the rendered chart is too large to keep as a release: %d bytes compressed, at most %d", buf.Len(), maxReleaseBytes)}
	}
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"type":       ReleaseSecretType,
		"metadata": map[string]any{
			"name":      name,
			"namespace": namespace,
			"labels":    map[string]any{ReleaseLabel: "true"},
			"annotations": map[string]any{
				releaseAnnRevision: strconv.Itoa(r.Revision),
				releaseAnnOwner:    owner.Kind + "/" + owner.Name + " step " + step,
			},
		},
		"data": map[string]any{releaseKeyData: base64.StdEncoding.EncodeToString(buf.Bytes())},
	}}
	s.SetOwnerReferences([]metav1.OwnerReference{owner})
	return s, nil
}

// Decoded releases by the digest of their Secret's data: the Secret is read
// on every reconcile of a helm step, and rarely changes.
var releases = newLRU(256, 64<<20)

// ParseReleaseSecret reads the release a Secret keeps. A Secret that is not
// one (edited by hand) is an error: the caller renders anew.
func ParseReleaseSecret(s *unstructured.Unstructured) (*HelmRelease, error) {
	data, _, _ := unstructured.NestedString(s.Object, "data", releaseKeyData)
	if data == "" {
		return nil, fmt.Errorf("secret [%s] has no %s", s.GetName(), releaseKeyData)
	}
	key := digest([]byte(data))
	if v, ok := releases.get(key); ok {
		return v.(*HelmRelease), nil
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	doc, err := io.ReadAll(io.LimitReader(zr, int64(limits.bytes)*4))
	if err != nil {
		return nil, err
	}
	var kept struct {
		Inputs   string            `json:"inputs"`
		Revision int               `json:"revision"`
		Objects  []json.RawMessage `json:"objects"`
	}
	if err := json.Unmarshal(doc, &kept); err != nil {
		return nil, err
	}
	if kept.Inputs == "" || kept.Revision < 1 {
		return nil, fmt.Errorf("secret [%s] holds no release", s.GetName())
	}
	r := &HelmRelease{Inputs: kept.Inputs, Revision: kept.Revision}
	for _, o := range kept.Objects {
		var m map[string]any
		// utiljson keeps integers as int64, as unstructured objects hold them.
		if err := utiljson.Unmarshal(o, &m); err != nil {
			return nil, err
		}
		r.Objects = append(r.Objects, m)
	}
	releases.add(key, r, int64(len(doc)), 0)
	return r, nil
}
