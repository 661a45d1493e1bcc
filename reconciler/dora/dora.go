// Package dora computes the four DORA metrics of a chain's owners from
// what Kontinue records of each revision at each step: deployment
// frequency, lead time for changes (from a revision first seen to its
// successful deployment), change failure rate (deployments that failed,
// served by a shadow or not) and time to restore (from a failed
// deployment to the next good one). All of it is pure: the controller's
// metrics feed it the statuses before and after each write (Observe), and
// `kontinue dora` an owner's history (FromHistory); both give the same
// deployments, and Summarize the same numbers (dora_test.go).
package dora

import (
	"sort"
	"time"

	"kontinue.dev/kontinue/reconciler/api"
	"kontinue.dev/kontinue/reconciler/history"
	st "kontinue.dev/kontinue/reconciler/status"
)

// OwnerAnnotation on a Workload or Deliverable ("true") opts it in to
// DORA series of its own (bounded: metrics.MaxDORAOwners).
const OwnerAnnotation = "kontinue.dev/dora-owner"

// Steps are the steps that count as deployments: the chain's
// deploymentSteps when it names some, else its ClusterDeploymentTemplate
// steps and its last step.
func Steps(chain []api.Step, override []string) map[string]bool {
	out := map[string]bool{}
	if len(override) > 0 {
		for _, s := range override {
			out[s] = true
		}
		return out
	}
	for i, s := range chain {
		if s.TemplateRef.Kind == api.KindClusterDeploymentTemplate || i == len(chain)-1 {
			out[s.Name] = true
		}
	}
	return out
}

// StepsOf are the deployment steps as an owner's status shows its chain
// (each step's template kind, in the chain's order), for a reader that
// has the status and not the chain.
func StepsOf(rs []st.Resource, override []string) map[string]bool {
	chain := make([]api.Step, len(rs))
	for i, r := range rs {
		chain[i].Name = r.Name
		if r.TemplateRef != nil {
			chain[i].TemplateRef.Kind = r.TemplateRef.Kind
		}
	}
	return Steps(chain, override)
}

// Deployment is a revision's deployment: succeeded (every deployment step
// succeeded with it) or failed (one of them failed with it).
type Deployment struct {
	// Revision is the revision's key (history.Revision.Key), Label its
	// name for people (a commit).
	Revision, Label string
	At              time.Time
	Failed          bool
	// Shadowed: a deployment step's shadow served the last good outputs
	// while it failed.
	Shadowed bool
	// Lead is from the revision first seen to its success; negative when
	// not known (a link not proven).
	Lead time.Duration
	// Restore is, for a success that ended failures, from the first of
	// them; 0 otherwise.
	Restore time.Duration
	// Step is the deployment step whose end made the deployment (the
	// first to fail, the last to succeed).
	Step string
}

// FromHistory are the deployments h records, oldest first, with their
// lead times and times to restore.
func FromHistory(h history.History, steps map[string]bool) []Deployment {
	var out []Deployment
	// Oldest first (h is newest first): deployments in the same second
	// (status times are whole seconds) keep the revisions' order.
	for i := len(h.Revisions) - 1; i >= 0; i-- {
		r := &h.Revisions[i]
		d, ok := ofRow(r, steps)
		if !ok {
			continue
		}
		if !d.Failed {
			d.Lead = -1
			if r.Since != nil && !d.At.Before(r.Since.Time) {
				d.Lead = d.At.Sub(r.Since.Time)
			}
		}
		out = append(out, d)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	var failing *time.Time
	for i := range out {
		switch {
		case out[i].Failed && failing == nil:
			t := out[i].At
			failing = &t
		case !out[i].Failed && failing != nil:
			out[i].Restore = out[i].At.Sub(*failing)
			failing = nil
		}
	}
	return out
}

// ofRow is the deployment of one revision, if it has one: the first
// deployment step to fail, else the last to succeed once all have.
func ofRow(r *history.Revision, steps map[string]bool) (Deployment, bool) {
	d := Deployment{Revision: r.Key(), Label: r.Label()}
	succeeded := 0
	for _, c := range r.Steps {
		if !steps[c.Step] || c.EndedAt == nil {
			continue
		}
		switch c.Outcome {
		case st.OutcomeFailed:
			if !d.Failed || c.EndedAt.Time.Before(d.At) {
				d.At, d.Step = c.EndedAt.Time, c.Step
			}
			d.Failed = true
			d.Shadowed = d.Shadowed || c.Shadowed
		case st.OutcomeSucceeded:
			succeeded++
			if !d.Failed && c.EndedAt.Time.After(d.At) {
				d.At, d.Step = c.EndedAt.Time, c.Step
			}
		}
	}
	return d, d.Failed || (succeeded > 0 && succeeded == len(steps))
}

// Numbers are the four metrics over some deployments.
type Numbers struct {
	// Deployments succeeded, and Failed (Shadowed of them served by a
	// shadow).
	Deployments, Failed, Shadowed int
	// PerDay is successful deployments per day of the window.
	PerDay float64
	// LeadTimes counts the successes whose lead time is known; the
	// median and mean of them.
	LeadTimes                    int
	LeadTimeMedian, LeadTimeMean time.Duration
	// ChangeFailureRate is Failed / (Deployments + Failed).
	ChangeFailureRate float64
	// Restores counts the failures that a later success ended; the
	// median and mean time to restore.
	Restores                               int
	TimeToRestoreMedian, TimeToRestoreMean time.Duration
}

// Summarize is the four metrics of deps (of any owners) that happened in
// [from, to).
func Summarize(deps []Deployment, from, to time.Time) Numbers {
	var n Numbers
	var leads, restores []time.Duration
	for _, d := range deps {
		if d.At.Before(from) || !d.At.Before(to) {
			continue
		}
		if d.Failed {
			n.Failed++
			if d.Shadowed {
				n.Shadowed++
			}
			continue
		}
		n.Deployments++
		if d.Lead >= 0 {
			leads = append(leads, d.Lead)
		}
		if d.Restore > 0 {
			restores = append(restores, d.Restore)
		}
	}
	if days := to.Sub(from).Hours() / 24; days > 0 {
		n.PerDay = float64(n.Deployments) / days
	}
	if all := n.Deployments + n.Failed; all > 0 {
		n.ChangeFailureRate = float64(n.Failed) / float64(all)
	}
	n.LeadTimes, n.LeadTimeMedian, n.LeadTimeMean = len(leads), median(leads), mean(leads)
	n.Restores, n.TimeToRestoreMedian, n.TimeToRestoreMean = len(restores), median(restores), mean(restores)
	return n
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}
