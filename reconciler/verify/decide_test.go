package verify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/verify"
	vt "kontinue.dev/kontinue/reconciler/verify/verifytest"
)

const (
	repo    = "registry.example/app"
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func kontinueKey(testing.TB) *attest.Key { return vt.NewKontinueKey() }

func statement(_ testing.TB, k *attest.Key, digest string) []byte {
	return vt.KontinueStatement(k, digest)
}

func TestDecide(t *testing.T) {
	good, other := vt.NewKey("ecdsa"), vt.NewKey("ecdsa")
	ed, rsaKey := vt.NewKey("ed25519"), vt.NewKey("rsa")
	ca, otherCA := vt.NewCA(), vt.NewCA()
	now := time.Now().Add(-time.Minute)
	alice := ca.Keyless("alice@example.com", "https://issuer.example", now)
	expired := ca.Keyless("alice@example.com", "https://issuer.example", time.Now().Add(-time.Hour))
	stranger := otherCA.Keyless("alice@example.com", "https://issuer.example", now)
	kk, otherKK := kontinueKey(t), kontinueKey(t)
	deliverable := verify.Producer{Kind: "Deliverable", Namespace: "team-a", Name: "app", UID: "uid-dlv"}
	dev, formerApp := vt.Owner, vt.Owner
	dev.Name, dev.UID = "dev", "uid-dev"
	formerApp.UID = "uid-former"

	// A Sigstore whose keyless bundles carry their Rekor entry (inclusion
	// proof and signed entry timestamp), and another whose log recorded
	// none of them.
	sigstore, otherLog := vt.NewSigstore(), vt.NewSigstore()
	rekorRef := &api.VerifyDataRef{Namespace: "platform", Name: "roots", Key: "rekor.json"}
	foreignLogRef := &api.VerifyDataRef{Namespace: "platform", Name: "roots", Key: "foreign-log.json"}
	byAlice := func(ref *api.VerifyDataRef) []api.KeylessIdentity {
		return []api.KeylessIdentity{{Subject: "alice@example.com", Issuer: "https://issuer.example", TrustedRoot: api.TrustedRootRef{ConfigMapRef: ref}}}
	}
	logged := func(digest string, change func(b *protobundle.Bundle)) []byte {
		b := sigstore.Bundle("alice@example.com", "https://issuer.example", digest, verify.CosignSignPredicate, nil)
		if change != nil {
			change(b)
		}
		return vt.BundleJSON(b)
	}
	otherEntry := sigstore.Bundle("alice@example.com", "https://issuer.example", digestB, verify.CosignSignPredicate, nil).GetVerificationMaterial().GetTlogEntries()

	rootRef := &api.VerifyDataRef{Namespace: "platform", Name: "roots", Key: "trusted_root.json"}
	logRef := &api.VerifyDataRef{Namespace: "platform", Name: "roots", Key: "with-log.json"}
	mat := verify.Material{Data: map[verify.Ref][]byte{
		{Namespace: "platform", Name: "roots", Key: "trusted_root.json"}: ca.TrustedRoot(false),
		{Namespace: "platform", Name: "roots", Key: "with-log.json"}:     ca.TrustedRoot(true),
		{Namespace: "platform", Name: "roots", Key: "rekor.json"}:        sigstore.TrustedRoot(sigstore),
		{Namespace: "platform", Name: "roots", Key: "foreign-log.json"}:  sigstore.TrustedRoot(otherLog),
	}, Kontinue: kk}
	keys := func(ks ...*vt.Key) []api.VerifyKey {
		var out []api.VerifyKey
		for _, k := range ks {
			out = append(out, api.VerifyKey{PublicKey: k.PublicPEM()})
		}
		return out
	}
	keyless := []api.KeylessIdentity{{Subject: "alice@example.com", Issuer: "https://issuer.example", TrustedRoot: api.TrustedRootRef{ConfigMapRef: rootRef}}}
	slsa := []api.AttestationRule{{PredicateType: vt.SLSAType, BuilderID: "https://ci.example/builder"}}
	scan := []api.AttestationRule{{PredicateType: vt.VulnsType, MaxSeverity: "medium"}}
	image := repo + "@" + digestA

	cases := []struct {
		name   string
		typ    string
		value  any
		policy api.InputVerify
		mat    *verify.Material
		ev     verify.Evidence
		want   verify.Outcome
		rule   string
		why    string
		// awaited: refused only for a statement that may yet be written.
		awaited bool
	}{
		{name: "signed by the key", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}}, want: verify.Verified, rule: "signature"},
		{name: "signed by one of the keys", policy: api.InputVerify{Keys: keys(other, good)},
			ev: verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}}, want: verify.Verified},
		{name: "ed25519", policy: api.InputVerify{Keys: keys(ed)},
			ev: verify.Evidence{Signatures: []verify.Layer{ed.Sign(repo, digestA)}}, want: verify.Verified},
		{name: "rsa", policy: api.InputVerify{Keys: keys(rsaKey)},
			ev: verify.Evidence{Signatures: []verify.Layer{rsaKey.Sign(repo, digestA)}}, want: verify.Verified},
		{name: "signed by another key", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Signatures: []verify.Layer{other.Sign(repo, digestA)}}, want: verify.Refused, rule: "signature", why: "none of the 1 signatures"},
		{name: "not signed", policy: api.InputVerify{Keys: keys(good)}, want: verify.Refused, rule: "signature", why: "no signature of " + digestA},
		{name: "a signature moved from another digest", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestB)}}, want: verify.Refused, rule: "signature", why: "is of " + digestB},
		{name: "a payload changed after signing", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Signatures: []verify.Layer{tamper(good.Sign(repo, digestB), digestB, digestA)}}, want: verify.Refused, rule: "signature"},
		{name: "keyless", policy: api.InputVerify{Keyless: keyless},
			ev: verify.Evidence{Signatures: []verify.Layer{alice.Sign(repo, digestA)}}, want: verify.Verified},
		{name: "keyless, another identity", policy: api.InputVerify{Keyless: []api.KeylessIdentity{{Subject: "bob@example.com", Issuer: "https://issuer.example", TrustedRoot: api.TrustedRootRef{ConfigMapRef: rootRef}}}},
			ev: verify.Evidence{Signatures: []verify.Layer{alice.Sign(repo, digestA)}}, want: verify.Refused, rule: "signature", why: "certificate identity"},
		{name: "keyless, expired certificate", policy: api.InputVerify{Keyless: keyless},
			ev: verify.Evidence{Signatures: []verify.Layer{expired.Sign(repo, digestA)}}, want: verify.Refused, rule: "signature", why: "certificate"},
		{name: "keyless, untrusted authority", policy: api.InputVerify{Keyless: keyless},
			ev: verify.Evidence{Signatures: []verify.Layer{stranger.Sign(repo, digestA)}}, want: verify.Refused, rule: "signature", why: "certificate"},
		{name: "keyless, the root has a log and the signature no entry", policy: api.InputVerify{Keyless: []api.KeylessIdentity{{Subject: "alice@example.com", Issuer: "https://issuer.example", TrustedRoot: api.TrustedRootRef{ConfigMapRef: logRef}}}},
			ev: verify.Evidence{Signatures: []verify.Layer{alice.Sign(repo, digestA)}}, want: verify.Refused, rule: "signature", why: "log"},
		// Sigstore bundles, as cosign stores them as OCI 1.1 referrers.
		{name: "a bundle signed by the key", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Bundles: [][]byte{good.SignBundle(digestA)}}, want: verify.Verified, rule: "signature"},
		{name: "a bundle signed by another key", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Bundles: [][]byte{other.SignBundle(digestA)}}, want: verify.Refused, rule: "signature", why: "none of the 1 signatures"},
		{name: "a bundle signing another digest", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Bundles: [][]byte{good.SignBundle(digestB)}}, want: verify.Refused, rule: "signature"},
		{name: "a bundle that is not valid says why", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Bundles: [][]byte{logged(digestA, func(b *protobundle.Bundle) {
				b.VerificationMaterial.TlogEntries[0].KindVersion = nil
			})}}, want: verify.Refused, rule: "signature", why: "bundle 0: validation error"},
		{name: "an attestation bundle is no signature", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Bundles: [][]byte{good.AttestBundle(digestA, vt.SLSAType, vt.SLSA("https://ci.example/builder"))}}, want: verify.Refused, rule: "signature", why: "no signature of"},
		{name: "SLSA provenance in a bundle", policy: api.InputVerify{Keys: keys(good), Attestations: slsa},
			ev:   verify.Evidence{Bundles: [][]byte{good.SignBundle(digestA), good.AttestBundle(digestA, vt.SLSAType, vt.SLSA("https://ci.example/builder"))}},
			want: verify.Verified, rule: "signature, attestation " + vt.SLSAType},
		{name: "an attestation bundle that is not valid says why", policy: api.InputVerify{Keys: keys(good), Attestations: slsa},
			ev: verify.Evidence{Bundles: [][]byte{good.SignBundle(digestA), logged(digestA, func(b *protobundle.Bundle) {
				b.VerificationMaterial.TlogEntries[0].KindVersion = nil
			})}}, want: verify.Refused, rule: "attestation " + vt.SLSAType, why: "unreadable: bundle 1: validation error"},
		{name: "SLSA provenance in a bundle, of another digest", policy: api.InputVerify{Keys: keys(good), Attestations: slsa},
			ev:   verify.Evidence{Bundles: [][]byte{good.SignBundle(digestA), good.AttestBundle(digestB, vt.SLSAType, vt.SLSA("https://ci.example/builder"))}},
			want: verify.Refused, rule: "attestation " + vt.SLSAType},
		{name: "SLSA provenance in a bundle by another key", policy: api.InputVerify{Keys: keys(good), Attestations: slsa},
			ev:   verify.Evidence{Bundles: [][]byte{good.SignBundle(digestA), other.AttestBundle(digestA, vt.SLSAType, vt.SLSA("https://ci.example/builder"))}},
			want: verify.Refused, rule: "attestation " + vt.SLSAType},
		// Keyless bundles whose root has a transparency log: the entry the
		// bundle carries is checked offline against the root's log key
		// (its inclusion proof and signed entry timestamp), and must be of
		// this very signature.
		{name: "keyless bundle with its log entry", policy: api.InputVerify{Keyless: byAlice(rekorRef)},
			ev: verify.Evidence{Bundles: [][]byte{logged(digestA, nil)}}, want: verify.Verified, rule: "signature"},
		{name: "keyless bundle whose entry a log the root does not trust recorded", policy: api.InputVerify{Keyless: byAlice(foreignLogRef)},
			ev: verify.Evidence{Bundles: [][]byte{logged(digestA, nil)}}, want: verify.Refused, rule: "signature", why: "log inclusion"},
		{name: "keyless bundle with the log entry of another signature", policy: api.InputVerify{Keyless: byAlice(rekorRef)},
			ev: verify.Evidence{Bundles: [][]byte{logged(digestA, func(b *protobundle.Bundle) {
				b.VerificationMaterial.TlogEntries = otherEntry
			})}}, want: verify.Refused, rule: "signature", why: "log inclusion"},
		{name: "keyless bundle whose entry's time was altered", policy: api.InputVerify{Keyless: byAlice(rekorRef)},
			ev: verify.Evidence{Bundles: [][]byte{logged(digestA, func(b *protobundle.Bundle) {
				b.VerificationMaterial.TlogEntries[0].IntegratedTime -= 60
			})}}, want: verify.Refused, rule: "signature", why: "log inclusion"},
		{name: "keyless bundle whose inclusion proof was altered", policy: api.InputVerify{Keyless: byAlice(rekorRef)},
			ev: verify.Evidence{Bundles: [][]byte{logged(digestA, func(b *protobundle.Bundle) {
				p := b.VerificationMaterial.TlogEntries[0].InclusionProof
				p.TreeSize++
			})}}, want: verify.Refused, rule: "signature", why: "log inclusion"},
		{name: "keyless bundle without its log entry, the root has a log", policy: api.InputVerify{Keyless: byAlice(rekorRef)},
			ev: verify.Evidence{Bundles: [][]byte{logged(digestA, func(b *protobundle.Bundle) {
				b.VerificationMaterial.TlogEntries = nil
			})}}, want: verify.Refused, rule: "signature", why: "log"},
		{name: "keyless bundle by another identity", policy: api.InputVerify{Keyless: []api.KeylessIdentity{{Subject: "bob@example.com", Issuer: "https://issuer.example", TrustedRoot: api.TrustedRootRef{ConfigMapRef: rekorRef}}}},
			ev: verify.Evidence{Bundles: [][]byte{logged(digestA, nil)}}, want: verify.Refused, rule: "signature", why: "certificate identity"},
		{name: "keyless bundle of another digest", policy: api.InputVerify{Keyless: byAlice(rekorRef)},
			ev: verify.Evidence{Bundles: [][]byte{logged(digestB, nil)}}, want: verify.Refused, rule: "signature"},
		// cosign's keyless tag signature: the Rekor entry and its signed
		// entry timestamp in the layer's bundle annotation.
		{name: "keyless tag signature with its log entry", policy: api.InputVerify{Keyless: byAlice(rekorRef)},
			ev: verify.Evidence{Signatures: []verify.Layer{sigstore.CosignLayer("alice@example.com", "https://issuer.example", repo, digestA, 0)}}, want: verify.Verified},
		{name: "keyless tag signature whose entry a log the root does not trust signed", policy: api.InputVerify{Keyless: byAlice(foreignLogRef)},
			ev:   verify.Evidence{Signatures: []verify.Layer{sigstore.CosignLayer("alice@example.com", "https://issuer.example", repo, digestA, 0)}},
			want: verify.Refused, rule: "signature", why: "log"},
		{name: "keyless tag signature whose entry's time was altered", policy: api.InputVerify{Keyless: byAlice(rekorRef)},
			ev:   verify.Evidence{Signatures: []verify.Layer{sigstore.CosignLayer("alice@example.com", "https://issuer.example", repo, digestA, -60)}},
			want: verify.Refused, rule: "signature", why: "log"},
		{name: "SLSA provenance from the builder", policy: api.InputVerify{Keys: keys(good), Attestations: slsa},
			ev:   verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}, Attestations: []verify.Layer{good.Attest(digestA, vt.SLSAType, vt.SLSA("https://ci.example/builder"))}},
			want: verify.Verified, rule: "signature, attestation " + vt.SLSAType},
		{name: "SLSA provenance from another builder", policy: api.InputVerify{Keys: keys(good), Attestations: slsa},
			ev:   verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}, Attestations: []verify.Layer{good.Attest(digestA, vt.SLSAType, vt.SLSA("https://evil.example"))}},
			want: verify.Refused, rule: "attestation " + vt.SLSAType, why: "builder id"},
		{name: "an attestation of another digest", policy: api.InputVerify{Keys: keys(good), Attestations: slsa},
			ev:   verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}, Attestations: []verify.Layer{good.Attest(digestB, vt.SLSAType, vt.SLSA("https://ci.example/builder"))}},
			want: verify.Refused, rule: "attestation " + vt.SLSAType},
		{name: "an attestation by another key", policy: api.InputVerify{Keys: keys(good), Attestations: slsa},
			ev:   verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}, Attestations: []verify.Layer{other.Attest(digestA, vt.SLSAType, vt.SLSA("https://ci.example/builder"))}},
			want: verify.Refused, rule: "attestation " + vt.SLSAType},
		{name: "no attestation", policy: api.InputVerify{Keys: keys(good), Attestations: slsa},
			ev:   verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}},
			want: verify.Refused, rule: "attestation " + vt.SLSAType, why: "no " + vt.SLSAType},
		{name: "a scan with nothing above medium", policy: api.InputVerify{Keys: keys(good), Attestations: scan},
			ev:   verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}, Attestations: []verify.Layer{good.Attest(digestA, vt.VulnsType, vt.Vulns("LOW", "5.0", "medium"))}},
			want: verify.Verified},
		{name: "a scan with a high finding", policy: api.InputVerify{Keys: keys(good), Attestations: scan},
			ev:   verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}, Attestations: []verify.Layer{good.Attest(digestA, vt.VulnsType, vt.Vulns("low", "7.5"))}},
			want: verify.Refused, why: "CVE-2026-0002 is high"},
		{name: "a finding of unreadable severity counts as critical", policy: api.InputVerify{Keys: keys(good), Attestations: scan},
			ev:   verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}, Attestations: []verify.Layer{good.Attest(digestA, vt.VulnsType, vt.Vulns("bad"))}},
			want: verify.Refused, why: "critical"},
		{name: "kontinue: its statement names the digest", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev: verify.Evidence{Statements: [][]byte{statement(t, kk, digestB), statement(t, kk, digestA)}}, want: verify.Verified, rule: "kontinue"},
		{name: "kontinue: no statement names it", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev: verify.Evidence{Statements: [][]byte{statement(t, kk, digestB)}}, want: verify.Refused, rule: "kontinue", why: "no statement signed by Kontinue", awaited: true},
		{name: "kontinue: no statement yet", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			want: verify.Refused, rule: "kontinue", why: "(0 statements read)", awaited: true},
		{name: "kontinue: signed by another key", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev: verify.Evidence{Statements: [][]byte{statement(t, otherKK, digestA)}}, want: verify.Refused, rule: "kontinue", why: "did not verify"},
		{name: "kontinue: a tampered statement", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev: verify.Evidence{Statements: [][]byte{tamperEnvelope(t, statement(t, kk, digestB), digestB, digestA)}}, want: verify.Refused, rule: "kontinue", why: "did not verify"},
		{name: "kontinue: a statement of the Workload that stamped this Deliverable", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev: verify.Evidence{Statements: [][]byte{statement(t, kk, digestA)}, Producers: []verify.Producer{deliverable, vt.Producer}}, want: verify.Verified},
		{name: "kontinue: a statement of another owner, copied into the history", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev:   verify.Evidence{Statements: [][]byte{vt.KontinueStatementOf(kk, dev, digestA)}, Producers: []verify.Producer{deliverable, vt.Producer}},
			want: verify.Refused, rule: "kontinue", why: "is of Workload team-a/dev (uid uid-dev), not of Deliverable team-a/app or Workload team-a/app"},
		{name: "kontinue: a statement of a deleted owner of the same name", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev: verify.Evidence{Statements: [][]byte{vt.KontinueStatementOf(kk, formerApp, digestA)}}, want: verify.Refused, rule: "kontinue", why: "uid uid-former"},
		{name: "kontinue: another owner's statement of it beside this one's", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev: verify.Evidence{Statements: [][]byte{vt.KontinueStatementOf(kk, dev, digestA), statement(t, kk, digestA)}}, want: verify.Verified},
		{name: "kontinue: no owner named to read statements of", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev: verify.Evidence{Statements: [][]byte{statement(t, kk, digestA)}, Producers: []verify.Producer{}}, want: verify.Refused, rule: "kontinue", why: "none named"},
		{name: "kontinue: a statement Kontinue signed that names no owner", policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev: verify.Evidence{Statements: [][]byte{ownerless(t, kk, digestA)}}, want: verify.Refused, rule: "kontinue", why: "names no owner"},
		{name: "kontinue without a controller key", policy: api.InputVerify{Kontinue: &api.KontinueRule{}}, mat: &verify.Material{},
			ev: verify.Evidence{Statements: [][]byte{statement(t, kk, digestA)}}, want: verify.Refused, rule: "kontinue", why: "--attestation-key"},
		{name: "kontinue of a config, by its value's digest", typ: verify.TypeConfig, value: map[string]any{"a": "b"}, policy: api.InputVerify{Kontinue: &api.KontinueRule{}},
			ev: verify.Evidence{Statements: [][]byte{statement(t, kk, configDigest(map[string]any{"a": "b"}))}}, want: verify.Verified},
		{name: "an image by tag: the digest it resolved to", value: repo + ":v1", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Digest: digestA, Signatures: []verify.Layer{good.Sign(repo, digestA)}}, want: verify.Verified},
		{name: "evidence of another digest", policy: api.InputVerify{Keys: keys(good)},
			ev: verify.Evidence{Digest: digestB, Signatures: []verify.Layer{good.Sign(repo, digestB)}}, want: verify.Refused, rule: "digest"},
		{name: "a git source has no signature", typ: verify.TypeSource, value: verify.Source{URL: "https://git.example/app.git", Revision: "main@sha1:0123456789012345678901234567890123456789"},
			policy: api.InputVerify{Keys: keys(good)}, want: verify.Refused, rule: "digest", why: "names no OCI digest"},
		{name: "an OCI source", typ: verify.TypeSource, value: verify.Source{URL: "oci://" + repo, Revision: "latest@" + digestA},
			policy: api.InputVerify{Keys: keys(good)}, ev: verify.Evidence{Signatures: []verify.Layer{good.Sign(repo, digestA)}}, want: verify.Verified},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			typ, value := c.typ, c.value
			if typ == "" {
				typ = verify.TypeImage
			}
			if value == nil {
				value = image
			}
			m := mat
			if c.mat != nil {
				m = *c.mat
			}
			p, err := verify.Compile(typ, c.policy, m)
			require.NoError(t, err)
			target, err := verify.TargetOf(typ, "in", value)
			require.NoError(t, err)
			ev := c.ev
			if ev.Producers == nil {
				ev.Producers = []verify.Producer{vt.Producer}
			}
			got := verify.Decide(p, target, ev)
			assert.Equal(t, c.want, got.Outcome, got.Why)
			if c.rule != "" {
				assert.Equal(t, c.rule, got.Rule)
			}
			assert.Contains(t, got.Why, c.why)
			assert.Equal(t, c.awaited, got.Awaited, "awaited")

			// Explain decides alike, and says of each rule how it fared:
			// the first that did not pass is the one Decide names; every
			// rule of a verified value passed and says by whom.
			explained, rules := verify.Explain(p, target, ev)
			assert.Equal(t, got, explained, "Explain's result is Decide's")
			require.NotEmpty(t, rules)
			firstFailed := ""
			for _, r := range rules {
				if !r.Passed && firstFailed == "" {
					firstFailed = r.Rule
				}
				assert.NotEmpty(t, r.Why, "rule %s says why or by whom", r.Rule)
			}
			if got.Outcome == verify.Verified {
				assert.Empty(t, firstFailed)
			} else {
				assert.Equal(t, got.Rule, firstFailed)
			}
		})
	}
}

// tamper replaces from with to in a signed layer's payload.
func tamper(l verify.Layer, from, to string) verify.Layer {
	l.Payload = []byte(strings.ReplaceAll(string(l.Payload), from, to))
	return l
}

// tamperEnvelope rewrites the statement inside a DSSE envelope, keeping
// its signature.
func tamperEnvelope(t *testing.T, env []byte, from, to string) []byte {
	var e struct {
		PayloadType string           `json:"payloadType"`
		Payload     []byte           `json:"payload"`
		Signatures  []map[string]any `json:"signatures"`
	}
	require.NoError(t, json.Unmarshal(env, &e))
	e.Payload = []byte(strings.ReplaceAll(string(e.Payload), strings.TrimPrefix(from, "sha256:"), strings.TrimPrefix(to, "sha256:")))
	b, err := json.Marshal(e)
	require.NoError(t, err)
	return b
}

// ownerless is a statement signed with k naming digest whose predicate is
// not Kontinue's step schema (no owner).
func ownerless(t *testing.T, k *attest.Key, digest string) []byte {
	s := &intoto.Statement{Type: intoto.StatementTypeUri, PredicateType: attest.PredicateType,
		Subject:   []*intoto.ResourceDescriptor{{Name: "image", Digest: map[string]string{"sha256": strings.TrimPrefix(digest, "sha256:")}}},
		Predicate: &structpb.Struct{Fields: map[string]*structpb.Value{"buildDefinition": structpb.NewStringValue("x")}}}
	b, err := attest.Sign(context.Background(), k, s)
	require.NoError(t, err)
	return b
}

func configDigest(v any) string {
	t, _ := verify.TargetOf(verify.TypeConfig, "c", v)
	return t.ValueDigest
}
