package check

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// What the test made each digest of its registry (VerifyRule.Digests).
const (
	DigestSigned   = "signed by the policy's key"
	DigestUnsigned = "unsigned"
	DigestOtherKey = "signed by another key only"
)

// VerifyRule names a step whose image input a chain's `verify:` policy
// checks (a signature by a key the test holds), and what the test knows
// of its registry: what it made each digest.
type VerifyRule struct {
	Template string // the step's template (carto.run/cluster-template-name)
	Step     string // the step's name in its chain
	Path     string // gjson path of the image in the object the step stamps
	// Digests: digest → DigestSigned, DigestUnsigned or DigestOtherKey.
	Digests map[string]string
}

// judge says what is wrong with an image value the step rendered ("" if
// nothing): it must be pinned to a digest the policy's key signed.
func (r VerifyRule) judge(v gjson.Result) string {
	if !v.Exists() {
		return fmt.Sprintf("no image at %s", r.Path)
	}
	ref := v.String()
	_, digest, pinned := strings.Cut(ref, "@")
	if !pinned {
		return fmt.Sprintf("image %s is a bare tag, not pinned to the digest checked", clip(ref))
	}
	if what := r.Digests[digest]; what != DigestSigned {
		if what == "" {
			what = "not one the test pushed"
		}
		return fmt.Sprintf("image %s is pinned to a digest %s", clip(ref), what)
	}
	return ""
}

// VerifiedInputs is invariant 9 (issue 49, verify before use):
//   - (a) every object Kontinue writes (creates, updates, patches) with the
//     rule's template carries, at the rule's path, an image pinned to a
//     digest the policy's key signed: never a bare tag, an unsigned
//     digest or one another key signed; so too the step's object at the
//     end;
//   - (b) at the end, for every owner a replica serves whose status
//     describes its generation and whose step was walked for it: each
//     verification record that says Verified names a digest the key
//     signed, and each that says Refused one it did not; a step with an
//     input not Verified (held, refused or still verifying) does not say
//     ResourceSubmitted True, and one that says InputNotVerified
//     (InputVerifying) has a Refused (Verifying) record; a step that says
//     True holds, on its object, the digest its record verified.
func VerifiedInputs(h *History, final *Snapshot, rule VerifyRule, served Served) []Violation {
	var vs []Violation
	bad := func(at Key, msg string, a ...any) {
		vs = append(vs, Violation{Invariant: 9, Check: "verified inputs", At: final.At, Object: at.String(), Message: fmt.Sprintf(msg, a...)})
	}
	for _, e := range h.Events {
		if !h.ByKontinue(e) || !e.OK() || e.Subresource != "" || e.Obj == nil || e.Verb == "delete" || e.Verb == "deletecollection" {
			continue
		}
		if e.Obj.Labels[LabelTemplate] != rule.Template {
			continue
		}
		if why := rule.judge(gjson.GetBytes(e.Response, rule.Path)); why != "" {
			vs = append(vs, Violation{Invariant: 9, Check: "verified inputs", At: e.Time, Object: e.Key().String(),
				Message: fmt.Sprintf("Kontinue's %s (for %s): %s", e.Verb, RoleOf(e.Obj), why)})
		}
	}
	if final == nil {
		return vs
	}
	mine := createdByKontinue(h)
	for _, k := range final.Keys() {
		m := MetaOf(final.Objects[k])
		if m == nil || !mine[m.UID] || m.Labels[LabelTemplate] != rule.Template {
			continue
		}
		if why := rule.judge(gjson.GetBytes(final.Objects[k], rule.Path)); why != "" {
			bad(k, "at the end: %s", why)
		}
	}
	for _, o := range final.Owners() {
		if !o.served(served) || o.Meta.Deleting || !o.Settled() {
			continue
		}
		conds := gjson.GetBytes(o.JSON, "status.conditions")
		if unwalked[condition(conds, "Ready").Get("reason").String()] ||
			condition(conds, "ResourcesSubmitted").Get("reason").String() == "ServiceAccountError" {
			continue // nothing walked: the steps keep the last walk's entries
		}
		st := o.Step(rule.Step)
		if !st.Exists() {
			continue
		}
		submitted := condition(st.Get("conditions"), "ResourceSubmitted")
		if og := submitted.Get("observedGeneration"); og.Exists() && og.Int() != o.Meta.Generation {
			continue // not walked for this generation
		}
		results := map[string]bool{}
		verified := ""
		st.Get("verification").ForEach(func(_, rec gjson.Result) bool {
			res, d := rec.Get("result").String(), rec.Get("digest").String()
			results[res] = true
			what := rule.Digests[d]
			switch {
			case res == "Verified" && what != DigestSigned:
				bad(o.Key, "step %s says %s Verified, a digest %s", rule.Step, d, orUnknown(what))
			case res == "Verified":
				verified = d
			case res == "Refused" && what == DigestSigned:
				bad(o.Key, "step %s says %s Refused (%s), a digest %s", rule.Step, d, clip(rec.Get("message").String()), what)
			}
			return true
		})
		status, reason := submitted.Get("status").String(), submitted.Get("reason").String()
		if status == "True" && (results["Refused"] || results["Verifying"]) {
			bad(o.Key, "step %s says ResourceSubmitted True while an input is not verified: %s", rule.Step, clip(st.Get("verification").Raw))
		}
		if reason == "InputNotVerified" && !results["Refused"] || reason == "InputVerifying" && !results["Verifying"] {
			bad(o.Key, "step %s says %s, but no record says so: %s", rule.Step, reason, clip(st.Get("verification").Raw))
		}
		if status != "True" || verified == "" {
			continue
		}
		obj := final.Objects[KeyOfRef(st.Get("stampedRef"))]
		if obj == nil {
			continue // invariant 8 judges a stampedRef that is not there
		}
		if got := gjson.GetBytes(obj, rule.Path).String(); !strings.HasSuffix(got, "@"+verified) {
			bad(o.Key, "step %s says ResourceSubmitted True with %s verified, but its object holds %s", rule.Step, verified, clip(got))
		}
	}
	return vs
}

func orUnknown(what string) string {
	if what == "" {
		return "the test did not push"
	}
	return what
}
