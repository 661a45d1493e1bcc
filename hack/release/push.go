package main

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmregistry "helm.sh/helm/v3/pkg/registry"
)

// Push sends the image index of an OCI layout to ref (a tag): the registry
// stores the very bytes built, so the digest the manifests pin is the one
// it serves.
func Push(dir, ref, digest string, opts ...remote.Option) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return err
	}
	idx, err := top.ImageIndex(h)
	if err != nil {
		return fmt.Errorf("%s has no index %s: %w", dir, digest, err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	if len(opts) == 0 {
		opts = []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	}
	if err := remote.WriteIndex(tag, idx, opts...); err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", ref, digest)
	return nil
}

// PushChart sends the chart package to REGISTRY/charts/kontinue:X.Y.Z as
// an OCI artifact, as `helm push` does (Helm's own registry client), with
// the release's time as its creation time, so that the same package gives
// the same manifest. plainHTTP is for a registry without TLS (tests).
func PushChart(tgz, registry string, epoch time.Time, plainHTTP bool) (string, error) {
	b, err := os.ReadFile(tgz)
	if err != nil {
		return "", err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	var opts []helmregistry.ClientOption
	if plainHTTP {
		opts = append(opts, helmregistry.ClientOptPlainHTTP())
	}
	c, err := helmregistry.NewClient(opts...)
	if err != nil {
		return "", err
	}
	ref := registry + "/charts/" + ch.Metadata.Name + ":" + ch.Metadata.Version
	res, err := c.Push(b, ref, helmregistry.PushOptCreationTime(epoch.UTC().Format(time.RFC3339)))
	if err != nil {
		return "", err
	}
	fmt.Printf("pushed oci://%s@%s\n", ref, res.Manifest.Digest)
	return res.Manifest.Digest, nil
}
