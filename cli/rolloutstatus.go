package cli

// `kontinue rollout status`: the chain's status.rollout and RolledOut
// condition, and each wave with its owners, placed and counted by the
// dashboard's code (cli/view: view.Count with the controller's own
// rollout.Compiled.Admitted), from the owners the caller may list.

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/rollout"
)

// RolloutStatus is `kontinue rollout status -o json`.
type RolloutStatus struct {
	Kind      string            `json:"kind"`
	Name      string            `json:"name"`
	Paused    bool              `json:"paused"`
	Rollout   rollout.Status    `json:"rollout"`
	Condition *metav1.Condition `json:"condition,omitempty"`
	// Plan is each wave of the policy (the implied last one included);
	// during a roll-out each with its owners (view.RolloutWave).
	Plan []view.RolloutWave `json:"plan,omitempty"`
	// OwnersError says why the waves have no owners: the caller may not
	// list them.
	OwnersError string `json:"ownersError,omitempty"`
}

// rolloutReport is what `rollout status` shows of chain (of flavor f, its
// roll-out st) and owners (every owner the caller could list; listErr why
// it could not).
func rolloutReport(f *api.Flavor, chain *unstructured.Unstructured, st *rollout.Status, owners []*unstructured.Unstructured, listErr error) RolloutStatus {
	s := *st
	s.Revisions = nil // definitions: `kubectl get -o yaml` shows them
	out := RolloutStatus{Kind: f.ChainKind, Name: chain.GetName(), Paused: chain.GetAnnotations()[rollout.AnnotationPaused] == "true", Rollout: s}
	if c := rolledOut(chain); c != nil {
		var cond metav1.Condition
		if b, err := json.Marshal(c); err == nil && json.Unmarshal(b, &cond) == nil {
			out.Condition = &cond
		}
	}
	views := make([]view.Owner, 0, len(owners))
	for _, o := range owners {
		views = append(views, view.Build(o, nil))
	}
	chains := []view.Chain{view.BuildChain(chain)}
	view.Count(chains, views)
	if r := chains[0].Rollout; r != nil {
		out.Plan = r.Plan
	}
	if listErr != nil {
		out.OwnersError = listErr.Error()
	}
	return out
}

// rolledOut is the chain's RolledOut condition, or nil.
func rolledOut(chain *unstructured.Unstructured) map[string]any {
	conds, _, _ := unstructured.NestedSlice(chain.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == rollout.ConditionRolledOut {
			return m
		}
	}
	return nil
}

func (a *app) rolloutStatus(out RolloutStatus, output string) error {
	if output == "json" {
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(a.env.Stdout, string(b))
	} else {
		printRolloutStatus(a.env.Stdout, out)
	}
	if out.Rollout.Phase == rollout.PhaseHalted {
		return fmt.Errorf("the roll-out of %s %s is halted", out.Kind, out.Name)
	}
	return nil
}

// printRolloutStatus writes the text of `rollout status`.
func printRolloutStatus(w io.Writer, out RolloutStatus) {
	s := out.Rollout
	phase := s.Phase
	if phase == "" {
		phase = "Unknown (not yet looked at by the controller)"
	}
	fmt.Fprintf(w, "%s %s: %s\n", out.Kind, out.Name, phase)
	fmt.Fprintf(w, "  stable revision:  %s\n", orNone(s.Stable))
	if s.Target != "" {
		fmt.Fprintf(w, "  target revision:  %s\n", s.Target)
		fmt.Fprintf(w, "  wave:             %d of %d\n", s.Wave+1, s.Waves)
		fmt.Fprintf(w, "  admitted owners:  %d (%d Ready on the target), of %d\n", s.Admitted, s.Updated, s.Owners)
	} else {
		fmt.Fprintf(w, "  owners:           %d\n", s.Owners)
	}
	if s.Previous != "" {
		fmt.Fprintf(w, "  previous:         %s (undo restores it)\n", s.Previous)
	}
	if out.Paused {
		fmt.Fprintf(w, "  paused:           yes (kontinue rollout resume %s)\n", out.Name)
	}
	if len(s.Failing) > 0 {
		fmt.Fprintf(w, "  failed owners:    %s\n", strings.Join(s.Failing, ", "))
	}
	if s.PassedOverCount > 0 {
		names := make([]string, 0, len(s.PassedOver))
		for _, p := range s.PassedOver {
			names = append(names, p.Owner+" ("+p.Reason+")")
		}
		if more := s.PassedOverCount - len(s.PassedOver); more > 0 {
			names = append(names, fmt.Sprintf("and %d more", more))
		}
		fmt.Fprintf(w, "  passed over:      %d, which nothing moves to the target now: %s\n", s.PassedOverCount, strings.Join(names, ", "))
	}
	if c := out.Condition; c != nil {
		fmt.Fprintf(w, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	printWaves(w, out)
}

// printWaves lists the waves; during a roll-out each with its place
// (done, current, waiting), its tally and its owners, failed first.
func printWaves(w io.Writer, out RolloutStatus) {
	if len(out.Plan) == 0 {
		return
	}
	rules := make([]string, len(out.Plan))
	width := 0
	for i, wv := range out.Plan {
		rules[i] = wv.Rule
		if wv.Implied {
			rules[i] += " (implied)"
		}
		width = max(width, len(rules[i]))
	}
	s := out.Rollout
	if s.Target == "" {
		fmt.Fprintf(w, "  waves:            %s\n", strings.Join(rules, ", "))
		return
	}
	fmt.Fprintln(w, "  waves:")
	for i, wv := range out.Plan {
		place := "waiting"
		switch {
		case i < s.Wave:
			place = "done"
		case i == s.Wave:
			place = "current"
		}
		tally := fmt.Sprintf("%d owner(s)", wv.Owners)
		if wv.Reached {
			tally += fmt.Sprintf(": %d Ready on the target, %d failed", wv.Updated, wv.Failing)
			if wv.PassedOver > 0 {
				tally += fmt.Sprintf(", %d passed over", wv.PassedOver)
			}
		}
		fmt.Fprintf(w, "    %d  %-*s  %-7s  %s\n", i+1, width, rules[i], place, tally)
		for _, m := range wv.Members {
			why := ""
			switch m.State {
			case view.WaveUnserved:
				why = "  (no running replica serves its shard: not waited for)"
			case view.WaveDeleting:
				why = "  (being deleted: not waited for)"
			case view.WaveDetached:
				why = "  (" + m.Reason + ": no chain renders it: not waited for)"
			}
			fmt.Fprintf(w, "         %-8s  %s/%s%s\n", m.State, m.Namespace, m.Name, why)
		}
		if more := wv.Owners - len(wv.Members); more > 0 {
			fmt.Fprintf(w, "         ... and %d more\n", more)
		}
	}
	if out.OwnersError != "" {
		fmt.Fprintf(w, "  (no owners shown: %s)\n", out.OwnersError)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
