package check

import (
	"context"
	"fmt"

	"kontinue.dev/kontinue/reconciler/verify"
)

// Once fetches the evidence of one request with f and decides it: what
// the Runner's workers do for each decision (without its cache), and what
// `kontinue verify` does (explain: every rule's outcome, verify.Explain,
// rather than stopping at the first that refuses). An error is a fetch
// that failed (a registry, the API server): no decision.
func Once(ctx context.Context, f Fetcher, req Request, explain bool) (verify.Result, []verify.RuleResult, error) {
	refused := func(rule, digest string, err error) (verify.Result, []verify.RuleResult, error) {
		return verify.Result{Outcome: verify.Refused, Rule: rule, Digest: digest, Why: err.Error()},
			[]verify.RuleResult{{Rule: rule, Why: err.Error()}}, nil
	}
	t, err := verify.TargetOf(req.Type, req.Input, req.Value)
	if err != nil {
		return refused(verify.RuleDigest, "", err)
	}
	m, err := f.Material(ctx, verify.Refs(req.Policy))
	if err != nil {
		return verify.Result{}, nil, fmt.Errorf("reading the policy's keys: %w", err)
	}
	p, err := verify.Compile(req.Type, req.Policy, m)
	if err != nil {
		return refused(verify.RulePolicy, t.Digest, err)
	}
	registry := len(req.Policy.Keys)+len(req.Policy.Keyless)+len(req.Policy.Attestations) > 0
	if registry && t.Repository == "" {
		// Decide says why; nothing to fetch from a registry.
		registry = false
	}
	ev, err := f.Evidence(ctx, req, t, registry)
	if err != nil {
		return verify.Result{}, nil, err
	}
	if explain {
		res, rules := verify.Explain(p, t, ev)
		return res, rules, nil
	}
	return verify.Decide(p, t, ev), nil, nil
}
