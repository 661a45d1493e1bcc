package cli

import (
	"fmt"
	"io"
	"strings"

	"kontinue.dev/kontinue/cli/view"
	st "kontinue.dev/kontinue/reconciler/status"
)

// ANSI colours, used only when stdout is a terminal (or --color=always).
const (
	cReset  = "\x1b[0m"
	cBold   = "\x1b[1m"
	cDim    = "\x1b[2m"
	cRed    = "\x1b[31m"
	cGreen  = "\x1b[32m"
	cYellow = "\x1b[33m"
	cCyan   = "\x1b[36m"
)

func paint(on bool, code, s string) string {
	if !on || code == "" || s == "" {
		return s
	}
	return code + s + cReset
}

func statusColor(status string) string {
	switch status {
	case "True", view.HealthHealthy:
		return cGreen
	case "False", view.HealthUnhealthy, "Deleted":
		return cRed
	}
	return cYellow
}

func mark(status string) string {
	switch status {
	case "True":
		return "✓"
	case "False":
		return "✗"
	}
	return "…"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine flattens s and cuts it to n runes (0: no cut).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); n > 0 && len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func short(digest string) string {
	d := strings.TrimPrefix(digest, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}

// printTree prints one owner:
//
//	Workload dev/app   Ready: False (MissingValueAtPath)   ClusterSupplyChain source-to-url
//	├─ ✓ source-provider
//	│    template  ClusterSourceTemplate git
//	│    stamped   GitRepository dev/app
//	│    health    Healthy (OutputsAvailable)
//	│    outputs   url: https://...
//	└─ … image-builder   Unknown MissingValueAtPath: step [image-builder] waits for ...
//	Conditions
//	  ...
func printTree(w io.Writer, v view.Owner, color bool) {
	var b strings.Builder
	p := func(code, s string) string { return paint(color, code, s) }
	chain := p(cDim, "no chain chosen")
	if v.Chain != nil {
		chain = v.Chain.Kind + " " + v.Chain.Name
	}
	fmt.Fprintf(&b, "%s %s   Ready: %s", v.OwnerKind, p(cBold, v.Namespace+"/"+v.Name), p(statusColor(v.Ready.Status), v.Ready.Status))
	if v.Ready.Reason != "" {
		fmt.Fprintf(&b, " (%s)", v.Ready.Reason)
	}
	fmt.Fprintf(&b, "   %s\n", chain)
	if v.Stale {
		fmt.Fprintf(&b, "%s\n", p(cYellow, fmt.Sprintf("status describes generation %d of %d: Kontinue has not caught up yet", v.ObservedGeneration, v.Generation)))
	}
	if v.Ready.Status != "True" && v.Ready.Message != "" {
		fmt.Fprintf(&b, "%s\n", v.Ready.Message)
	}
	for i, s := range v.Steps {
		last := i == len(v.Steps)-1
		branch, pad := "├─ ", "│    "
		if last {
			branch, pad = "└─ ", "     "
		}
		fmt.Fprintf(&b, "%s%s %s", branch, p(statusColor(s.Ready.Status), mark(s.Ready.Status)), p(cBold, s.Name))
		if s.Ready.Status != "True" && s.Ready.Reason != "" {
			fmt.Fprintf(&b, "   %s %s", p(statusColor(s.Ready.Status), s.Ready.Status), s.Ready.Reason)
		}
		b.WriteString("\n")
		field := func(name, value string) {
			fmt.Fprintf(&b, "%s%s %s\n", pad, p(cCyan, fmt.Sprintf("%-9s", name)), value)
		}
		if s.Template != nil {
			field("template", s.Template.Kind+" "+s.Template.Name)
		}
		if s.PassThrough {
			msg := "passes an input through, stamps nothing"
			if s.Submitted != nil && s.Submitted.Message != "" {
				msg = s.Submitted.Message
			}
			field("option", "passThrough: "+msg)
		}
		if len(s.Inputs) > 0 {
			field("inputs", strings.Join(s.Inputs, ", "))
		}
		if s.Stamped != nil {
			field("stamped", s.Stamped.String())
		}
		for _, o := range s.Objects {
			if s.Stamped == nil || o != *s.Stamped {
				field("object", o.String())
			}
		}
		if s.Submitted != nil && s.Submitted.Status != "True" {
			field("submitted", p(statusColor(s.Submitted.Status), s.Submitted.Status)+" "+s.Submitted.Reason+msgSuffix(s.Submitted.Message))
		}
		if s.Health != view.HealthNone {
			h := p(statusColor(s.Health), s.Health)
			if s.Healthy != nil {
				h += " (" + s.Healthy.Reason + ")" + msgSuffix(s.Healthy.Message)
			}
			field("health", h)
		}
		for j, o := range s.Outputs {
			name := ""
			if j == 0 {
				name = "outputs"
			}
			field(name, o.Name+": "+oneLine(o.Preview, 100))
		}
		for j, iv := range s.Verification {
			name := ""
			if j == 0 {
				name = "verify"
			}
			field(name, verificationLine(p, iv))
		}
		if s.HeldInputDigest != "" {
			field("held", p(cYellow, "newer inputs "+short(s.HeldInputDigest)+" wait until the object finishes with "+dash(short(s.InputDigest))))
		}
		if s.Shadow != nil || s.ServedBy == "shadow" {
			sh := "outputs served by the " + dash(s.ServedBy)
			if s.Shadow != nil {
				sh += "; last good copy " + s.Shadow.String()
			}
			code := ""
			if s.ServedBy == "shadow" {
				code = cYellow
			}
			field("shadow", p(code, sh))
		}
		if r := s.Runnable; r != nil {
			run := p(statusColor(r.Ready.Status), r.Ready.Status) + " " + r.Ready.Reason
			if r.LatestRun != nil {
				run += "; latest " + r.LatestRun.Kind + " " + r.LatestRun.Name
				if r.LatestRunSucceeded != "" {
					run += " (Succeeded: " + r.LatestRunSucceeded + ")"
				}
			}
			if r.LatestSuccessfulRun != nil && (r.LatestRun == nil || *r.LatestSuccessfulRun != *r.LatestRun) {
				run += "; last success " + r.LatestSuccessfulRun.Name
			}
			field("runs", run)
		}
	}
	if len(v.Orphans) > 0 {
		fmt.Fprintf(&b, "%s\n", p(cYellow, "Orphans (no step stamps them; deletion retried)"))
		for _, o := range v.Orphans {
			fmt.Fprintf(&b, "  %s\n", o.String())
		}
	}
	if len(v.Conditions) > 0 {
		b.WriteString("Conditions\n")
		for _, c := range v.Conditions {
			fmt.Fprintf(&b, "  %-20s %s %s%s\n", c.Type, p(statusColor(c.Status), fmt.Sprintf("%-7s", c.Status)), c.Reason, msgSuffix(c.Message))
		}
	} else {
		fmt.Fprintf(&b, "%s\n", p(cYellow, "No status yet: is Kontinue running, and does it watch this namespace?"))
	}
	if v.ReconcileRequestedAt != "" {
		handled := " (not handled yet)"
		if v.LastHandledReconcileAt == v.ReconcileRequestedAt {
			handled = " (handled)"
		}
		fmt.Fprintf(&b, "%s\n", p(cDim, "reconcile requested at "+v.ReconcileRequestedAt+handled))
	}
	_, _ = io.WriteString(w, b.String())
}

func msgSuffix(m string) string {
	if m == "" {
		return ""
	}
	return ": " + oneLine(m, 160)
}

// printChainTree prints one chain:
//
//	ClusterSupplyChain source-to-url   Ready: True (Ready)   owners: 3 (2 ready)
//	selects apps.tanzu.vmware.com/workload-type=web
//	├─ source-provider   ClusterSourceTemplate git
//	├─ image-builder     ClusterImageTemplate kpack   ← source: source-provider
//	└─ deploy            ClusterTemplate, one of:   ← image: image-builder
//	     app-deploy          when flavor=app
//	     passThrough image   when flavor=none
//	Conditions
//	  ...
func printChainTree(w io.Writer, c view.Chain, counted, color bool) {
	var b strings.Builder
	p := func(code, s string) string { return paint(color, code, s) }
	fmt.Fprintf(&b, "%s %s   Ready: %s", c.ChainKind, p(cBold, c.Name), p(statusColor(c.Ready.Status), c.Ready.Status))
	if c.Ready.Reason != "" {
		fmt.Fprintf(&b, " (%s)", c.Ready.Reason)
	}
	if counted {
		fmt.Fprintf(&b, "   owners: %d (%d ready)", c.Owners, c.OwnersReady)
	}
	b.WriteString("\n")
	if c.Selector != "" {
		fmt.Fprintf(&b, "selects %s\n", c.Selector)
	}
	if c.Ready.Status != "True" && c.Ready.Message != "" {
		fmt.Fprintf(&b, "%s\n", c.Ready.Message)
	}
	width := 0
	for _, s := range c.Steps {
		width = max(width, len([]rune(s.Name)))
	}
	for i, s := range c.Steps {
		branch, pad := "├─ ", "│    "
		if i == len(c.Steps)-1 {
			branch, pad = "└─ ", "     "
		}
		tmpl := s.TemplateKind + " " + s.TemplateName
		if len(s.Options) > 0 {
			tmpl = s.TemplateKind + ", one of:"
		}
		var ins []string
		for _, in := range s.Inputs {
			n := in.Type
			if in.Name != "" && in.Name != in.Type {
				n += " " + in.Name
			}
			ins = append(ins, n+": "+in.Step)
		}
		from := ""
		if len(ins) > 0 {
			from = "   " + p(cDim, "← "+strings.Join(ins, ", "))
		}
		fmt.Fprintf(&b, "%s%s%s   %s%s\n", branch, p(cBold, s.Name), strings.Repeat(" ", width-len([]rune(s.Name))), tmpl, from)
		ow := 0
		for _, o := range s.Options {
			ow = max(ow, len([]rune(optionName(o))))
		}
		for _, o := range s.Options {
			n := optionName(o)
			fmt.Fprintf(&b, "%s%s%s   when %s\n", pad, n, strings.Repeat(" ", ow-len([]rune(n))), dash(o.Selector))
		}
	}
	if len(c.Conditions) > 0 {
		b.WriteString("Conditions\n")
		for _, cond := range c.Conditions {
			fmt.Fprintf(&b, "  %-20s %s %s%s\n", cond.Type, p(statusColor(cond.Status), fmt.Sprintf("%-7s", cond.Status)), cond.Reason, msgSuffix(cond.Message))
		}
	} else {
		fmt.Fprintf(&b, "%s\n", p(cYellow, "No status yet: is Kontinue running?"))
	}
	_, _ = io.WriteString(w, b.String())
}

func optionName(o view.Option) string {
	if o.PassThrough != "" {
		return "passThrough " + o.PassThrough
	}
	return o.Name
}

// verificationLine is how one input was checked against the chain's
// policy: the result (coloured), the input, the digest, the rule and why.
func verificationLine(p func(code, s string) string, iv st.InputVerification) string {
	code := cGreen
	switch iv.Result {
	case "Refused":
		code = cRed
	case "Verifying":
		code = cYellow
	}
	line := p(code, iv.Result) + " " + iv.Type + " " + iv.Name
	if iv.Digest != "" {
		line += " " + short(iv.Digest)
	}
	if iv.Rule != "" {
		line += " (" + iv.Rule + ")"
	}
	if iv.Held {
		line += "; the step keeps its previous " + iv.Type
	}
	return line + msgSuffix(iv.Message)
}
