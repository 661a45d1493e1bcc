package attest

import (
	"regexp"
	"strings"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/types/known/structpb"

	st "kontinue.dev/kontinue/reconciler/status"
)

// What a subject's or a dependency's digest is of, in its annotations: a
// digest people cannot tell apart by its algorithm alone.
const (
	DigestOfImage    = "image"     // the image's manifest: what the reference pins (@sha256:)
	DigestOfValue    = "value"     // the output's value as YAML: the status' outputs[].digest
	DigestOfInputSet = "input-set" // the object Kontinue applied: the input set it was written for
	DigestOfCommit   = "commit"    // the git commit the revision names
	DigestOfSource   = "source"    // an artifact digest the revision names (sha256:)
	DigestOfConfig   = "config"    // the config's value as YAML: the earlier step's outputs[config].digest
)

var (
	hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// A revision that names a git commit: Flux's "main@sha1:<sha>", its
	// older "main/<sha>", or a bare SHA-1.
	commitRev = regexp.MustCompile(`(?:^|[@/:])(?:sha1:)?([0-9a-f]{40})$`)
	// A revision that names an artifact by SHA-256 (an OCI source's
	// "latest@sha256:<digest>"): not a commit.
	sha256Rev = regexp.MustCompile(`(?:^|@)sha256:([0-9a-f]{64})$`)
	// An image reference pinned to a manifest digest.
	pinned = regexp.MustCompile(`@sha256:([0-9a-f]{64})$`)
)

// Subjects are what step r produced with its current input set: each
// output (an image pinned by digest by that digest, anything else by its
// value's digest as the status shows it), and the object it applied (by
// its applied digest, the current set's digest).
func Subjects(r *st.Resource) []*intoto.ResourceDescriptor {
	var out []*intoto.ResourceDescriptor
	for _, o := range r.Outputs {
		d := &intoto.ResourceDescriptor{Name: o.Name}
		v, whole := r.OutputString(o.Name)
		if o.Name == "image" && whole {
			if m := pinned.FindStringSubmatch(v); m != nil {
				d.Digest = map[string]string{"sha256": m[1]}
				d.Annotations = annotations(map[string]string{"digestOf": DigestOfImage, "value": v})
				out = append(out, d)
				continue
			}
		}
		h, ok := strings.CutPrefix(o.Digest, "sha256:")
		if !ok || !hex64.MatchString(h) {
			continue // not a digest Kontinue wrote: nothing to name it by
		}
		d.Digest = map[string]string{"sha256": h}
		a := map[string]string{"digestOf": DigestOfValue}
		if whole && o.Name != "config" && !strings.Contains(v, "\n") {
			a["value"] = v
		}
		d.Annotations = annotations(a)
		out = append(out, d)
	}
	if ref := r.StampedRef; ref != nil && r.Provenance != nil && r.Provenance.Current != nil && r.Provenance.Current.Digest != "" {
		out = append(out, &intoto.ResourceDescriptor{
			Name:   ref.Kind + "/" + ref.Namespace + "/" + ref.Name,
			Digest: map[string]string{DigestInputSet: r.Provenance.Current.Digest},
			Annotations: annotations(map[string]string{"digestOf": DigestOfInputSet, "apiVersion": ref.APIVersion,
				"step": r.Name}),
		})
	}
	return out
}

// Dependencies are the input values of set (and, for a Deliverable, the
// Workload step that stamped it): what produced the step's outputs.
func Dependencies(set *st.InputSet, up *Upstream) ([]*intoto.ResourceDescriptor, error) {
	var out []*intoto.ResourceDescriptor
	source := func(kind string, s st.SourceValue) {
		d := &intoto.ResourceDescriptor{Name: s.Name, Uri: s.URL}
		a := map[string]string{"input": kind, "step": s.Resource}
		if s.Revision != "" {
			a["revision"] = s.Revision
		}
		if cut(s.Revision) {
			// A revision cut to the limit names no commit for sure.
		} else if m := commitRev.FindStringSubmatch(s.Revision); m != nil {
			d.Digest, a["digestOf"] = map[string]string{"gitCommit": m[1]}, DigestOfCommit
		} else if m := sha256Rev.FindStringSubmatch(s.Revision); m != nil {
			d.Digest, a["digestOf"] = map[string]string{"sha256": m[1]}, DigestOfSource
		}
		if cut(s.URL) {
			d.Uri = "" // not a locator any more
			a["url"] = s.URL
		}
		d.Annotations = annotations(a)
		out = append(out, d)
	}
	for _, s := range set.Sources {
		source("source", s)
	}
	for _, i := range set.Images {
		d := &intoto.ResourceDescriptor{Name: i.Name}
		a := map[string]string{"input": "image", "step": i.Resource}
		if cut(i.Image) {
			a["image"] = i.Image
		} else {
			d.Uri = i.Image
			if m := pinned.FindStringSubmatch(i.Image); m != nil {
				d.Digest, a["digestOf"] = map[string]string{"sha256": m[1]}, DigestOfImage
			}
		}
		d.Annotations = annotations(a)
		out = append(out, d)
	}
	for _, c := range set.Configs {
		d := &intoto.ResourceDescriptor{Name: c.Name}
		a := map[string]string{"input": "config", "step": c.Resource}
		if h, ok := strings.CutPrefix(c.Digest, "sha256:"); ok && hex64.MatchString(h) {
			d.Digest, a["digestOf"] = map[string]string{"sha256": h}, DigestOfConfig
		}
		d.Annotations = annotations(a)
		out = append(out, d)
	}
	if set.Deployment != nil {
		source("deployment", *set.Deployment)
	}
	if up != nil {
		d := &intoto.ResourceDescriptor{Name: up.Kind + "/" + up.Namespace + "/" + up.Name + "/" + up.Step}
		a := map[string]string{"input": "stampedBy", "step": up.Step}
		if up.UID != "" {
			a["uid"] = up.UID
		}
		if up.Digest != "" {
			d.Digest, a["digestOf"] = map[string]string{DigestInputSet: up.Digest}, DigestOfInputSet
		}
		d.Annotations = annotations(a)
		out = append(out, d)
	}
	for _, d := range out {
		if err := d.Validate(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cut reports whether a value was cut to fit the status (st.Value).
func cut(v string) bool { return strings.HasSuffix(v, st.TruncatedMarker) }

func annotations(m map[string]string) *structpb.Struct {
	f := make(map[string]*structpb.Value, len(m))
	for k, v := range m {
		f[k] = structpb.NewStringValue(v)
	}
	return &structpb.Struct{Fields: f}
}
