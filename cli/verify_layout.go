package cli

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// `kontinue verify --oci-layout DIR`: the evidence read from a copy taken
// offline (an OCI image layout: `crane pull --format=oci --annotate-ref`,
// `oras copy --to-oci-layout`) rather than from the registry. The layout
// is served as a registry in process (go-containerregistry's), so the
// fetch and the decision are the controller's own code, unchanged: the
// same tags (cosign's sha256-<hex>.sig and .att), the same referrers API.

// refName is the OCI annotation naming a layout's manifest (a tag, or a
// whole reference).
const refName = "org.opencontainers.image.ref.name"

// layoutTransport loads the layout at dir into a registry in memory, each
// manifest under image's repository (by its ref name's tag, and by
// digest), and returns a transport that answers every registry request
// from it: nothing leaves the machine.
func layoutTransport(dir, image string) (http.RoundTripper, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, err
	}
	repo := ref.Context()
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("--oci-layout: %w", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("--oci-layout: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("--oci-layout: %w", err)
	}
	t := handlerTransport{ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))}
	opts := []remote.Option{remote.WithTransport(t)}
	for _, d := range im.Manifests {
		dst := []name.Reference{repo.Digest(d.Digest.String())}
		if n := d.Annotations[refName]; n != "" && !strings.Contains(n, "@") {
			dst = append(dst, repo.Tag(tagOf(n)))
		}
		for _, r := range dst {
			switch {
			case d.MediaType.IsIndex():
				ii, err := idx.ImageIndex(d.Digest)
				if err == nil {
					err = remote.WriteIndex(r, ii, opts...)
				}
				if err != nil {
					return nil, fmt.Errorf("--oci-layout: %s: %w", d.Digest, err)
				}
			case d.MediaType.IsImage():
				img, err := idx.Image(d.Digest)
				if err == nil {
					err = remote.Write(r, img, opts...)
				}
				if err != nil {
					return nil, fmt.Errorf("--oci-layout: %s: %w", d.Digest, err)
				}
			}
		}
	}
	return t, nil
}

// tagOf is the tag a ref name gives: the name itself, or the tag of a
// whole reference (crane's --annotate-ref writes those).
func tagOf(n string) string {
	if last := n[strings.LastIndex(n, "/")+1:]; strings.Contains(last, ":") {
		if r, err := name.NewTag(n); err == nil {
			return r.TagStr()
		}
	}
	return n
}

// handlerTransport answers requests with a handler, whatever their host.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		// A server's request always has a body; the registry reads it.
		req = req.Clone(req.Context())
		req.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	res := rec.Result()
	res.Request = req
	return res, nil

}
