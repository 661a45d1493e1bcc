package attest

import (
	"fmt"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/tidwall/gjson"
)

// Compare says whether signed (from a verified envelope) states what now
// (built from the owner's status as it is) does: the same owner and step,
// the same input set, subjects and dependencies. A good signature on
// another statement proves only that the controller once signed it: an
// envelope copied from another step or owner, or an older one put back by
// whoever may write the ConfigMap, is refused here. Builder versions and
// times are not compared: the controller that signed may be older than the
// CLI that reads.
func Compare(signed, now *intoto.Statement) error {
	a, err := Marshal(signed)
	if err != nil {
		return err
	}
	b, err := Marshal(now)
	if err != nil {
		return err
	}
	sj, nj := gjson.ParseBytes(a), gjson.ParseBytes(b)
	const ext = "predicate.buildDefinition.externalParameters"
	who := func(j gjson.Result) string {
		o := j.Get(ext + ".owner")
		return fmt.Sprintf("%s %s/%s step [%s]", o.Get("kind"), o.Get("namespace"), o.Get("name"), j.Get(ext+".step"))
	}
	if who(sj) != who(nj) {
		return fmt.Errorf("the signed statement is about %s, not %s", who(sj), who(nj))
	}
	if u, v := sj.Get(ext+".owner.uid").String(), nj.Get(ext+".owner.uid").String(); u != v {
		return fmt.Errorf("the signed statement is about an owner of that name with uid %s, deleted since (this one is %s)", u, v)
	}
	const in = "predicate.buildDefinition.internalParameters.inputDigest"
	if s, n := sj.Get(in).String(), nj.Get(in).String(); s != n {
		return fmt.Errorf("the signed statement is about input set %s; the step's current set is %s: not signed yet, or an older statement", s, n)
	}
	for _, path := range []string{"subject", "predicate.buildDefinition.resolvedDependencies", ext, "predicate.buildDefinition.buildType", "predicateType"} {
		if s, n := sj.Get(path).Raw, nj.Get(path).Raw; s != n {
			return fmt.Errorf("%s differs from what the status records:\n  signed: %s\n  status: %s", path, s, n)
		}
	}
	return nil
}
