package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kontinue.dev/kontinue/cli/view"
	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

type historyOptions struct{ output string }

func historyCommand(a *app) *cobra.Command {
	o := &historyOptions{}
	c := &cobra.Command{
		Use:   "history KIND NAME",
		Short: "the last input revisions of a Workload or Deliverable and how each fared at each step",
		Long: `Print, for each of an owner's last input revisions (the source revision, image
or config its chain's first steps published), how each step fared with it:
Succeeded, Failed (with the step's reason), Superseded (replaced by a newer
revision before it ended), Held or Processing (in flight), and how long it
took from when the step took it to when it ended.

The revisions that left the steps' status are read from the owner's history
(the ConfigMap kontinue-history.<kind>.<name> beside it, which the
controller keeps, --history-revisions); the others from the owner's status.
Both are read with your identity.`,
		Example: `  # What the last commits of a workload did.
  kontinue history workload app -n dev

  # As JSON.
  kontinue history workload app -n dev -o json`,
		Args: exactArgs(2, "a kind and a name"),
		RunE: func(c *cobra.Command, args []string) error { return a.runHistory(c.Context(), o, args) },
	}
	c.Flags().StringVarP(&o.output, "output", "o", "", "text (the default) or json")
	return c
}

// HistoryOutput is what `kontinue history -o json` prints.
type HistoryOutput struct {
	Kind  string `json:"kind"` // History
	Owner string `json:"owner"`
	// Steps are the chain's steps, in order: the columns.
	Steps     []string           `json:"steps"`
	Revisions []history.Revision `json:"revisions"`
	Notes     []string           `json:"notes,omitempty"`
}

func (a *app) runHistory(ctx context.Context, o *historyOptions, args []string) error {
	switch o.output {
	case "", "text", "json":
	default:
		return usagef("-o must be text or json")
	}
	k, err := parseOwnerKind(args[0])
	if err != nil {
		return err
	}
	dyn, loaded, err := a.dynamicClient("kontinue-cli")
	if err != nil {
		return err
	}
	ns, name := loaded.Namespace, args[1]
	obj, err := getOwner(ctx, dyn, k, ns, name)
	if err != nil {
		return err
	}
	owner, err := view.DecodeTraceOwner(obj)
	if err != nil {
		return fmt.Errorf("%s %s/%s: unreadable status: %w", k.kind, ns, name, err)
	}
	out := HistoryOutput{Kind: "History", Owner: k.kind + "/" + ns + "/" + name}
	h, err := history.Get(ctx, dyn, k.kind, ns, name)
	switch {
	case apierrors.IsForbidden(err):
		out.Notes = append(out.Notes, fmt.Sprintf("you may not read ConfigMap %s/%s: only the revisions the status shows", ns, history.Name(k.kind, name)))
	case err != nil:
		out.Notes = append(out.Notes, fmt.Sprintf("ConfigMap %s/%s: %v: only the revisions the status shows", ns, history.Name(k.kind, name), err))
	}
	out.Revisions = history.View(h, owner.Status.Resources, 0).Revisions
	out.Steps = historySteps(owner.Status.Resources, out.Revisions)
	if out.Revisions == nil {
		out.Revisions = []history.Revision{}
	}
	if o.output == "json" {
		return writeJSON(a.env.Stdout, out)
	}
	return printHistory(a.env.Stdout, out)
}

// historySteps are the columns: the chain's steps now, then steps a
// revision went through that the chain no longer has.
func historySteps(rs []st.Resource, revs []history.Revision) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rs {
		out, seen[r.Name] = append(out, r.Name), true
	}
	for _, r := range revs {
		for _, c := range r.Steps {
			if !seen[c.Step] {
				out, seen[c.Step] = append(out, c.Step), true
			}
		}
	}
	return out
}

// historyCell is how a step fared with a revision, in a few words.
func historyCell(c *history.Cell) string {
	if c == nil {
		return "-"
	}
	s := c.Outcome
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	if c.Shadowed {
		s += " shadow served"
	}
	if c.TakenAt != nil && c.EndedAt != nil && !c.EndedAt.Before(c.TakenAt) {
		s += " " + c.EndedAt.Sub(c.TakenAt.Time).String()
	}
	return s
}

func printHistory(w io.Writer, h HistoryOutput) error {
	fmt.Fprintln(w, h.Owner)
	t := newTable(append([]string{"REVISION", "SINCE"}, h.Steps...)...)
	var failures []string
	for i := range h.Revisions {
		r := &h.Revisions[i]
		since := "-"
		if r.Since != nil {
			since = r.Since.UTC().Format(time.RFC3339)
		}
		row := []cell{plain(r.Label()), plain(since)}
		for _, s := range h.Steps {
			c := r.Cell(s)
			row = append(row, plain(historyCell(c)))
			if c != nil && c.Message != "" {
				failures = append(failures, fmt.Sprintf("%s [%s] %s: %s", r.Label(), s, c.Reason, c.Message))
			}
		}
		t.add(row...)
	}
	if err := t.write(w, false); err != nil {
		return err
	}
	if len(failures) > 0 {
		fmt.Fprintln(w, "Failures:")
		for _, f := range failures {
			fmt.Fprintln(w, "  "+strings.ReplaceAll(f, "\n", " "))
		}
	}
	if len(h.Notes) > 0 {
		fmt.Fprintln(w, "Notes:")
		for _, n := range h.Notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	return nil
}
