package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	good  = "sha256:" + "11111111111111111111111111111111111111111111111111111111111111aa"
	good2 = "sha256:" + "22222222222222222222222222222222222222222222222222222222222222bb"
	nosig = "sha256:" + "33333333333333333333333333333333333333333333333333333333333333cc"
	other = "sha256:" + "44444444444444444444444444444444444444444444444444444444444444dd"
)

var verifyRule = VerifyRule{Template: "tmpl-vdeploy", Step: "vdeploy", Path: "data.image",
	Digests: map[string]string{good: DigestSigned, good2: DigestSigned, nosig: DigestUnsigned, other: DigestOtherKey}}

// vdeploy is the verified step's ConfigMap holding image.
func vdeploy(uid, image string) obj {
	return object("ConfigMap", "t1", "app-vdeploy", uid, stamped("vdeploy", LabelTemplate, "tmpl-vdeploy"),
		with("data", map[string]any{"image": image}))
}

func TestVerifiedInputsWrites(t *testing.T) {
	const repo = "127.0.0.1:5000/rb1-1/t1/app"
	b := newBuilder()
	b.write(1, "create", kontinue, sa, "configmaps", 201, vdeploy("v1", repo+"@"+good))
	b.write(2, "patch", kontinue, sa, "configmaps", 200, vdeploy("v1", repo+"@"+good2))
	// A person may write anything; a write refused wrote nothing; another
	// template's object is not the step's.
	b.write(3, "update", "person-t1", "", "configmaps", 200, vdeploy("v1", repo+":unsigned"))
	b.write(4, "patch", kontinue, sa, "configmaps", 500, nil)
	b.write(5, "create", kontinue, sa, "configmaps", 201,
		object("ConfigMap", "t1", "app-vimg", "v2", stamped("vimg"), with("data", map[string]any{"image": repo + ":unsigned"})))
	assert.Empty(t, VerifiedInputs(b.h, nil, verifyRule, nil))

	for _, c := range []struct{ image, want string }{
		{repo + ":signed", "a bare tag"},
		{repo + "@" + nosig, "pinned to a digest unsigned"},
		{repo + "@" + other, "pinned to a digest signed by another key only"},
		{repo + "@sha256:" + "55555555555555555555555555555555555555555555555555555555555555ee", "not one the test pushed"},
	} {
		b := newBuilder()
		b.write(1, "create", kontinue, sa, "configmaps", 201, vdeploy("v1", repo+"@"+good))
		b.write(2, "patch", kontinue, sa, "configmaps", 200, vdeploy("v1", c.image))
		vs := VerifiedInputs(b.h, nil, verifyRule, nil)
		require.Len(t, vs, 1, c.image)
		assert.Equal(t, 9, vs[0].Invariant)
		assert.Contains(t, vs[0].Message, c.want)
		assert.Contains(t, vs[0].Message, "Kontinue's patch")
		assert.Equal(t, at(2), vs[0].At)
	}
	// No image at all (a template that stamped nothing there).
	b = newBuilder()
	b.write(1, "create", kontinue, sa, "configmaps", 201,
		object("ConfigMap", "t1", "app-vdeploy", "v1", stamped("vdeploy", LabelTemplate, "tmpl-vdeploy")))
	vs := VerifiedInputs(b.h, nil, verifyRule, nil)
	require.Len(t, vs, 1)
	assert.Contains(t, vs[0].Message, "no image at data.image")
}

func TestVerifiedInputsStatus(t *testing.T) {
	const repo = "127.0.0.1:5000/rb1-1/t1/app"
	rec := func(result, digest string, held bool) map[string]any {
		return map[string]any{"type": "image", "name": "app", "result": result, "digest": digest, "held": held, "rule": "signature"}
	}
	entry := func(status, reason string, recs ...any) map[string]any {
		return map[string]any{"name": "vdeploy", "stampedRef": ref("ConfigMap", "app-vdeploy", "configmaps"), "verification": recs,
			"conditions": []any{map[string]any{"type": "ResourceSubmitted", "status": status, "reason": reason}}}
	}
	b := newBuilder()
	b.write(1, "create", kontinue, sa, "configmaps", 201, vdeploy("v1", repo+"@"+good))
	judge := func(step map[string]any, image string) []Violation {
		return VerifiedInputs(b.h, snap(workload([]any{step}), vdeploy("v1", image)), verifyRule, nil)
	}
	// Truthful: verified and in; an unsigned or wrong-key image refused and
	// held, the object keeping the last good one; a registry that does not
	// answer: verifying; a held input after a stamp that failed (RBAC): a
	// False of its own.
	assert.Empty(t, judge(entry("True", "Applied", rec("Verified", good, false)), repo+"@"+good))
	assert.Empty(t, judge(entry("False", "InputNotVerified", rec("Refused", nosig, true)), repo+"@"+good))
	assert.Empty(t, judge(entry("False", "InputNotVerified", rec("Refused", other, true)), repo+"@"+good))
	assert.Empty(t, judge(entry("Unknown", "InputVerifying", rec("Verifying", "", true)), repo+"@"+good))
	assert.Empty(t, judge(entry("False", "TemplateStampFailure", rec("Refused", nosig, true)), repo+"@"+good))

	for _, c := range []struct {
		name  string
		step  map[string]any
		image string
		want  string
	}{
		{"verified unsigned", entry("True", "Applied", rec("Verified", nosig, false)), repo + "@" + good, "says " + nosig + " Verified, a digest unsigned"},
		{"refused signed", entry("False", "InputNotVerified", rec("Refused", good2, true)), repo + "@" + good, "says " + good2 + " Refused"},
		{"held yet True", entry("True", "Applied", rec("Refused", nosig, true)), repo + "@" + good, "ResourceSubmitted True while an input is not verified"},
		{"verifying yet True", entry("True", "Applied", rec("Verifying", "", true)), repo + "@" + good, "ResourceSubmitted True while an input is not verified"},
		{"no record", entry("False", "InputNotVerified"), repo + "@" + good, "says InputNotVerified, but no record says so"},
		{"object behind", entry("True", "Applied", rec("Verified", good2, false)), repo + "@" + good, "with " + good2 + " verified, but its object holds"},
		{"object unsigned", entry("False", "InputNotVerified", rec("Refused", nosig, true)), repo + "@" + nosig, "at the end: image"},
	} {
		vs := judge(c.step, c.image)
		require.Len(t, vs, 1, "%s: %v", c.name, vs)
		assert.Contains(t, vs[0].Message, c.want, c.name)
	}

	// Not walked for the owner's generation, or no chain selects it: the
	// entry is the last walk's, not judged.
	old := entry("True", "Applied", rec("Refused", nosig, true))
	old["conditions"].([]any)[0].(map[string]any)["observedGeneration"] = 1
	assert.Empty(t, judge(old, repo+"@"+good))
	unselected := workload([]any{entry("True", "Applied", rec("Refused", nosig, true))})
	unselected["status"].(map[string]any)["conditions"] = []any{map[string]any{"type": "Ready", "status": "False", "reason": "SupplyChainNotFound"}}
	assert.Empty(t, VerifiedInputs(b.h, snap(unselected, vdeploy("v1", repo+"@"+good)), verifyRule, nil))
}
