package owner

// A step takes an input only when it passes the chain's policy
// (spec.resources[].verify; reconciler/verify decides, the Env's Verifier
// fetches off the workers). An input being verified, or refused, is held:
// the step renders with its previous value of it (from its provenance), so
// it keeps the object and outputs it has (a shadow included); its
// ResourceSubmitted says InputVerifying (Unknown) or InputNotVerified
// (False) with the rule, the input and the digest. Without a previous
// value, the step does not render. An input that passes renders pinned to
// the digest that was checked.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/attest"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/prepare"
	"kontinue.dev/kontinue/reconciler/render"
	st "kontinue.dev/kontinue/reconciler/status"
	"kontinue.dev/kontinue/reconciler/step"
	"kontinue.dev/kontinue/reconciler/verify"
	"kontinue.dev/kontinue/reconciler/verify/check"
)

// Verifier decides about inputs (check.Runner): Check never blocks; Wait
// may, a moment, for a decision being fetched; Prefetch has a value
// fetched that the walk will ask about later, without waking the owner.
type Verifier interface {
	Check(check.Request) check.Decision
	Wait(context.Context, check.Request) check.Decision
	Prefetch(check.Request)
}

// Reasons of a step whose input is verified (ResourceSubmitted).
const (
	ReasonInputNotVerified = "InputNotVerified"
	ReasonInputVerifying   = "InputVerifying"
)

// inputCheck is what the walk needs to check inputs: who asks, as whom,
// and what each step decided this reconcile.
type inputCheck struct {
	v         Verifier
	owner     check.Owner
	account   api.ServiceAccountRef
	producers []verify.Producer
	onRefused func(chain, step, rule string)
	chain     []api.Step // the chain's steps (prefetch)
	byStep    map[string]*checked
	// until, when set: an input was first asked about just now and is
	// being fetched; the owner may wait until then for it before its
	// status says so (the soonest of the inputs'; it is woken then, or
	// when the decision is in: check.Decision.GraceUntil).
	until time.Time
}

// checked is one step's verification this reconcile.
type checked struct {
	records []st.InputVerification
	hold    *metav1.Condition // the held inputs' condition (nil: none held)
	recheck time.Duration
}

// checkInputs gives the walk its input check when the Env has a verifier.
func checkInputs(env *Env, l *loaded, s *steps) {
	if env.Verify == nil || !anyPolicy(l.defs.spec) {
		return
	}
	f := env.Flavor
	ns := l.owner.GetNamespace()
	producers := []verify.Producer{{Kind: f.OwnerKind, Namespace: ns, Name: l.owner.GetName(), UID: string(l.owner.GetUID())}}
	if up := attest.UpstreamOf(l.owner); up != nil {
		producers = append(producers, verify.Producer{Kind: up.Kind, Namespace: ns, Name: up.Name, UID: up.UID})
	}
	s.verify = &inputCheck{v: env.Verify, owner: check.Owner{Kind: f.OwnerKind, Namespace: ns, Name: l.owner.GetName()},
		account: l.account(), producers: producers, onRefused: env.InputRefused, chain: l.defs.spec.Resources, byStep: map[string]*checked{}}
	s.prepare.Verify = s.verifyInputs
}

func anyPolicy(spec *api.ChainSpec) bool {
	if spec == nil {
		return false
	}
	for _, s := range spec.Resources {
		if s.Verify != nil {
			return true
		}
	}
	return false
}

// verifyInputs is prepare's Verify: each input a policy names is checked;
// one that passes is pinned, one that does not is held.
func (s *steps) verifyInputs(def api.Step, in render.Inputs) (render.Inputs, *prepare.Refusal) {
	c := &checked{}
	s.verify.byStep[def.Name] = c
	if err := verify.Validate(def); err != nil {
		// Fail closed: a policy that cannot be used takes nothing.
		cond := st.Cond(st.ResourceSubmitted, st.False, ReasonInputNotVerified, "rule [policy]: "+err.Error())
		c.hold = &cond
		return s.holdAll(def, in, c, &prepare.Refusal{Reason: ReasonInputNotVerified, Message: cond.Message})
	}
	out := copyInputs(in)
	prev := s.prevStep(def.Name)
	var refused, pending []string
	for _, n := range orderedPolicies(def) {
		value, ok := inputValue(in, n.Type, n.Policy.Name)
		if !ok {
			continue // not there yet: prepare waited for it already
		}
		d := s.verify.v.Wait(s.ctx, check.Request{Owner: s.verify.owner, Account: s.verify.account, Type: n.Type, Input: n.Policy.Name,
			Value: value, Policy: n.Policy, Producers: s.verify.producers})
		rec := st.InputVerification{Type: n.Type, Name: n.Policy.Name, Digest: d.Digest, Rule: d.Rule, Message: cut(d.Why)}
		if d.Recheck > 0 && (c.recheck == 0 || d.Recheck < c.recheck) {
			c.recheck = d.Recheck
		}
		if d.Outcome == verify.Unknown && !d.GraceUntil.IsZero() && (s.verify.until.IsZero() || d.GraceUntil.Before(s.verify.until)) {
			s.verify.until = d.GraceUntil
		}
		switch d.Outcome {
		case verify.Verified:
			rec.Result = "Verified"
			if n.Type == verify.TypeImage {
				if t, err := verify.TargetOf(n.Type, n.Policy.Name, value); err == nil {
					out.Images[n.Policy.Name] = t.Pinned(d.Digest)
				}
			}
		default:
			rec.Result = "Verifying"
			what := fmt.Sprintf("%s [%s] %s: %s", n.Type, n.Policy.Name, orNone(d.Digest), d.Why)
			if d.Outcome == verify.Refused {
				rec.Result = "Refused"
				what = fmt.Sprintf("%s [%s] %s refused by rule [%s]: %s", n.Type, n.Policy.Name, orNone(d.Digest), d.Rule, d.Why)
				refused = append(refused, what)
				s.refusedEvent(def, prev, rec)
			} else {
				pending = append(pending, what)
			}
			rec.Held = holdInput(&out, prev, n.Type, n.Policy.Name)
		}
		c.records = append(c.records, rec)
	}
	if len(refused)+len(pending) == 0 {
		return out, nil
	}
	cond := st.Cond(st.ResourceSubmitted, st.Unknown, ReasonInputVerifying, "verifying "+strings.Join(pending, "; "))
	if len(refused) > 0 {
		cond = st.Cond(st.ResourceSubmitted, st.False, ReasonInputNotVerified, strings.Join(append(refused, pending...), "; "))
	}
	c.hold = &cond
	for _, r := range c.records {
		if r.Result != "Verified" && !r.Held {
			// Nothing to hold on to: the step does not render.
			return out, &prepare.Refusal{Reason: cond.Reason, Message: cond.Message, Pending: cond.Status == st.Unknown}
		}
	}
	return out, nil
}

// prefetch asks, before a step's object is applied, about the outputs it
// will very likely publish (its output paths read on the object as
// rendered: a ConfigMap's data, a spec field; an output read from a
// status is not there yet and is not asked about), for every later step
// whose policy checks them: the evidence is fetched beside the apply,
// not after it, and the later step mostly finds its decision made. A
// value the applied object does not publish costs one fetch, cached.
func (s *steps) prefetch(def api.Step, kind string, spec *api.TemplateSpec, obj *unstructured.Unstructured) {
	if s.verify == nil || spec == nil || obj == nil {
		return
	}
	var out step.Outputs
	for _, later := range s.verify.chain {
		if later.Verify == nil {
			continue
		}
		for _, n := range orderedPolicies(later) {
			if !readsFrom(later, n, def.Name) {
				continue
			}
			if out == nil {
				doc, err := obj.MarshalJSON()
				if err != nil {
					return
				}
				if out, err = step.ReadOutputs(kind, spec, doc, nil); err != nil {
					return
				}
			}
			var value any
			switch n.Type {
			case verify.TypeImage:
				value = out["image"]
			case verify.TypeSource:
				url, _ := out["url"].(string)
				rev, _ := out["revision"].(string)
				if url != "" {
					value = verify.Source{URL: url, Revision: rev}
				}
			}
			if value == nil || value == "" {
				continue
			}
			s.verify.v.Prefetch(check.Request{Owner: s.verify.owner, Account: s.verify.account, Type: n.Type, Input: n.Policy.Name,
				Value: value, Policy: n.Policy, Producers: s.verify.producers})
		}
	}
}

// readsFrom: step later's input n (an image or source policy's) is the
// output of step from.
func readsFrom(later api.Step, n verify.Named, from string) bool {
	var ins []api.StepInput
	switch n.Type {
	case verify.TypeImage:
		ins = later.Images
	case verify.TypeSource:
		ins = later.Sources
	}
	for _, i := range ins {
		if i.Name == n.Policy.Name && i.Resource == from {
			return true
		}
	}
	return false
}

// holdAll holds every input a policy names (a policy that cannot be used).
func (s *steps) holdAll(def api.Step, in render.Inputs, c *checked, r *prepare.Refusal) (render.Inputs, *prepare.Refusal) {
	out := copyInputs(in)
	prev := s.prevStep(def.Name)
	all := true
	for _, n := range orderedPolicies(def) {
		held := holdInput(&out, prev, n.Type, n.Policy.Name)
		all = all && held
		rec := st.InputVerification{Type: n.Type, Name: n.Policy.Name, Result: "Refused", Rule: verify.RulePolicy, Message: cut(strings.TrimPrefix(r.Message, "rule [policy]: ")), Held: held}
		s.refusedEvent(def, prev, rec)
		c.records = append(c.records, rec)
	}
	if !all {
		return out, r
	}
	return out, nil
}

// verified is called as the step's status is built: it records the
// inputs' verification and, when an input is held, replaces a True
// ResourceSubmitted with why.
func (s *steps) verified(sc *stepCtx, submitted metav1.Condition) (metav1.Condition, time.Duration) {
	if s.verify == nil {
		return submitted, 0
	}
	c := s.verify.byStep[sc.step.Name]
	if c == nil {
		return submitted, 0
	}
	sc.res.Verification = c.records
	if c.hold != nil && (submitted.Status == st.True || submitted.Reason == c.hold.Reason) {
		submitted = *c.hold
	}
	return submitted, c.recheck
}

// refusedEvent: a Warning event and the metric for a refusal the step's
// previous status did not show (a new digest, or a new rule).
func (s *steps) refusedEvent(def api.Step, prev *st.Resource, rec st.InputVerification) {
	if prev != nil {
		for _, p := range prev.Verification {
			if p.Type == rec.Type && p.Name == rec.Name && p.Result == "Refused" && p.Digest == rec.Digest && p.Rule == rec.Rule {
				return
			}
		}
	}
	s.events.Event(s.owner, corev1.EventTypeWarning, ReasonInputNotVerified, "step [%s]: %s [%s] %s refused by rule [%s]: %s",
		def.Name, rec.Type, rec.Name, orNone(rec.Digest), rec.Rule, rec.Message)
	if s.verify.onRefused != nil {
		s.verify.onRefused(s.chainName, def.Name, strings.SplitN(rec.Rule, " ", 2)[0])
	}
}

// orderedPolicies are a step's policies in the step's input order.
func orderedPolicies(def api.Step) []verify.Named {
	ps := verify.Policies(def.Verify)
	var out []verify.Named
	add := func(typ, name string) {
		if n, ok := ps[typ+"/"+name]; ok {
			out = append(out, n)
		}
	}
	for _, i := range def.Sources {
		add(verify.TypeSource, i.Name)
	}
	for _, i := range def.Images {
		add(verify.TypeImage, i.Name)
	}
	for _, i := range def.Configs {
		add(verify.TypeConfig, i.Name)
	}
	if def.Deployment != nil {
		add(verify.TypeDeployment, verify.TypeDeployment)
	}
	return out
}

func inputValue(in render.Inputs, typ, name string) (any, bool) {
	switch typ {
	case verify.TypeImage:
		v, ok := in.Images[name]
		return v, ok
	case verify.TypeSource:
		s, ok := in.Sources[name]
		return verify.Source{URL: s.URL, Revision: s.Revision}, ok
	case verify.TypeConfig:
		v, ok := in.Configs[name]
		return v, ok
	case verify.TypeDeployment:
		if in.Deployment == nil {
			return nil, false
		}
		return verify.Source{URL: in.Deployment.URL, Revision: in.Deployment.Revision}, true
	}
	return nil, false
}

// holdInput replaces an input with the step's previous value of it (the
// input set its object has: latest, else current); false when there is
// none to hold (a first value, a config, whose value the status does not
// keep, or one cut to fit the status).
func holdInput(in *render.Inputs, prev *st.Resource, typ, name string) bool {
	if prev == nil || prev.Provenance == nil {
		return false
	}
	set := prev.Provenance.Latest
	if set == nil {
		set = prev.Provenance.Current
	}
	if set == nil {
		return false
	}
	whole := func(vs ...string) bool {
		for _, v := range vs {
			if strings.HasSuffix(v, st.TruncatedMarker) {
				return false
			}
		}
		return true
	}
	switch typ {
	case verify.TypeImage:
		for _, i := range set.Images {
			if i.Name == name && i.Image != "" && whole(i.Image) {
				in.Images[name] = i.Image
				return true
			}
		}
	case verify.TypeSource:
		for _, i := range set.Sources {
			if i.Name == name && whole(i.URL, i.Revision) {
				in.Sources[name] = render.Source{URL: i.URL, Revision: i.Revision}
				return true
			}
		}
	case verify.TypeDeployment:
		if d := set.Deployment; d != nil && whole(d.URL, d.Revision) {
			in.Deployment = &render.Source{URL: d.URL, Revision: d.Revision}
			return true
		}
	}
	return false
}

func copyInputs(in render.Inputs) render.Inputs {
	out := in
	out.Images, out.Sources, out.Configs = map[string]any{}, map[string]render.Source{}, map[string]any{}
	for k, v := range in.Images {
		out.Images[k] = v
	}
	for k, v := range in.Sources {
		out.Sources[k] = v
	}
	for k, v := range in.Configs {
		out.Configs[k] = v
	}
	if in.Deployment != nil {
		d := *in.Deployment
		out.Deployment = &d
	}
	return out
}

func orNone(d string) string {
	if d == "" {
		return "(no digest)"
	}
	return d
}

func cut(s string) string {
	if len(s) <= 512 {
		return s
	}
	return s[:509] + "..."
}
