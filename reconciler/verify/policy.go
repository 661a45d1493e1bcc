// Package verify decides whether a step may take an input: given the
// chain's policy for that input (api.InputVerify), the input's value and the
// evidence fetched for its digest (cosign signatures and attestations,
// Sigstore bundles, Kontinue's own signed statements), Decide says verified,
// refused (which rule, which digest, why) or unknown. It does no I/O: the
// fetching is reconciler/verify/check's, as the workload's service account.
//
// The cryptography and the formats are the ecosystem's: sigstore-go verifies
// signatures, certificates, transparency log entries and DSSE envelopes
// against keys or a trusted root; go-containerregistry parses references;
// attest/ checks Kontinue's statements. What is here is the policy, which
// evidence counts for which rule, and a thin adapter presenting cosign's
// legacy tag signatures to sigstore-go (cosign.go).
package verify

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler/api"
)

// Input types, as the step names them.
const (
	TypeImage      = "image"
	TypeSource     = "source"
	TypeConfig     = "config"
	TypeDeployment = "deployment"
)

// Rule names, as conditions and the CLI say which rule failed.
const (
	RuleDigest      = "digest"      // the input names no digest that can be checked
	RulePolicy      = "policy"      // the policy cannot be used (a key, a root)
	RuleSignature   = "signature"   // keys / keyless
	RuleAttestation = "attestation" // followed by the predicate type
	RuleKontinue    = "kontinue"    // Kontinue's own statements
)

// Severities of vulnerability findings, in order.
var severities = []string{"none", "low", "medium", "high", "critical"}

// Named is one input's policy with the input it applies to.
type Named struct {
	Type   string
	Policy api.InputVerify
}

// Policies are a step's policies by input ("type/name").
func Policies(v *api.StepVerify) map[string]Named {
	if v == nil {
		return nil
	}
	out := map[string]Named{}
	for _, l := range []struct {
		typ string
		ps  []api.InputVerify
	}{{TypeImage, v.Images}, {TypeSource, v.Sources}, {TypeConfig, v.Configs}} {
		for _, p := range l.ps {
			out[l.typ+"/"+p.Name] = Named{Type: l.typ, Policy: p}
		}
	}
	if v.Deployment != nil {
		p := *v.Deployment
		p.Name = TypeDeployment
		out[TypeDeployment+"/"+TypeDeployment] = Named{Type: TypeDeployment, Policy: p}
	}
	return out
}

// Validate refuses a step's policy that can never be used: an input the
// step does not have, a rule without settings, an inline key that is not a
// supported public key, a regular expression that does not compile. What
// needs the cluster (a key in a Secret, a trusted root) is checked when it
// is read. The messages name the step and the input.
func Validate(def api.Step) error {
	v := def.Verify
	if v == nil {
		return nil
	}
	has := map[string]bool{}
	for _, i := range def.Images {
		has[TypeImage+"/"+i.Name] = true
	}
	for _, i := range def.Sources {
		has[TypeSource+"/"+i.Name] = true
	}
	for _, i := range def.Configs {
		has[TypeConfig+"/"+i.Name] = true
	}
	if def.Deployment != nil {
		has[TypeDeployment+"/"+TypeDeployment] = true
	}
	var errs []error
	seen := map[string]bool{}
	check := func(typ string, p api.InputVerify) {
		key := typ + "/" + p.Name
		at := fmt.Sprintf("step [%s] verify %s [%s]", def.Name, typ, p.Name)
		if typ == TypeDeployment {
			if p.Name != "" && p.Name != TypeDeployment {
				errs = append(errs, fmt.Errorf("%s: the deployment input is named deployment", at))
			}
			key = TypeDeployment + "/" + TypeDeployment
		}
		if seen[key] {
			errs = append(errs, fmt.Errorf("%s: named twice", at))
		}
		seen[key] = true
		if !has[key] {
			errs = append(errs, fmt.Errorf("%s: the step has no such input", at))
		}
		if err := validateInput(typ, p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
	}
	for _, p := range v.Images {
		check(TypeImage, p)
	}
	for _, p := range v.Sources {
		check(TypeSource, p)
	}
	for _, p := range v.Configs {
		check(TypeConfig, p)
	}
	if v.Deployment != nil {
		check(TypeDeployment, *v.Deployment)
	}
	return errors.Join(errs...)
}

// ValidateChain is Validate of every step of a chain.
func ValidateChain(spec api.ChainSpec) error {
	var errs []error
	for _, s := range spec.Resources {
		if err := Validate(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func validateInput(typ string, p api.InputVerify) error {
	signers := len(p.Keys) + len(p.Keyless)
	if signers == 0 && len(p.Attestations) == 0 && p.Kontinue == nil {
		return errors.New("no rule: give keys, keyless, attestations or kontinue")
	}
	if typ == TypeConfig && (signers > 0 || len(p.Attestations) > 0) {
		return errors.New("a config has no signature: only kontinue applies")
	}
	if len(p.Attestations) > 0 && signers == 0 {
		return errors.New("attestations must be signed: give keys or keyless to say by whom")
	}
	for i, k := range p.Keys {
		n := 0
		for _, set := range []bool{k.PublicKey != "", k.SecretRef != nil, k.ConfigMapRef != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("keys[%d]: set exactly one of publicKey, secretRef or configMapRef", i)
		}
		if k.PublicKey != "" {
			if _, err := ParsePublicKey([]byte(k.PublicKey)); err != nil {
				return fmt.Errorf("keys[%d]: %w", i, err)
			}
		}
		for _, r := range []*api.VerifyDataRef{k.SecretRef, k.ConfigMapRef} {
			if r != nil && (r.Namespace == "" || r.Name == "" || r.Key == "") {
				return fmt.Errorf("keys[%d]: a reference needs namespace, name and key", i)
			}
		}
	}
	for i, k := range p.Keyless {
		if (k.Subject == "") == (k.SubjectRegExp == "") {
			return fmt.Errorf("keyless[%d]: set exactly one of subject or subjectRegExp", i)
		}
		if (k.Issuer == "") == (k.IssuerRegExp == "") {
			return fmt.Errorf("keyless[%d]: set exactly one of issuer or issuerRegExp", i)
		}
		for _, re := range []string{k.SubjectRegExp, k.IssuerRegExp} {
			if _, err := regexp.Compile(re); err != nil {
				return fmt.Errorf("keyless[%d]: %w", i, err)
			}
		}
		r := rootRef(k.TrustedRoot)
		if r == nil || (k.TrustedRoot.ConfigMapRef != nil && k.TrustedRoot.SecretRef != nil) {
			return fmt.Errorf("keyless[%d]: trustedRoot sets exactly one of configMapRef or secretRef", i)
		}
		if r.Namespace == "" || r.Name == "" || r.Key == "" {
			return fmt.Errorf("keyless[%d]: trustedRoot needs namespace, name and key", i)
		}
	}
	for i, a := range p.Attestations {
		if a.PredicateType == "" {
			return fmt.Errorf("attestations[%d]: predicateType is required", i)
		}
		if r := severityRank(a.MaxSeverity); a.MaxSeverity != "" && (r < 0 || r >= len(severities)-1) {
			return fmt.Errorf("attestations[%d]: maxSeverity %q: want none, low, medium or high", i, a.MaxSeverity)
		}
	}
	return nil
}

// ParsePublicKey reads a PEM public key that signatures may be checked
// with: ECDSA P-256, ed25519, or RSA of 2048 bits or more.
func ParsePublicKey(b []byte) (crypto.PublicKey, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("not a PEM public key: %w", err)
	}
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA on %s: want P-256", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("RSA of %d bits: want 2048 or more", k.N.BitLen())
		}
	default:
		return nil, fmt.Errorf("a %T: want ECDSA P-256, ed25519 or RSA", pub)
	}
	return pub, nil
}

func rootRef(r api.TrustedRootRef) *api.VerifyDataRef {
	if r.ConfigMapRef != nil {
		return r.ConfigMapRef
	}
	return r.SecretRef
}

// Ref names a key of a Secret or ConfigMap that a policy reads.
type Ref struct {
	Secret               bool
	Namespace, Name, Key string
}

func (r Ref) String() string {
	kind := "ConfigMap"
	if r.Secret {
		kind = "Secret"
	}
	return fmt.Sprintf("%s %s/%s[%s]", kind, r.Namespace, r.Name, r.Key)
}

func refOf(secret bool, r *api.VerifyDataRef) Ref {
	return Ref{Secret: secret, Namespace: r.Namespace, Name: r.Name, Key: r.Key}
}

// Refs are the Secrets' and ConfigMaps' keys a policy reads.
func Refs(p api.InputVerify) []Ref {
	var out []Ref
	for _, k := range p.Keys {
		if k.SecretRef != nil {
			out = append(out, refOf(true, k.SecretRef))
		}
		if k.ConfigMapRef != nil {
			out = append(out, refOf(false, k.ConfigMapRef))
		}
	}
	for _, k := range p.Keyless {
		if r := k.TrustedRoot.SecretRef; r != nil {
			out = append(out, refOf(true, r))
		} else if r := k.TrustedRoot.ConfigMapRef; r != nil {
			out = append(out, refOf(false, r))
		}
	}
	return out
}

// Material is what a policy reads besides itself: the keys and trusted
// roots it names by reference, and Kontinue's own key.
type Material struct {
	// Data holds each Ref's bytes; a Ref absent was not found.
	Data map[Ref][]byte
	// Kontinue is the key Kontinue signs its statements with (nil: none).
	Kontinue *attest.Key
}

// Hash is the policy's identity for caching results: its spec, the
// material it read and Kontinue's key. Two policies with one hash decide
// alike.
func Hash(p api.InputVerify, m Material) string {
	h := sha256.New()
	b, _ := json.Marshal(p)
	h.Write(b)
	for _, r := range Refs(p) {
		fmt.Fprintf(h, "\x00%s\x00%x", r, sha256.Sum256(m.Data[r]))
	}
	if m.Kontinue != nil {
		fmt.Fprintf(h, "\x00kontinue:%s", m.Kontinue.ID)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// SpecHash is the hash of a policy's spec alone: what the controller keys
// its results by before it reads the material (check.Runner).
func SpecHash(p api.InputVerify) string {
	b, _ := json.Marshal(p)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])[:32]
}

// Policy is one input's policy ready to decide with.
type Policy struct {
	Type, Input string
	signers     []signer
	attest      []api.AttestationRule
	kontinue    bool
	kontinueKey *attest.Key
}

// A signer is a key or a keyless identity, with the sigstore-go verifier
// that checks what it signed.
type signer struct {
	name     string // for messages: "key 1", "keyless https://…"
	v        *sgverify.Verifier
	identity *sgverify.CertificateIdentity // nil: a key
}

// Compile readies an input's policy with its material. An error says why
// it cannot be used (a key missing or not a key, a trusted root that does
// not parse): the input is refused under RulePolicy.
func Compile(typ string, p api.InputVerify, m Material) (*Policy, error) {
	if err := validateInput(typ, p); err != nil {
		return nil, err
	}
	c := &Policy{Type: typ, Input: p.Name, attest: p.Attestations, kontinue: p.Kontinue != nil, kontinueKey: m.Kontinue}
	for i, k := range p.Keys {
		pem := []byte(k.PublicKey)
		if k.PublicKey == "" {
			r := refOf(k.SecretRef != nil, k.SecretRef)
			if k.SecretRef == nil {
				r = refOf(false, k.ConfigMapRef)
			}
			var ok bool
			if pem, ok = m.Data[r]; !ok {
				return nil, fmt.Errorf("keys[%d]: %s not found", i, r)
			}
		}
		pub, err := ParsePublicKey(pem)
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		sv, err := signature.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		// Whatever key id a signature names, it is checked with this key.
		tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
			return root.NewExpiringKey(sv, timeZero, timeZero), nil
		})
		v, err := sgverify.NewVerifier(tm, sgverify.WithNoObserverTimestamps())
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		c.signers = append(c.signers, signer{name: fmt.Sprintf("keys[%d]", i), v: v})
	}
	for i, k := range p.Keyless {
		r := rootRef(k.TrustedRoot)
		ref := refOf(k.TrustedRoot.SecretRef != nil, r)
		b, ok := m.Data[ref]
		if !ok {
			return nil, fmt.Errorf("keyless[%d]: trusted root %s not found", i, ref)
		}
		tr, err := root.NewTrustedRootFromJSON(b)
		if err != nil {
			return nil, fmt.Errorf("keyless[%d]: trusted root %s: %w", i, ref, err)
		}
		v, err := sgverify.NewVerifier(tr, keylessOptions(tr)...)
		if err != nil {
			return nil, fmt.Errorf("keyless[%d]: %w", i, err)
		}
		id, err := sgverify.NewShortCertificateIdentity(k.Issuer, k.IssuerRegExp, k.Subject, k.SubjectRegExp)
		if err != nil {
			return nil, fmt.Errorf("keyless[%d]: %w", i, err)
		}
		c.signers = append(c.signers, signer{name: fmt.Sprintf("keyless[%d] %s%s", i, k.Subject, k.SubjectRegExp), v: v, identity: &id})
	}
	return c, nil
}

// keylessOptions: a root with a transparency log requires each signature's
// entry in it (and takes the entry's time as when the certificate had to be
// valid); a root with timestamp authorities takes their timestamps; a root
// with neither checks the certificate at the current time. A root with CT
// logs requires the certificate's SCT.
func keylessOptions(tr *root.TrustedRoot) []sgverify.VerifierOption {
	var opts []sgverify.VerifierOption
	switch {
	case len(tr.RekorLogs()) > 0:
		opts = append(opts, sgverify.WithTransparencyLog(1), sgverify.WithObserverTimestamps(1))
	case len(tr.TimestampingAuthorities()) > 0:
		opts = append(opts, sgverify.WithSignedTimestamps(1))
	default:
		opts = append(opts, sgverify.WithCurrentTime())
	}
	if len(tr.CTLogs()) > 0 {
		opts = append(opts, sgverify.WithSignedCertificateTimestamps(1))
	}
	return opts
}

var timeZero time.Time // an ExpiringKey bound that does not bind

func severityRank(s string) int {
	for i, n := range severities {
		if strings.EqualFold(n, s) {
			return i
		}
	}
	return -1
}
