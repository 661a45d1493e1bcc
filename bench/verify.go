package main

// -verify: a signature policy on the chain's last step (issue 49), so that
// every Workload's image is checked before it goes in. The registry is
// go-containerregistry's, in process, behind a handler that makes and
// signs (cosign's tag layout, verifytest's key) the image of a tag the
// first time anyone reads it: every Workload's image at every branch is a
// distinct, signed image, as a build would push it, and no time is spent
// pushing 1,000 images before the run.

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	vt "kontinue.dev/kontinue/reconciler/verify/verifytest"
)

// signingRegistry serves images that it makes and signs on first read.
type signingRegistry struct {
	srv  *httptest.Server
	host string
	key  *vt.Key
	reg  http.Handler

	mu   sync.Mutex
	made map[string]*sync.Once // repo:tag
	errs int
}

func startSigningRegistry() *signingRegistry {
	r := &signingRegistry{key: vt.NewKey("ecdsa"), reg: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), made: map[string]*sync.Once{}}
	r.srv = httptest.NewServer(r)
	r.host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

func (r *signingRegistry) close() { r.srv.Close() }

// prepare pushes and signs the first images of workloads 0..n-1 (branch
// main) before they are created, as their builds would have.
func (r *signingRegistry) prepare(n int) error {
	for i := range n {
		r.ensure(workloadName(i), "main")
	}
	if r.errs > 0 {
		return fmt.Errorf("%d images could not be pushed to the bench's registry", r.errs)
	}
	return nil
}

// ServeHTTP makes the image of a tag read for the first time (one the
// bench did not push ahead), then answers as the registry.
func (r *signingRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		if repo, ref, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/v2/"), "/manifests/"); ok &&
			!strings.HasPrefix(ref, "sha256") && !strings.HasPrefix(req.Header.Get("User-Agent"), "bench-push") {
			r.ensure(repo, ref)
		}
	}
	r.reg.ServeHTTP(w, req)
}

// image is the image of repo:tag: distinct per tag, the same each time.
func image(repo, tag string) (v1.Image, error) {
	return mutate.ConfigFile(empty.Image, &v1.ConfigFile{Architecture: "amd64", OS: "linux",
		Config: v1.Config{Labels: map[string]string{"bench.kontinue.dev/image": repo + ":" + tag}}})
}

// ensure pushes the image of repo:tag and its signature, once.
func (r *signingRegistry) ensure(repo, tag string) {
	r.mu.Lock()
	once := r.made[repo+":"+tag]
	if once == nil {
		once = &sync.Once{}
		r.made[repo+":"+tag] = once
	}
	r.mu.Unlock()
	once.Do(func() {
		if err := r.push(repo, tag); err != nil {
			r.mu.Lock()
			r.errs++
			r.mu.Unlock()
			fmt.Printf("bench: pushing %s:%s to the bench's registry: %v\n", repo, tag, err)
		}
	})
}

func (r *signingRegistry) push(repo, tag string) error {
	img, err := image(repo, tag)
	if err != nil {
		return err
	}
	full := r.host + "/" + repo
	ref, err := name.NewTag(full+":"+tag, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img, remote.WithUserAgent("bench-push")); err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	return vt.Attach(full, d.String(), "sig", r.key.Sign(full, d.String()))
}

// expected is the image the last step's ConfigMap holds once the branch
// has flowed through the chain: checked, and so pinned to its digest
// (verify.Target.Pinned). The bench asks before it sends the change, and
// the image is pushed and signed then, as a build would have done before
// the change: its push is not part of the change's latency.
func (r *signingRegistry) expected(workload, branch string) string {
	r.ensure(workload, branch)
	img, err := image(workload, branch)
	if err != nil {
		panic(err)
	}
	d, err := img.Digest()
	if err != nil {
		panic(err)
	}
	return r.host + "/" + workload + "@" + d.String()
}

// chainYAML is the simple engine's chain with images from this registry
// and every image the last step takes verified: signed by the key.
func (r *signingRegistry) chainYAML() string {
	y := strings.Replace(chainYAML, "default: "+registry+"}", "default: "+r.host+"}", 1)
	var pem strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(r.key.PublicPEM()), "\n") {
		pem.WriteString("            " + l + "\n")
	}
	last := "    images: [{name: image, resource: image-builder}]\n"
	policy := last + "    verify:\n      images:\n      - name: image\n        keys:\n        - publicKey: |\n" + pem.String()
	if !strings.Contains(y, last) || !strings.Contains(y, r.host) {
		panic("bench: the chain's last step or the registry param moved: update signingRegistry.chainYAML")
	}
	return strings.Replace(y, last, policy, 1)
}
