package main

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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
