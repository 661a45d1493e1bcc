package attest

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
	"google.golang.org/protobuf/encoding/protojson"
)

// PayloadType is the DSSE payload type of an in-toto statement.
const PayloadType = "application/vnd.in-toto+json"

// Key is a loaded signing or verifying key: ECDSA P-256 or ed25519, in
// PEM (PKCS#8 or SEC 1 private keys, PKIX public keys).
type Key struct {
	sv dsse.SignerVerifier
	// ID is the key's id as securesystemslib computes it (a hash of the
	// public key): the envelope's keyid.
	ID      string
	private bool
}

// ErrKey is a key that cannot be used: missing, unreadable, not PEM, or
// of a type Kontinue does not sign with.
var ErrKey = errors.New("unusable key")

// LoadKeyFile reads a PEM key from path. private says which kind is
// expected: a signing key (the controller, --sign-with) or a public key
// (--verify; a private key is taken too, as its public half).
func LoadKeyFile(path string, private bool) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	k, err := ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if private && !k.private {
		return nil, fmt.Errorf("%s: %w: a public key cannot sign: give the private key", path, ErrKey)
	}
	return k, nil
}

// ParseKey reads a PEM key. Only ECDSA on P-256 and ed25519 are taken:
// what common verifiers (cosign, in-toto, slsa-verifier) take, with
// signatures small enough to keep per step.
func ParseKey(b []byte) (*Key, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrKey)
	}
	if err := supported(block); err != nil {
		return nil, err
	}
	sk, err := signerverifier.LoadKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	k := &Key{ID: sk.KeyID, private: sk.KeyVal.Private != ""}
	switch sk.KeyType {
	case signerverifier.ECDSAKeyType:
		k.sv, err = signerverifier.NewECDSASignerVerifierFromSSLibKey(sk)
	case signerverifier.ED25519KeyType:
		k.sv, err = signerverifier.NewED25519SignerVerifierFromSSLibKey(sk)
	default:
		err = fmt.Errorf("key type %s", sk.KeyType)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return k, nil
}

// supported refuses RSA and curves other than P-256 before
// securesystemslib takes them.
func supported(block *pem.Block) error {
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	default:
		return fmt.Errorf("%w: PEM block %q: want PRIVATE KEY, EC PRIVATE KEY or PUBLIC KEY (ECDSA P-256 or ed25519)", ErrKey, block.Type)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrKey, err)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		return p256(k.Curve)
	case *ecdsa.PublicKey:
		return p256(k.Curve)
	case ed25519.PrivateKey, ed25519.PublicKey:
		return nil
	}
	return fmt.Errorf("%w: a %T: want ECDSA P-256 or ed25519", ErrKey, key)
}

func p256(c elliptic.Curve) error {
	if c != elliptic.P256() {
		return fmt.Errorf("%w: ECDSA on %s: want P-256", ErrKey, c.Params().Name)
	}
	return nil
}

// Sign signs s in a DSSE envelope, as JSON.
func Sign(ctx context.Context, k *Key, s *intoto.Statement) ([]byte, error) {
	if k == nil || !k.private {
		return nil, fmt.Errorf("%w: no private key to sign with", ErrKey)
	}
	payload, err := Marshal(s)
	if err != nil {
		return nil, err
	}
	es, err := dsse.NewEnvelopeSigner(k.sv)
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(ctx, PayloadType, payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(env)
}

// Verify checks that envelope (DSSE JSON) is signed by k over an in-toto
// statement, and returns the statement.
func Verify(ctx context.Context, k *Key, envelope []byte) (*intoto.Statement, error) {
	var env dsse.Envelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, fmt.Errorf("not a DSSE envelope: %w", err)
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("payload type %q, want %q", env.PayloadType, PayloadType)
	}
	ev, err := dsse.NewEnvelopeVerifier(k.sv)
	if err != nil {
		return nil, err
	}
	if _, err := ev.Verify(ctx, &env); err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		return nil, err
	}
	var s intoto.Statement
	if err := protojson.Unmarshal(payload, &s); err != nil {
		return nil, fmt.Errorf("payload is not an in-toto statement: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	return &s, nil
}
