package verify

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	st "kontinue.dev/kontinue/reconciler/status"
)

// Target is what is checked of one input value: where its signatures are
// kept (an OCI repository) and the digest they must be about.
type Target struct {
	Type, Input string
	// Repository is the OCI repository the value lives in ("": none, e.g.
	// a git source or a config: only kontinue can be checked).
	Repository string
	// Ref is the image reference as the value gives it; Digest the
	// sha256:<hex> it names, "" when it names a tag (resolved once, by the
	// fetch).
	Ref, Digest string
	// ValueDigest is the digest of the value as a step's outputs show it
	// (st.Preview): what Kontinue's statements name an output by when it
	// is not an image pinned by digest (sources and configs; an image is
	// named by its digest).
	ValueDigest string
}

var sha256Digest = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

// TargetOf reads the target of an input of type typ named input with value
// v (an image reference; a source's url and revision; a config value).
func TargetOf(typ, input string, v any) (Target, error) {
	t := Target{Type: typ, Input: input}
	switch typ {
	case TypeImage:
		s, ok := v.(string)
		if !ok || s == "" {
			return t, fmt.Errorf("image [%s] is not a reference: %s", input, st.Value(v))
		}
		ref, err := name.ParseReference(s)
		if err != nil {
			return t, fmt.Errorf("image [%s]: %w", input, err)
		}
		t.Repository, t.Ref = ref.Context().Name(), s
		if d, ok := ref.(name.Digest); ok {
			t.Digest = d.DigestStr()
		}
	case TypeSource, TypeDeployment:
		url, rev := sourceParts(v)
		_, t.ValueDigest = st.Preview(rev)
		if d := sha256Digest.FindString(rev); d != "" {
			t.Digest = d
		} else if d := sha256Digest.FindString(url); d != "" {
			t.Digest = d
		}
		if t.Digest != "" {
			t.Repository = repositoryOf(url)
			t.Ref = t.Repository + "@" + t.Digest
		}
	case TypeConfig:
		t.ValueDigest = st.ConfigDigest(v)
	default:
		return t, fmt.Errorf("unknown input type %q", typ)
	}
	return t, nil
}

// Source is a source input's value for TargetOf.
type Source struct{ URL, Revision any }

func sourceParts(v any) (url, rev string) {
	switch s := v.(type) {
	case Source:
		url, rev = st.Value(s.URL), st.Value(s.Revision)
	case map[string]any:
		url, rev = st.Value(s["url"]), st.Value(s["revision"])
	}
	return url, rev
}

// repositoryOf is the OCI repository of a source's url: oci://host/repo or
// host/repo[:tag|@digest]; "" when it is not one (a git URL, an http one).
func repositoryOf(url string) string {
	s, oci := strings.CutPrefix(url, "oci://")
	if !oci && strings.Contains(url, "://") {
		return ""
	}
	if i := strings.Index(s, "@"); i >= 0 {
		s = s[:i]
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return ""
	}
	return ref.Context().Name()
}

// Pinned is the value a step renders with once the target passed: an
// image by the digest that was checked, spelled as the value spelled its
// repository (a value already naming that digest is kept as it is; a
// tag is replaced by the digest), so that a pinned value reads as its
// earlier step's output did.
func (t Target) Pinned(digest string) string {
	if t.Type != TypeImage || t.Repository == "" || digest == "" || t.Digest == digest {
		return t.Ref
	}
	base := t.Ref
	if i := strings.LastIndex(base, "@"); i >= 0 {
		base = base[:i]
	}
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		base = base[:i] // the tag
	}
	return base + "@" + digest
}
