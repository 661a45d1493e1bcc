package verify

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	provv02 "github.com/in-toto/attestation/go/predicates/provenance/v02"
	provv1 "github.com/in-toto/attestation/go/predicates/provenance/v1"
	vulns "github.com/in-toto/attestation/go/predicates/vulns/v02"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler/api"
)

// CosignSignPredicate is the predicate type of an image signature in a
// Sigstore bundle (cosign's bundle format): a statement about the digest.
const CosignSignPredicate = "https://sigstore.dev/cosign/sign/v1"

// Evidence is what the fetch found for one digest: cosign's tag signatures
// and attestations, Sigstore bundles attached as OCI 1.1 referrers, and
// Kontinue's signed statements (DSSE envelopes from history ConfigMaps).
type Evidence struct {
	Digest       string   `json:"digest,omitempty"`
	Signatures   []Layer  `json:"signatures,omitempty"`
	Attestations []Layer  `json:"attestations,omitempty"`
	Bundles      [][]byte `json:"bundles,omitempty"`
	Statements   [][]byte `json:"statements,omitempty"`
	// Producers are the owners whose histories Statements were read from
	// (the owner asking, the Workload that stamped a Deliverable): a
	// statement counts only when it is about one of them. A history is a
	// ConfigMap in the tenant's namespace, which the tenant may write: a
	// statement Kontinue signed for another owner copied into it is
	// Kontinue's word about that owner, not about this one.
	Producers []Producer `json:"producers,omitempty"`
}

// Producer is an owner whose statements count for rule kontinue.
type Producer struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID, when known, must be the statement's too: not a deleted
	// owner's of the same name.
	UID string `json:"uid,omitempty"`
}

func (p Producer) String() string { return p.Kind + " " + p.Namespace + "/" + p.Name }

// is says whether o (a verified statement's owner) is p.
func (p Producer) is(o attest.Owner) bool {
	return o.Kind == p.Kind && o.Namespace == p.Namespace && o.Name == p.Name && (p.UID == "" || o.UID == p.UID)
}

// Outcome of a decision.
type Outcome string

const (
	Verified Outcome = "Verified"
	Refused  Outcome = "Refused"
	// Unknown: not decided yet (the evidence is being fetched, or could
	// not be): the step waits.
	Unknown Outcome = "Unknown"
)

// Result is a decision about one input value.
type Result struct {
	Outcome Outcome
	// Rule is the rule that refused (RuleSignature, RuleAttestation + " "
	// + its predicate type, RuleKontinue, RuleDigest, RulePolicy); for a
	// verified value, the rules that passed, comma-separated.
	Rule string
	// Digest is the digest checked (sha256:…), "" when none.
	Digest string
	// Why says what was found, for people.
	Why string
	// Awaited (Refused by RuleKontinue): no statement of Kontinue's names
	// the value yet, and none failed to verify. Kontinue writes its
	// statement of a step's outputs just after the status write that
	// publishes them, so a later step may ask a moment before it exists
	// (check.Runner waits for it a while before refusing).
	Awaited bool
}

// Decide checks target against p with ev, the evidence fetched for
// ev.Digest (the target's digest, or the one its tag resolved to). Each
// rule must pass: a signature by one of the signers, each attestation
// signed by one of them, Kontinue's statement. The first that does not
// refuses.
func Decide(p *Policy, t Target, ev Evidence) Result {
	res, _ := decide(p, t, ev, false)
	return res
}

// RuleResult is how one rule of a policy fared (Explain).
type RuleResult struct {
	// Rule as Result names it: signature, attestation <type>, kontinue,
	// digest (no digest to look up) or policy.
	Rule   string `json:"rule"`
	Passed bool   `json:"passed"`
	// Why: what passed it (the signer: keys[i] or keyless[i] <subject>)
	// or why it did not.
	Why string `json:"why"`
}

// Explain is Decide, and every rule's outcome: it goes on past the first
// rule that refuses (`kontinue verify` prints each). The Result is
// Decide's.
func Explain(p *Policy, t Target, ev Evidence) (Result, []RuleResult) {
	return decide(p, t, ev, true)
}

// decide is Decide; all: every rule is evaluated and reported.
func decide(p *Policy, t Target, ev Evidence, all bool) (Result, []RuleResult) {
	digest := t.Digest
	if digest == "" {
		digest = ev.Digest
	}
	res := Result{Digest: digest}
	var rules []RuleResult
	refuse := func(rule, format string, a ...any) (Result, []RuleResult) {
		res.Outcome, res.Rule, res.Why = Refused, rule, fmt.Sprintf(format, a...)
		return res, append(rules, RuleResult{Rule: rule, Why: res.Why})
	}
	if t.Digest != "" && ev.Digest != "" && ev.Digest != t.Digest {
		return refuse(RuleDigest, "the evidence is of %s, not of %s", ev.Digest, t.Digest)
	}
	registry := len(p.signers) > 0 || len(p.attest) > 0
	var hexDigest []byte
	if registry {
		if t.Repository == "" || digest == "" {
			return refuse(RuleDigest, "%s [%s] names no OCI digest: its signatures cannot be looked up", t.Type, t.Input)
		}
		h, err := hex.DecodeString(strings.TrimPrefix(digest, "sha256:"))
		if err != nil || len(h) != 32 || !strings.HasPrefix(digest, "sha256:") {
			return refuse(RuleDigest, "%s is not a sha256 digest", digest)
		}
		hexDigest = h
	}
	var passed []string
	// rule records one rule's outcome; false: stop (the first refusal,
	// unless all are wanted).
	rule := func(name, by, why string) bool {
		if why == "" {
			passed = append(passed, name)
			rules = append(rules, RuleResult{Rule: name, Passed: true, Why: by})
			return true
		}
		rules = append(rules, RuleResult{Rule: name, Why: why})
		if res.Outcome != Refused {
			res.Outcome, res.Rule, res.Why = Refused, name, why
		}
		return all
	}
	if len(p.signers) > 0 {
		by, why := p.signed(digest, hexDigest, ev)
		if !rule(RuleSignature, by, why) {
			return res, rules
		}
	}
	for _, a := range p.attest {
		by, why := p.attested(a, hexDigest, ev)
		if !rule(RuleAttestation+" "+a.PredicateType, by, why) {
			return res, rules
		}
	}
	if p.kontinue {
		why, awaited := p.byKontinue(t, digest, ev)
		if why != "" && res.Outcome != Refused {
			res.Awaited = awaited
		}
		if !rule(RuleKontinue, "a statement signed by Kontinue names it", why) {
			return res, rules
		}
	}
	if res.Outcome != Refused {
		res.Outcome, res.Rule = Verified, strings.Join(passed, ", ")
	}
	return res, rules
}

// signed says which signer signed digest (and how it was found), or why
// none did.
func (p *Policy) signed(digest string, hexDigest []byte, ev Evidence) (by, why string) {
	var errs []string
	note := func(format string, a ...any) {
		if len(errs) < 3 {
			errs = append(errs, fmt.Sprintf(format, a...))
		}
	}
	n := 0
	for i, l := range ev.Signatures {
		n++
		e, err := entityOf(l, false)
		if err != nil {
			note("signature %d: %v", i, err)
			continue
		}
		for _, s := range p.signers {
			pol := sgverify.NewPolicy(sgverify.WithArtifact(bytes.NewReader(e.payload)), s.option())
			if _, err := s.v.Verify(e, pol); err != nil {
				note("signature %d, %s: %v", i, s.name, err)
				continue
			}
			// The signature is good; it must be about this digest (a
			// signature copied from another image's tag is not).
			var sci payload.SimpleContainerImage
			if err := json.Unmarshal(e.payload, &sci); err != nil {
				note("signature %d: payload: %v", i, err)
				continue
			}
			if got := sci.Critical.Image.DockerManifestDigest; got != digest {
				note("signature %d by %s is of %s, not of this digest", i, s.name, got)
				continue
			}
			return fmt.Sprintf("signature %d (cosign's %s.sig tag) by %s", i, strings.Replace(digest, ":", "-", 1), s.name), ""
		}
	}
	for i, raw := range ev.Bundles {
		b, stmt, err := readBundle(raw)
		if err != nil {
			// Counted, so that the refusal says why rather than that
			// there is none.
			n++
			note("bundle %d: %v", i, err)
			continue
		}
		if stmt != nil && stmt.GetPredicateType() != CosignSignPredicate {
			continue // an attestation, not a signature
		}
		n++
		for _, s := range p.signers {
			pol := sgverify.NewPolicy(sgverify.WithArtifactDigest("sha256", hexDigest), s.option())
			if _, err := s.v.Verify(b, pol); err != nil {
				note("bundle %d, %s: %v", i, s.name, err)
				continue
			}
			return fmt.Sprintf("bundle %d (an OCI referrer) by %s", i, s.name), ""
		}
	}
	if n == 0 {
		return "", fmt.Sprintf("no signature of %s found", digest)
	}
	return "", fmt.Sprintf("none of the %d signatures of %s is by a trusted signer: %s", n, digest, strings.Join(errs, "; "))
}

// attested says which attestation of predicate type a.PredicateType,
// signed by which signer, about this digest, satisfies a; or why none does.
func (p *Policy) attested(a api.AttestationRule, hexDigest []byte, ev Evidence) (by, why string) {
	var errs []string
	note := func(format string, args ...any) {
		if len(errs) < 3 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	n := 0
	var signedBy string
	try := func(what string, e sgverify.SignedEntity, typ string) bool {
		if typ != a.PredicateType {
			return false
		}
		n++
		for _, s := range p.signers {
			pol := sgverify.NewPolicy(sgverify.WithArtifactDigest("sha256", hexDigest), s.option())
			r, err := s.v.Verify(e, pol)
			if err != nil {
				note("%s, %s: %v", what, s.name, err)
				continue
			}
			if why := predicateHolds(a, r.Statement); why != "" {
				note("%s: %s", what, why)
				return false
			}
			signedBy = what + " by " + s.name
			return true
		}
		return false
	}
	for i, l := range ev.Attestations {
		e, err := entityOf(l, true)
		if err != nil {
			note("attestation %d: %v", i, err)
			continue
		}
		typ := ""
		if st, err := (&bundle.Envelope{Envelope: e.envelope}).Statement(); err == nil {
			typ = st.GetPredicateType() // not trusted yet: only to pick the rule
		}
		if try(fmt.Sprintf("attestation %d", i), e, typ) {
			return signedBy, ""
		}
	}
	for i, raw := range ev.Bundles {
		b, stmt, err := readBundle(raw)
		if err != nil {
			note("bundle %d: %v", i, err)
			continue
		}
		if stmt == nil {
			continue // a signature
		}
		if try(fmt.Sprintf("bundle %d", i), b, stmt.GetPredicateType()) {
			return signedBy, ""
		}
	}
	if n == 0 {
		why := fmt.Sprintf("no %s attestation of sha256:%x found", a.PredicateType, hexDigest)
		if len(errs) > 0 {
			// What could not be read may have been it.
			why += "; unreadable: " + strings.Join(errs, "; ")
		}
		return "", why
	}
	return "", fmt.Sprintf("none of the %d %s attestations of sha256:%x passes: %s", n, a.PredicateType, hexDigest, strings.Join(errs, "; "))
}

// predicateHolds is "" when the verified statement's predicate says what a
// asks (a builder id, no finding above a severity).
func predicateHolds(a api.AttestationRule, stmt *intoto.Statement) string {
	if stmt == nil {
		return "no statement"
	}
	pred, err := protojson.Marshal(stmt.GetPredicate())
	if err != nil {
		return fmt.Sprintf("predicate: %v", err)
	}
	if a.BuilderID != "" {
		id := ""
		var v1 provv1.Provenance
		if err := unmarshalProto(pred, &v1); err == nil {
			id = v1.GetRunDetails().GetBuilder().GetId()
		}
		if id == "" {
			var v02 provv02.Provenance
			if err := unmarshalProto(pred, &v02); err == nil {
				id = v02.GetBuilder().GetId()
			}
		}
		if id != a.BuilderID {
			return fmt.Sprintf("builder id %q, want %q", id, a.BuilderID)
		}
	}
	if a.MaxSeverity != "" {
		var v vulns.Vulns
		if err := unmarshalProto(pred, &v); err != nil {
			return fmt.Sprintf("not a vulnerability scan: %v", err)
		}
		if v.GetScanner() == nil {
			return "not a vulnerability scan: no scanner"
		}
		max := severityRank(a.MaxSeverity)
		for _, r := range v.GetScanner().GetResult() {
			sev := findingSeverity(r)
			if sev > max {
				return fmt.Sprintf("finding %s is %s, above %s", r.GetId(), severities[sev], a.MaxSeverity)
			}
		}
	}
	return ""
}

// findingSeverity is the highest severity a finding states: a name (low …
// critical) or a CVSS score; critical when none can be read.
func findingSeverity(r *vulns.Result) int {
	best := -1
	for _, s := range r.GetSeverity() {
		score := strings.TrimSpace(s.GetScore())
		rank := severityRank(score)
		if rank < 0 {
			if f, err := strconv.ParseFloat(score, 64); err == nil && f >= 0 && f <= 10 {
				switch {
				case f == 0:
					rank = 0
				case f < 4:
					rank = 1
				case f < 7:
					rank = 2
				case f < 9:
					rank = 3
				default:
					rank = 4
				}
			}
		}
		if rank < 0 {
			rank = len(severities) - 1
		}
		if rank > best {
			best = rank
		}
	}
	if best < 0 {
		best = len(severities) - 1
	}
	return best
}

// byKontinue is "" when a statement Kontinue signed names the value
// (by its digest) among a step's outputs; else why not, and whether the
// statement may yet come (none read names it, none failed to verify).
func (p *Policy) byKontinue(t Target, digest string, ev Evidence) (string, bool) {
	if p.kontinueKey == nil {
		return "the controller has no --attestation-key: it cannot check its own statements", false
	}
	want := strings.TrimPrefix(digest, "sha256:")
	if want == "" {
		want = strings.TrimPrefix(t.ValueDigest, "sha256:")
	}
	bad := 0
	var why string
	for _, env := range ev.Statements {
		stmt, err := attest.Verify(context.Background(), p.kontinueKey, env)
		if err != nil {
			bad++
			why = err.Error()
			continue
		}
		names := false
		for _, s := range stmt.GetSubject() {
			if s.GetDigest()["sha256"] == want {
				names = true
			}
		}
		if !names {
			continue
		}
		// Signed by Kontinue and naming the value: about whom?
		o, err := attest.OwnerOf(stmt)
		if err != nil {
			bad++
			why = fmt.Sprintf("a statement naming sha256:%s names no owner: %v", want, err)
			continue
		}
		for _, pr := range ev.Producers {
			if pr.is(o) {
				return "", false
			}
		}
		bad++
		why = fmt.Sprintf("a statement naming sha256:%s is of %s %s/%s (uid %s), not of %s", want, o.Kind, o.Namespace, o.Name, o.UID, producers(ev.Producers))
	}
	msg := fmt.Sprintf("no statement signed by Kontinue names sha256:%s (%d statements read)", want, len(ev.Statements))
	if bad > 0 {
		msg += fmt.Sprintf("; %d did not verify: %s", bad, why)
	}
	return msg, bad == 0
}

func producers(ps []Producer) string {
	if len(ps) == 0 {
		return "any owner it was read for (none named)"
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return strings.Join(out, " or ")
}

// readBundle parses a Sigstore bundle (sigstore-go) and, when it holds a
// DSSE envelope, its statement (not trusted until verified).
func readBundle(raw []byte) (*bundle.Bundle, *intoto.Statement, error) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(raw); err != nil {
		return nil, nil, err
	}
	env, err := b.Envelope()
	if err != nil || env == nil {
		return &b, nil, nil
	}
	stmt, err := env.Statement()
	if err != nil {
		return &b, nil, nil
	}
	return &b, stmt, nil
}

// option is the sigstore-go policy option saying who must have signed.
func (s signer) option() sgverify.PolicyOption {
	if s.identity != nil {
		return sgverify.WithCertificateIdentity(*s.identity)
	}
	return sgverify.WithKey()
}

func unmarshalProto(b []byte, m proto.Message) error {
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, m)
}
