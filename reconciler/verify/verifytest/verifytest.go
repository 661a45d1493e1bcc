// Package verifytest makes what verification tests and the bench need:
// keys, cosign signatures and attestations of a digest, test certificate
// authorities and their trusted roots, and images signed in an OCI registry
// (go-containerregistry's, in process). Signing is sigstore's and the
// registry layout cosign's; nothing here is used by the controller.
package verifytest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	sigdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/types/known/structpb"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler/verify"
)

// Key is a signing key.
type Key struct {
	Signer signature.Signer
	Priv   crypto.PrivateKey
	Cert   *x509.Certificate // keyless: the certificate of the key
}

// NewKey makes a key: "ecdsa" (P-256), "ed25519" or "rsa".
func NewKey(kind string) *Key {
	var priv crypto.PrivateKey
	var err error
	switch kind {
	case "ed25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case "rsa":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		panic(err)
	}
	s, err := signature.LoadSigner(priv, crypto.SHA256)
	if err != nil {
		panic(err)
	}
	return &Key{Signer: s, Priv: priv}
}

// PublicPEM is the key's public half in PEM.
func (k *Key) PublicPEM() string {
	pub, err := k.Signer.PublicKey()
	if err != nil {
		panic(err)
	}
	b, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Sign is cosign's signature of an image (repo@digest): a simple-signing
// layer with the signature (and certificate) annotations.
func (k *Key) Sign(repo, digest string) verify.Layer {
	ref, err := name.NewDigest(repo + "@" + digest)
	if err != nil {
		panic(err)
	}
	p, err := json.Marshal(payload.Cosign{Image: ref})
	if err != nil {
		panic(err)
	}
	sig, err := k.Signer.SignMessage(bytes.NewReader(p))
	if err != nil {
		panic(err)
	}
	l := verify.Layer{MediaType: verify.MediaTypeSimpleSigning, Payload: p,
		Annotations: map[string]string{verify.AnnotationSignature: base64.StdEncoding.EncodeToString(sig)}}
	k.certify(l.Annotations)
	return l
}

// Attest is cosign's attestation of digest (sha256:…): a DSSE envelope of
// an in-toto statement with this predicate.
func (k *Key) Attest(digest, predicateType string, predicate any) verify.Layer {
	stmt := map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": "image", "digest": map[string]any{"sha256": strings.TrimPrefix(digest, "sha256:")}}},
		"predicateType": predicateType,
		"predicate":     predicate,
	}
	b, err := json.Marshal(stmt)
	if err != nil {
		panic(err)
	}
	env, err := sigdsse.WrapSigner(k.Signer, "application/vnd.in-toto+json").SignMessage(bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	l := verify.Layer{MediaType: verify.MediaTypeDSSE, Payload: env,
		Annotations: map[string]string{verify.AnnotationSignature: "", "predicateType": predicateType}}
	k.certify(l.Annotations)
	return l
}

func (k *Key) certify(ann map[string]string) {
	if k.Cert == nil {
		return
	}
	b, err := cryptoutils.MarshalCertificateToPEM(k.Cert)
	if err != nil {
		panic(err)
	}
	ann[verify.AnnotationCertificate] = string(b)
}

// SLSA is a SLSA provenance v1 predicate naming builderID.
func SLSA(builderID string) map[string]any {
	return map[string]any{
		"buildDefinition": map[string]any{"buildType": "https://example.com/build/v1"},
		"runDetails":      map[string]any{"builder": map[string]any{"id": builderID}},
	}
}

// SLSAType and VulnsType are the predicate types of SLSA provenance v1 and
// the in-toto vulnerability scan.
const (
	SLSAType  = "https://slsa.dev/provenance/v1"
	VulnsType = "https://in-toto.io/attestation/vulns/v0.2"
)

// Vulns is an in-toto vulnerability scan with findings of these severities.
func Vulns(severities ...string) map[string]any {
	var res []any
	for i, s := range severities {
		res = append(res, map[string]any{"id": fmt.Sprintf("CVE-2026-%04d", i+1), "severity": []any{map[string]any{"method": "nvd", "score": s}}})
	}
	return map[string]any{"scanner": map[string]any{"uri": "pkg:github/aquasecurity/trivy", "result": res}}
}

// CA is a test certificate authority for keyless signatures.
type CA struct {
	rootCert, inter *x509.Certificate
	interKey        crypto.Signer
}

// NewCA makes a root and an intermediate.
func NewCA() *CA {
	r, rk, err := ca.GenerateRootCa()
	if err != nil {
		panic(err)
	}
	i, ik, err := ca.GenerateFulcioIntermediate(r, rk)
	if err != nil {
		panic(err)
	}
	return &CA{rootCert: r, inter: i, interKey: ik}
}

// Keyless is a key with a Fulcio-like certificate for subject (an email)
// and issuer, valid for ten minutes from notBefore.
func (c *CA) Keyless(subject, issuer string, notBefore time.Time) *Key {
	k := NewKey("ecdsa")
	cert, err := ca.GenerateLeafCert(subject, issuer, notBefore, k.Priv, c.inter, c.interKey)
	if err != nil {
		panic(err)
	}
	k.Cert = cert
	return k
}

// TrustedRoot is the CA's trusted_root.json; withLog adds a transparency
// log (whose key signs nothing here: every signature then lacks its entry).
func (c *CA) TrustedRoot(withLog bool) []byte {
	fca := &root.FulcioCertificateAuthority{Root: c.rootCert, Intermediates: []*x509.Certificate{c.inter},
		ValidityPeriodStart: time.Now().Add(-24 * time.Hour), URI: "https://fulcio.test"}
	logs := map[string]*root.TransparencyLog{}
	if withLog {
		lk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		logs["0123"] = &root.TransparencyLog{BaseURL: "https://rekor.test", ID: []byte{1, 2, 3}, HashFunc: crypto.SHA256,
			PublicKey: lk.Public(), SignatureHashFunc: crypto.SHA256, ValidityPeriodStart: time.Now().Add(-24 * time.Hour)}
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, []root.CertificateAuthority{fca}, nil, nil, logs)
	if err != nil {
		panic(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		panic(err)
	}
	return b
}

// Push writes a random image to repo:tag (repo is host/path) and returns
// its digest.
func Push(repo, tag string) (string, error) {
	img, err := random.Image(256, 1)
	if err != nil {
		return "", err
	}
	ref, err := name.NewTag(repo+":"+tag, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img); err != nil {
		return "", err
	}
	d, err := img.Digest()
	return d.String(), err
}

// Attach writes layers as cosign does beside repo@digest: the
// sha256-<hex>.<suffix> tag (suffix sig or att) of an image whose layers
// they are.
func Attach(repo, digest, suffix string, layers ...verify.Layer) error {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(l.Payload, types.MediaType(l.MediaType)), Annotations: l.Annotations})
		if err != nil {
			return err
		}
	}
	ref, err := name.NewTag(repo+":"+strings.Replace(digest, ":", "-", 1)+"."+suffix, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(ref, img)
}

// Copy copies the image at from to the tag to (both host/path:tag), e.g.
// to move a tag.
func Copy(from, to string) error {
	src, err := name.ParseReference(from, name.Insecure)
	if err != nil {
		return err
	}
	img, err := remote.Image(src)
	if err != nil {
		return err
	}
	dst, err := name.NewTag(to, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(dst, img)
}

var _ v1.Image = empty.Image

// NewKontinueKey is a key for Kontinue's own statements (attest), as
// --attestation-key gives one.
func NewKontinueKey() *attest.Key {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		panic(err)
	}
	k, err := attest.ParseKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		panic(err)
	}
	return k
}

// Owner is the owner KontinueStatement's statements are about, and
// Producer the same as a rule kontinue counts it.
var (
	Owner    = attest.Owner{APIVersion: "carto.run/v1alpha1", Kind: "Workload", Namespace: "team-a", Name: "app", UID: "uid-app"}
	Producer = verify.Producer{Kind: Owner.Kind, Namespace: Owner.Namespace, Name: Owner.Name, UID: Owner.UID}
)

// KontinueStatement is a statement of Kontinue's about Owner, signed with
// k, naming digest among a step's outputs, as the history ConfigMap keeps
// it.
func KontinueStatement(k *attest.Key, digest string) []byte {
	return KontinueStatementOf(k, Owner, digest)
}

// KontinueStatementOf is KontinueStatement about owner o.
func KontinueStatementOf(k *attest.Key, o attest.Owner, digest string) []byte {
	owner, err := structpb.NewStruct(map[string]any{"owner": map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind,
		"namespace": o.Namespace, "name": o.Name, "uid": o.UID}, "step": "image"})
	if err != nil {
		panic(err)
	}
	s := &intoto.Statement{Type: intoto.StatementTypeUri, PredicateType: attest.PredicateType,
		Subject: []*intoto.ResourceDescriptor{{Name: "image", Digest: map[string]string{"sha256": strings.TrimPrefix(digest, "sha256:")}}},
		Predicate: &structpb.Struct{Fields: map[string]*structpb.Value{"buildDefinition": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"buildType":          structpb.NewStringValue(attest.BuildType),
			"externalParameters": structpb.NewStructValue(owner),
		}})}}}
	b, err := attest.Sign(context.Background(), k, s)
	if err != nil {
		panic(err)
	}
	return b
}

// statementJSON is an in-toto statement about digest (sha256:…).
func statementJSON(digest, predicateType string, predicate any) []byte {
	if predicate == nil {
		predicate = map[string]any{}
	}
	b, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": "image", "digest": map[string]any{"sha256": strings.TrimPrefix(digest, "sha256:")}}},
		"predicateType": predicateType,
		"predicate":     predicate,
	})
	if err != nil {
		panic(err)
	}
	return b
}

// SignBundle is k's signature of digest (sha256:…) as a Sigstore bundle,
// as cosign stores it as an OCI 1.1 referrer of the image: a DSSE
// envelope of a statement about the digest with the predicate type
// verify.CosignSignPredicate, the key named by its (empty) hint.
func (k *Key) SignBundle(digest string) []byte {
	return k.AttestBundle(digest, verify.CosignSignPredicate, nil)
}

// AttestBundle is k's in-toto statement about digest as a Sigstore bundle.
func (k *Key) AttestBundle(digest, predicateType string, predicate any) []byte {
	b, err := sigdsse.WrapSigner(k.Signer, "application/vnd.in-toto+json").SignMessage(bytes.NewReader(statementJSON(digest, predicateType, predicate)))
	if err != nil {
		panic(err)
	}
	var env dsse.Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		panic(err)
	}
	return BundleJSON(&protobundle.Bundle{MediaType: BundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{}}},
		Content:              &protobundle.Bundle_DsseEnvelope{DsseEnvelope: protoEnvelope(&env)}})
}

// protoEnvelope is a DSSE envelope as a bundle holds it.
func protoEnvelope(env *dsse.Envelope) *protodsse.Envelope {
	var sigs []*protodsse.Signature
	for _, sig := range env.Signatures {
		raw, err := base64.StdEncoding.DecodeString(sig.Sig)
		if err != nil {
			panic(err)
		}
		sigs = append(sigs, &protodsse.Signature{Sig: raw, Keyid: sig.KeyID})
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		panic(err)
	}
	return &protodsse.Envelope{Payload: payload, PayloadType: env.PayloadType, Signatures: sigs}
}

// BundleJSON is a bundle as it is stored.
func BundleJSON(b *protobundle.Bundle) []byte {
	out, err := (&bundle.Bundle{Bundle: b}).MarshalJSON()
	if err != nil {
		panic(err)
	}
	return out
}

// BundleMediaType is the media type of a Sigstore bundle v0.3.
const BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// AttachBundle stores bundle as an OCI 1.1 referrer of repo@digest: an
// artifact whose subject is the image and whose one layer is the bundle.
// Its artifact type is the bundle's media type, given as its config's
// media type (what go-containerregistry's registry reports as the
// referrer's artifactType; cosign sets the manifest's artifactType, which
// a registry reports alike).
func AttachBundle(repo, digest string, bundle []byte) error {
	d, err := name.NewDigest(repo+"@"+digest, name.Insecure)
	if err != nil {
		return err
	}
	subject, err := remote.Get(d)
	if err != nil {
		return err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, BundleMediaType)
	img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(bundle, BundleMediaType)})
	if err != nil {
		return err
	}
	img = mutate.Subject(img, subject.Descriptor).(v1.Image)
	h, err := img.Digest()
	if err != nil {
		return err
	}
	return remote.Write(d.Context().Digest(h.String()), img)
}

// Sigstore is a test Sigstore (sigstore-go's virtual one): a Fulcio CA
// and a Rekor log, whose keyless bundles carry the log's entry with its
// inclusion proof and signed entry timestamp.
type Sigstore struct{ vs *ca.VirtualSigstore }

// NewSigstore makes one.
func NewSigstore() *Sigstore {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		panic(err)
	}
	return &Sigstore{vs: vs}
}

// TrustedRoot is the trusted_root.json of s's CA with the transparency
// log of logs (s itself, or another Sigstore: a log that recorded none of
// s's signatures).
func (s *Sigstore) TrustedRoot(logs *Sigstore) []byte {
	tlogs := map[string]*root.TransparencyLog{}
	for id, l := range logs.vs.RekorLogs() {
		// The virtual log names itself by its key id in hex; the trusted
		// root keeps the raw id.
		raw, err := hex.DecodeString(id)
		if err != nil {
			panic(err)
		}
		l.ID = raw
		tlogs[id] = l
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, s.vs.FulcioCertificateAuthorities(), nil, nil, tlogs)
	if err != nil {
		panic(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		panic(err)
	}
	return b
}

// Bundle is a bundle v0.3 of a statement about digest, signed keylessly
// by subject (an email) of issuer, with its Rekor entry.
func (s *Sigstore) Bundle(subject, issuer, digest, predicateType string, predicate any) *protobundle.Bundle {
	e, err := s.vs.AttestAtTime(subject, issuer, statementJSON(digest, predicateType, predicate), time.Now().Add(5*time.Minute), true)
	if err != nil {
		panic(err)
	}
	sc, err := e.SignatureContent()
	if err != nil {
		panic(err)
	}
	env := sc.EnvelopeContent().RawEnvelope()
	vc, err := e.VerificationContent()
	if err != nil {
		panic(err)
	}
	entries, err := e.TlogEntries()
	if err != nil {
		panic(err)
	}
	var tles []*protorekor.TransparencyLogEntry
	for _, t := range entries {
		tle := t.TransparencyLogEntry()
		// The virtual log's entry as a bundle carries it: its kind (the
		// virtual log writes intoto v0.0.2 entries; sigstore-go refuses a
		// bundle whose kind does not match its body) and its signed entry
		// timestamp, signed again by the log (what it signed is not
		// exported).
		tle.KindVersion = &protorekor.KindVersion{Kind: "intoto", Version: "0.0.2"}
		set, err := s.vs.RekorSignPayload(tlog.RekorPayload{Body: base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
			IntegratedTime: tle.IntegratedTime, LogIndex: tle.LogIndex, LogID: hex.EncodeToString(tle.LogId.KeyId)})
		if err != nil {
			panic(err)
		}
		tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
		tles = append(tles, tle)
	}
	return &protobundle.Bundle{MediaType: BundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:     &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
			TlogEntries: tles,
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: protoEnvelope(env)},
	}
}

// CosignLayer is a keyless cosign signature of repo@digest as cosign's
// signature tag keeps it: the simple-signing payload, its signature, the
// certificate and the Rekor entry with its signed entry timestamp (the
// dev.sigstore.cosign/bundle annotation); alterTime is added to the
// entry's integrated time after the log signed it (0: none).
func (s *Sigstore) CosignLayer(subject, issuer, repo, digest string, alterTime int64) verify.Layer {
	ref, err := name.NewDigest(repo + "@" + digest)
	if err != nil {
		panic(err)
	}
	p, err := json.Marshal(payload.Cosign{Image: ref})
	if err != nil {
		panic(err)
	}
	e, err := s.vs.Sign(subject, issuer, p)
	if err != nil {
		panic(err)
	}
	sc, err := e.SignatureContent()
	if err != nil {
		panic(err)
	}
	vc, err := e.VerificationContent()
	if err != nil {
		panic(err)
	}
	entries, err := e.TlogEntries()
	if err != nil {
		panic(err)
	}
	tle := entries[0].TransparencyLogEntry()
	rp := tlog.RekorPayload{Body: base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
		IntegratedTime: tle.IntegratedTime, LogIndex: tle.LogIndex, LogID: hex.EncodeToString(tle.LogId.KeyId)}
	set, err := s.vs.RekorSignPayload(rp)
	if err != nil {
		panic(err)
	}
	rp.IntegratedTime += alterTime
	ann, err := json.Marshal(map[string]any{"SignedEntryTimestamp": set, "Payload": rp})
	if err != nil {
		panic(err)
	}
	cert, err := cryptoutils.MarshalCertificateToPEM(vc.Certificate())
	if err != nil {
		panic(err)
	}
	return verify.Layer{MediaType: verify.MediaTypeSimpleSigning, Payload: p, Annotations: map[string]string{
		verify.AnnotationSignature:   base64.StdEncoding.EncodeToString(sc.MessageSignatureContent().Signature()),
		verify.AnnotationCertificate: string(cert),
		verify.AnnotationBundle:      string(ann),
	}}
}
