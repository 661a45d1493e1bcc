package attest

import (
	"errors"
	"strings"
	"testing"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	st "kontinue.dev/kontinue/reconciler/status"
)

const (
	commit  = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
	imgHash = "4f2c9e1d7b3a5f6e8c0d2b4a6f8e0c1d3b5a7f9e1c3d5b7a9f0e2c4d6b8a0f1e"
	cfgHash = "9e1d4f2c7b3a5f6e8c0d2b4a6f8e0c1d3b5a7f9e1c3d5b7a9f0e2c4d6b8a0f1e"
)

var (
	taken = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ended = metav1.NewTime(time.Date(2026, 1, 2, 3, 9, 41, 0, time.UTC))
	img   = "registry.example.com/app@sha256:" + imgHash
)

func output(name string, v any) st.Output {
	p, d := st.Preview(v)
	return st.Output{Name: name, Preview: p, Digest: d}
}

func succeeded(s st.InputSet) *st.Provenance {
	s.Outcome, s.TakenAt, s.EndedAt = st.OutcomeSucceeded, &taken, &ended
	return &st.Provenance{Current: &s}
}

// workload is a three-step supply chain's status: a source, an image
// built from it, a deploy step stamping a ConfigMap from the image.
func workload() st.OwnerStatus {
	return st.OwnerStatus{SupplyChainRef: &st.ObjectRef{Kind: "ClusterSupplyChain", Name: "web"}, Resources: []st.Resource{
		{Name: "source", TemplateRef: &st.TemplateRef{Kind: "ClusterSourceTemplate", Name: "git"},
			StampedRef: &st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "app-src"},
			Outputs:    []st.Output{output("url", "https://git.example/app.git"), output("revision", "main@sha1:"+commit)},
			Provenance: succeeded(st.InputSet{Digest: "s1", OwnerGeneration: 3})},
		{Name: "build", TemplateRef: &st.TemplateRef{Kind: "ClusterImageTemplate", Name: "kpack"},
			StampedRef: &st.StampedRef{APIVersion: "kpack.io/v1alpha2", Kind: "Image", Namespace: "dev", Name: "app"},
			Inputs:     []st.Input{{Name: "source"}},
			Outputs:    []st.Output{output("image", img)},
			Provenance: succeeded(st.InputSet{Digest: "b1", OwnerGeneration: 3,
				Sources: []st.SourceValue{{Name: "source", Resource: "source", URL: "https://git.example/app.git", Revision: "main@sha1:" + commit}}})},
		{Name: "deploy", TemplateRef: &st.TemplateRef{Kind: "ClusterTemplate", Name: "app-deploy"},
			StampedRef: &st.StampedRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "dev", Name: "app-deploy"},
			Inputs:     []st.Input{{Name: "build"}},
			Provenance: succeeded(st.InputSet{Digest: "e3b0c44298fc1c149afbf4c8996fb924", OwnerGeneration: 3,
				Images:  []st.ImageValue{{Name: "image", Resource: "build", Image: img}},
				Configs: []st.ConfigValue{{Name: "config", Resource: "config-provider", Digest: "sha256:" + cfgHash}}})},
	}}
}

func build(t *testing.T, in Input) gjson.Result {
	t.Helper()
	s, err := Build(in)
	require.NoError(t, err)
	b, err := Marshal(s)
	require.NoError(t, err)
	again, err := Marshal(s)
	require.NoError(t, err)
	require.Equal(t, string(b), string(again), "the same statement is the same bytes")
	return gjson.ParseBytes(b)
}

var wl = Owner{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1"}

func TestBuild(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status func(s *st.OwnerStatus)
		owner  Owner
		up     *Upstream
		step   string
		want   map[string]string // gjson path: value ("<none>": absent)
	}{
		{name: "image built from a commit", step: "build", want: map[string]string{
			"_type":                          "https://in-toto.io/Statement/v1",
			"predicateType":                  PredicateType,
			"subject.#":                      "2",
			"subject.0.name":                 "image",
			"subject.0.digest.sha256":        imgHash,
			"subject.0.annotations.digestOf": "image",
			"subject.0.annotations.value":    img,
			"subject.1.name":                 "Image/dev/app",
			"subject.1.digest.kontinue\\.dev/input-set":                             "b1",
			"predicate.buildDefinition.buildType":                                   BuildType,
			"predicate.buildDefinition.externalParameters.owner.kind":               "Workload",
			"predicate.buildDefinition.externalParameters.owner.namespace":          "dev",
			"predicate.buildDefinition.externalParameters.owner.name":               "app",
			"predicate.buildDefinition.externalParameters.owner.uid":                "u1",
			"predicate.buildDefinition.externalParameters.owner.generation":         "3",
			"predicate.buildDefinition.externalParameters.chain.kind":               "ClusterSupplyChain",
			"predicate.buildDefinition.externalParameters.chain.name":               "web",
			"predicate.buildDefinition.externalParameters.step":                     "build",
			"predicate.buildDefinition.externalParameters.template.kind":            "ClusterImageTemplate",
			"predicate.buildDefinition.externalParameters.template.name":            "kpack",
			"predicate.buildDefinition.internalParameters.inputDigest":              "b1",
			"predicate.buildDefinition.resolvedDependencies.#":                      "1",
			"predicate.buildDefinition.resolvedDependencies.0.name":                 "source",
			"predicate.buildDefinition.resolvedDependencies.0.uri":                  "https://git.example/app.git",
			"predicate.buildDefinition.resolvedDependencies.0.digest.gitCommit":     commit,
			"predicate.buildDefinition.resolvedDependencies.0.annotations.step":     "source",
			"predicate.buildDefinition.resolvedDependencies.0.annotations.revision": "main@sha1:" + commit,
			"predicate.runDetails.builder.id":                                       BuilderID,
			"predicate.runDetails.builder.version.kontinue":                         "v1.2.3",
			"predicate.runDetails.metadata.startedOn":                               "2026-01-02T03:04:05Z",
			"predicate.runDetails.metadata.finishedOn":                              "2026-01-02T03:09:41Z",
			"predicate.runDetails.metadata.invocationId":                            "u1/build/b1",
		}},
		{name: "a source step: its input is the owner's spec", step: "source", want: map[string]string{
			"subject.#":                                      "3",
			"subject.0.name":                                 "url",
			"subject.0.digest.sha256":                        strings.TrimPrefix(output("url", "https://git.example/app.git").Digest, "sha256:"),
			"subject.0.annotations.digestOf":                 "value",
			"subject.0.annotations.value":                    "https://git.example/app.git",
			"subject.1.name":                                 "revision",
			"subject.2.name":                                 "ConfigMap/dev/app-src",
			"predicate.buildDefinition.resolvedDependencies": "<none>",
			"predicate.buildDefinition.externalParameters.owner.generation": "3",
		}},
		{name: "a deploy step: no outputs, the object it applied; image and config inputs by digest", step: "deploy", want: map[string]string{
			"subject.#":      "1",
			"subject.0.name": "ConfigMap/dev/app-deploy",
			"subject.0.digest.kontinue\\.dev/input-set":                          "e3b0c44298fc1c149afbf4c8996fb924",
			"subject.0.annotations.apiVersion":                                   "v1",
			"predicate.buildDefinition.resolvedDependencies.#":                   "2",
			"predicate.buildDefinition.resolvedDependencies.0.uri":               img,
			"predicate.buildDefinition.resolvedDependencies.0.digest.sha256":     imgHash,
			"predicate.buildDefinition.resolvedDependencies.0.annotations.input": "image",
			"predicate.buildDefinition.resolvedDependencies.1.name":              "config",
			"predicate.buildDefinition.resolvedDependencies.1.uri":               "<none>",
			"predicate.buildDefinition.resolvedDependencies.1.digest.sha256":     cfgHash,
			"predicate.buildDefinition.resolvedDependencies.1.annotations.step":  "config-provider",
		}},
		{name: "an image by tag: named, no digest", step: "deploy", status: func(s *st.OwnerStatus) {
			s.Resources[2].Provenance.Current.Images[0].Image = "registry.example.com/app:latest"
		}, want: map[string]string{
			"predicate.buildDefinition.resolvedDependencies.0.uri":    "registry.example.com/app:latest",
			"predicate.buildDefinition.resolvedDependencies.0.digest": "<none>",
		}},
		{name: "an image output by tag: its value's digest", step: "build", status: func(s *st.OwnerStatus) {
			s.Resources[1].Outputs = []st.Output{output("image", "registry.example.com/app:latest")}
		}, want: map[string]string{
			"subject.0.digest.sha256":        strings.TrimPrefix(output("image", "registry.example.com/app:latest").Digest, "sha256:"),
			"subject.0.annotations.digestOf": "value",
		}},
		{name: "an image output whose preview was cut: its value's digest, no value", step: "build", status: func(s *st.OwnerStatus) {
			long := "registry.example.com/" + strings.Repeat("a", st.PreviewLimit) + "@sha256:" + imgHash
			o := output("image", long)
			s.Resources[1].Outputs = []st.Output{o}
		}, want: map[string]string{
			"subject.0.annotations.digestOf": "value",
			"subject.0.annotations.value":    "<none>",
		}},
		{name: "a gated step's kept output value stands for a cut preview", step: "build", status: func(s *st.OwnerStatus) {
			long := "registry.example.com/" + strings.Repeat("a", st.PreviewLimit) + "@sha256:" + imgHash
			s.Resources[1].Outputs = []st.Output{output("image", long)}
			s.Resources[1].OutputValues = map[string]any{"image": long}
		}, want: map[string]string{
			"subject.0.digest.sha256":        imgHash,
			"subject.0.annotations.digestOf": "image",
		}},
		{name: "a revision cut to fit the status names no commit; a cut url is no locator", step: "build", status: func(s *st.OwnerStatus) {
			src := &s.Resources[1].Provenance.Current.Sources[0]
			src.Revision = st.Value("main@sha1:" + commit + strings.Repeat("x", st.ValueLimit))
			src.URL = st.Value("https://git.example/" + strings.Repeat("a", st.ValueLimit))
		}, want: map[string]string{
			"predicate.buildDefinition.resolvedDependencies.0.digest":          "<none>",
			"predicate.buildDefinition.resolvedDependencies.0.uri":             "<none>",
			"predicate.buildDefinition.resolvedDependencies.0.annotations.url": st.Value("https://git.example/" + strings.Repeat("a", st.ValueLimit)),
		}},
		{name: "a set taken before provenance was recorded: its digest only", step: "build", status: func(s *st.OwnerStatus) {
			s.Resources[1].Provenance = &st.Provenance{Current: &st.InputSet{Digest: "b0", Outcome: st.OutcomeSucceeded}}
		}, want: map[string]string{
			"predicate.buildDefinition.resolvedDependencies":                "<none>",
			"predicate.buildDefinition.externalParameters.owner.generation": "<none>",
			"predicate.runDetails.metadata.startedOn":                       "<none>",
			"predicate.runDetails.metadata.invocationId":                    "u1/build/b0",
			"subject.1.digest.kontinue\\.dev/input-set":                     "b0",
		}},
		{name: "no uid, no chain, no template, no version", step: "build", owner: Owner{Kind: "Workload", Namespace: "dev", Name: "app"},
			status: func(s *st.OwnerStatus) { s.SupplyChainRef = nil; s.Resources[1].TemplateRef = nil }, want: map[string]string{
				"predicate.buildDefinition.externalParameters.owner.uid": "<none>",
				"predicate.buildDefinition.externalParameters.chain":     "<none>",
				"predicate.buildDefinition.externalParameters.template":  "<none>",
				"predicate.runDetails.builder.version.kontinue":          "dev",
			}},
		{name: "a chain revision (roll-outs)", step: "build", status: func(s *st.OwnerStatus) { s.ChainRevision = "r-1a2b" }, want: map[string]string{
			"predicate.buildDefinition.externalParameters.chain.revision": "r-1a2b",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := workload()
			if tt.status != nil {
				tt.status(&s)
			}
			owner, version := tt.owner, ""
			if owner.Kind == "" {
				owner, version = wl, "v1.2.3"
			}
			got := build(t, Input{Owner: owner, Status: s, Step: tt.step, Upstream: tt.up, Version: version})
			for path, want := range tt.want {
				v := got.Get(path)
				if want == "<none>" {
					assert.False(t, v.Exists(), "%s: %s", path, v.Raw)
					continue
				}
				assert.Equal(t, want, v.String(), "%s in %s", path, got.Raw)
			}
		})
	}
}

// A Deliverable fed by a Workload: its delivery's source (what the
// Workload's chain wrote) and its deployment input, plus the Workload step
// that stamped it, by the digest that step's own statement names it with.
func TestBuildDeliverable(t *testing.T) {
	rev := "main/" + commit
	s := st.OwnerStatus{DeliveryRef: &st.ObjectRef{Kind: "ClusterDelivery", Name: "deliver"}, Resources: []st.Resource{
		{Name: "source-provider", Outputs: []st.Output{output("url", "https://git.example/config.git"), output("revision", rev)},
			StampedRef: &st.StampedRef{APIVersion: "source.toolkit.fluxcd.io/v1", Kind: "GitRepository", Namespace: "dev", Name: "app-config"},
			Provenance: succeeded(st.InputSet{Digest: "p1", OwnerGeneration: 1})},
		{Name: "deployer", Inputs: []st.Input{{Name: "source-provider"}},
			StampedRef: &st.StampedRef{APIVersion: "kappctrl.k14s.io/v1alpha1", Kind: "App", Namespace: "dev", Name: "app"},
			Provenance: succeeded(st.InputSet{Digest: "a1", OwnerGeneration: 1,
				Deployment: &st.SourceValue{Name: "deployment", Resource: "source-provider", URL: "https://git.example/config.git", Revision: rev}})},
	}}
	// The Workload's step that stamped the Deliverable names it by the
	// digest the Deliverable carries.
	wls := workload()
	wls.Resources = append(wls.Resources, st.Resource{Name: "deliverable",
		StampedRef: &st.StampedRef{APIVersion: "carto.run/v1alpha1", Kind: "Deliverable", Namespace: "dev", Name: "app"},
		Provenance: succeeded(st.InputSet{Digest: "dd1"})})
	upstream := build(t, Input{Owner: wl, Status: wls, Step: "deliverable"})
	assert.Equal(t, "Deliverable/dev/app", upstream.Get("subject.0.name").String())

	up := &Upstream{Kind: "Workload", Namespace: "dev", Name: "app", UID: "u1", Step: "deliverable", Digest: "dd1"}
	got := build(t, Input{Owner: Owner{APIVersion: "carto.run/v1alpha1", Kind: "Deliverable", Namespace: "dev", Name: "app", UID: "d1"},
		Status: s, Step: "deployer", Upstream: up})
	deps := "predicate.buildDefinition.resolvedDependencies"
	assert.Equal(t, "2", got.Get(deps+".#").String())
	assert.Equal(t, "deployment", got.Get(deps+".0.annotations.input").String())
	assert.Equal(t, commit, got.Get(deps+".0.digest.gitCommit").String(), "Flux's older main/<sha> names a commit")
	assert.Equal(t, "Workload/dev/app/deliverable", got.Get(deps+".1.name").String())
	assert.Equal(t, "stampedBy", got.Get(deps+".1.annotations.input").String())
	assert.Equal(t, upstream.Get(`subject.0.digest.kontinue\.dev/input-set`).String(),
		got.Get(deps+`.1.digest.kontinue\.dev/input-set`).String(), "the link: the Workload step's subject is the Deliverable's dependency")
	assert.Equal(t, "ClusterDelivery", got.Get("predicate.buildDefinition.externalParameters.chain.kind").String())
	assert.Equal(t, "Deliverable", got.Get("predicate.buildDefinition.externalParameters.owner.kind").String())

	// What the Deliverable's metadata does not say is left out, not guessed.
	got = build(t, Input{Owner: wl, Status: s, Step: "deployer", Upstream: &Upstream{Kind: "Workload", Namespace: "dev", Name: "app"}})
	assert.False(t, got.Get(deps+".1.digest").Exists())
}

func TestRevisionDigests(t *testing.T) {
	sha256hex := strings.Repeat("ab", 32)
	for _, tt := range []struct{ rev, alg, want string }{
		{"main@sha1:" + commit, "gitCommit", commit},
		{"sha1:" + commit, "gitCommit", commit},
		{"main/" + commit, "gitCommit", commit},
		{commit, "gitCommit", commit},
		{"refs/heads/main@sha1:" + commit, "gitCommit", commit},
		{"latest@sha256:" + sha256hex, "sha256", sha256hex},
		{"sha256:" + sha256hex, "sha256", sha256hex},
		{sha256hex, "", ""},    // 64 hex alone: which hash is unknown
		{"v1.2.3", "", ""},     // a tag names no commit
		{"main", "", ""},       // nor does a branch
		{commit[:39], "", ""},  // too short
		{"x" + commit, "", ""}, // not at a boundary
		{strings.ToUpper(commit), "", ""},
	} {
		deps, err := Dependencies(&st.InputSet{Sources: []st.SourceValue{{Name: "source", Resource: "s", URL: "u", Revision: tt.rev}}}, nil)
		require.NoError(t, err)
		if tt.alg == "" {
			assert.Empty(t, deps[0].Digest, tt.rev)
			continue
		}
		assert.Equal(t, map[string]string{tt.alg: tt.want}, deps[0].Digest, tt.rev)
	}
}

func TestBuildRefuses(t *testing.T) {
	for _, tt := range []struct {
		name   string
		step   string
		status func(s *st.OwnerStatus)
		notYet bool
	}{
		{name: "no such step", step: "nope"},
		{name: "no provenance", step: "build", status: func(s *st.OwnerStatus) { s.Resources[1].Provenance = nil }, notYet: true},
		{name: "nothing succeeded yet", step: "build", notYet: true, status: func(s *st.OwnerStatus) {
			p := s.Resources[1].Provenance
			p.Latest, p.Current = p.Current, nil
			p.Latest.Outcome = st.OutcomeProcessing
		}},
		{name: "no outputs and no object", step: "build", notYet: true, status: func(s *st.OwnerStatus) {
			s.Resources[1].Outputs, s.Resources[1].StampedRef = nil, nil
		}},
		{name: "outputs whose digests Kontinue did not write, no object", step: "build", notYet: true, status: func(s *st.OwnerStatus) {
			s.Resources[1].Outputs = []st.Output{{Name: "url", Digest: "md5:abc"}}
			s.Resources[1].StampedRef = nil
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := workload()
			if tt.status != nil {
				tt.status(&s)
			}
			_, err := Build(Input{Owner: wl, Status: s, Step: tt.step})
			require.Error(t, err)
			assert.Equal(t, tt.notYet, errors.Is(err, ErrNotAttestable), "%v", err)
		})
	}
}

// OwnerOf reads back the owner Build wrote: what a step checking
// Kontinue's statements (rule kontinue) binds a statement to.
func TestOwnerOf(t *testing.T) {
	s, err := Build(Input{Owner: wl, Status: workload(), Step: "build"})
	require.NoError(t, err)
	got, err := OwnerOf(s)
	require.NoError(t, err)
	assert.Equal(t, wl, got)

	other := proto.Clone(s).(*intoto.Statement)
	other.PredicateType = "https://example.com/other"
	_, err = OwnerOf(other)
	assert.ErrorContains(t, err, "predicate type")

	noOwner := proto.Clone(s).(*intoto.Statement)
	bd := noOwner.GetPredicate().GetFields()["buildDefinition"].GetStructValue()
	delete(bd.GetFields()["externalParameters"].GetStructValue().GetFields(), "owner")
	_, err = OwnerOf(noOwner)
	assert.ErrorContains(t, err, "no owner")
}
