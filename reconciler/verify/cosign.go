package verify

// A thin adapter that presents cosign's legacy tag signatures (the layers of
// the sha256-<digest>.sig and .att tags, with their annotations) to
// sigstore-go as a SignedEntity: sigstore-go does every check (signature,
// certificate chain, Rekor entry), this only hands it the pieces.

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// The annotations cosign puts on the layers of its signature and
// attestation tags.
const (
	AnnotationSignature   = "dev.cosignproject.cosign/signature"
	AnnotationCertificate = "dev.sigstore.cosign/certificate"
	AnnotationChain       = "dev.sigstore.cosign/chain"
	AnnotationBundle      = "dev.sigstore.cosign/bundle"
)

// Media types of cosign's layers and Sigstore bundles.
const (
	MediaTypeSimpleSigning = "application/vnd.dev.cosign.simplesigning.v1+json"
	MediaTypeDSSE          = "application/vnd.dsse.envelope.v1+json"
	MediaTypeBundlePrefix  = "application/vnd.dev.sigstore.bundle"
)

// Layer is one layer of a cosign signature or attestation tag: its bytes
// (a simple-signing payload, or a DSSE envelope) and annotations.
type Layer struct {
	MediaType   string            `json:"mediaType"`
	Payload     []byte            `json:"payload"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// cosignEntity is a Layer as sigstore-go's SignedEntity.
type cosignEntity struct {
	payload  []byte         // the signed bytes (simple signing), or nil
	sig      []byte         // their signature
	envelope *dsse.Envelope // an attestation's envelope, or nil
	cert     *x509.Certificate
	entry    *tlog.Entry // the Rekor entry cosign attached, or nil
}

var _ sgverify.SignedEntity = (*cosignEntity)(nil)

// entityOf reads a layer; attestation: it holds a DSSE envelope.
func entityOf(l Layer, attestation bool) (*cosignEntity, error) {
	e := &cosignEntity{}
	if attestation {
		var env dsse.Envelope
		if err := json.Unmarshal(l.Payload, &env); err != nil {
			return nil, fmt.Errorf("not a DSSE envelope: %w", err)
		}
		e.envelope = &env
	} else {
		s, ok := l.Annotations[AnnotationSignature]
		if !ok {
			return nil, errors.New("no signature annotation")
		}
		sig, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("signature annotation: %w", err)
		}
		e.payload, e.sig = l.Payload, sig
	}
	if c := l.Annotations[AnnotationCertificate]; c != "" {
		certs, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(c))
		if err != nil || len(certs) == 0 {
			return nil, fmt.Errorf("certificate annotation: %v", err)
		}
		e.cert = certs[0]
	}
	if b := l.Annotations[AnnotationBundle]; b != "" {
		entry, err := rekorEntry([]byte(b))
		if err != nil {
			return nil, fmt.Errorf("rekor bundle annotation: %w", err)
		}
		e.entry = entry
	}
	return e, nil
}

// rekorEntry reads cosign's Rekor bundle annotation: the log's entry and
// its signed entry timestamp, which sigstore-go checks against the trusted
// root's log.
func rekorEntry(b []byte) (*tlog.Entry, error) {
	var rb struct {
		SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
		Payload              struct {
			Body           string `json:"body"`
			IntegratedTime int64  `json:"integratedTime"`
			LogIndex       int64  `json:"logIndex"`
			LogID          string `json:"logID"`
		} `json:"Payload"`
	}
	if err := json.Unmarshal(b, &rb); err != nil {
		return nil, err
	}
	body, err := base64.StdEncoding.DecodeString(rb.Payload.Body)
	if err != nil {
		return nil, err
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 the Rekor v1 entry of cosign's annotation is what this reads; its replacement takes a protobuf entry
	return tlog.NewEntry(body, rb.Payload.IntegratedTime, rb.Payload.LogIndex, logID, rb.SignedEntryTimestamp, nil)
}

func (e *cosignEntity) HasInclusionPromise() bool {
	return e.entry != nil && e.entry.HasInclusionPromise()
}
func (e *cosignEntity) HasInclusionProof() bool { return e.entry != nil && e.entry.HasInclusionProof() }
func (e *cosignEntity) Timestamps() ([][]byte, error) {
	return nil, nil
}
func (e *cosignEntity) Version() (string, error) { return "v0.3", nil }

func (e *cosignEntity) TlogEntries() ([]*tlog.Entry, error) {
	if e.entry == nil {
		return nil, nil
	}
	return []*tlog.Entry{e.entry}, nil
}

func (e *cosignEntity) SignatureContent() (sgverify.SignatureContent, error) {
	if e.envelope != nil {
		return &bundle.Envelope{Envelope: e.envelope}, nil
	}
	sum := sha256.Sum256(e.payload)
	return bundle.NewMessageSignature(sum[:], "SHA2_256", e.sig), nil
}

func (e *cosignEntity) VerificationContent() (sgverify.VerificationContent, error) {
	if e.cert != nil {
		return bundle.NewCertificate(e.cert), nil
	}
	return keyContent{}, nil
}

// keyContent is the verification content of a signature by a key: the
// policy's key checks it, whatever key id it names.
type keyContent struct{}

func (keyContent) CompareKey(key any, tm root.TrustedMaterial) bool {
	v, err := tm.PublicKeyVerifier("")
	if err != nil {
		return false
	}
	pub, err := v.PublicKey()
	if err != nil {
		return false
	}
	eq, ok := key.(interface{ Equal(any) bool })
	return ok && eq.Equal(pub)
}
func (keyContent) ValidAtTime(t time.Time, tm root.TrustedMaterial) bool {
	v, err := tm.PublicKeyVerifier("")
	return err == nil && v.ValidAtTime(t)
}
func (keyContent) Certificate() *x509.Certificate        { return nil }
func (keyContent) PublicKey() sgverify.PublicKeyProvider { return keyContent{} }
func (keyContent) Hint() string                          { return "" }
