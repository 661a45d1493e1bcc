package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kontinue.dev/kontinue/reconciler/metrics"
	st "kontinue.dev/kontinue/reconciler/status"
)

// provChain: a source step (a ConfigMap whose data are the url and the
// commit), a gated image step built from that source (the test plays the
// builder, as in gating_test.go), and a deploy step taking the image.
func provChain(ns string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[1]s}
spec:
  urlPath: .data.url
  revisionPath: .data.revision
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-src}
    data: {url: "https://git.example/app.git", revision: $(params.commit)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: %[2]s}
spec:
  imagePath: .status.latestImage
  shadow: false   # a shadow's own hold would record c2's failure anyway
%[5]s
  template:
    apiVersion: test.run/v1alpha1
    kind: Test
    metadata: {name: $(workload.metadata.name)$-build}
    spec:
      commit: $(source.revision)$
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[3]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-deploy}
    data: {image: $(image)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: %[4]s}
spec:
  selector: {gated: %[4]s}
  resources:
  - name: source
    templateRef: {kind: ClusterSourceTemplate, name: %[1]s}
  - name: build
    templateRef: {kind: ClusterImageTemplate, name: %[2]s}
    sources: [{name: source, resource: source}]
  - name: deploy
    templateRef: {kind: ClusterTemplate, name: %[3]s}
    images: [{name: image, resource: build}]
`, uniq(ns, "src"), uniq(ns, "build"), uniq(ns, "deploy"), uniq(ns, "prov"), readyRule)
}

func provWorkload(ns, commit string) string {
	return fmt.Sprintf(`
apiVersion: carto.run/v1alpha1
kind: Workload
metadata: {name: app, labels: {gated: %s}}
spec:
  params: [{name: commit, value: %s}]
`, uniq(ns, "prov"), commit)
}

// provenanceOf decodes a step's status.resources[].provenance.
func provenanceOf(t *testing.T, w *unstructured.Unstructured, step string) st.Provenance {
	t.Helper()
	var p st.Provenance
	b, err := json.Marshal(stepStatus(w, step)["provenance"])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &p))
	return p
}

// waitProvenance waits until check passes on the step's provenance.
func waitProvenance(t *testing.T, ns, step string, check func(p st.Provenance) string) (*unstructured.Unstructured, st.Provenance) {
	t.Helper()
	var w *unstructured.Unstructured
	var p st.Provenance
	eventually(t, 30*time.Second, func() string {
		w = get(t, workloadGVR, ns, "app")
		p = provenanceOf(t, w, step)
		if msg := check(p); msg != "" {
			b, _ := json.Marshal(p)
			return fmt.Sprintf("step [%s] provenance %s: %s", step, b, msg)
		}
		return ""
	})
	return w, p
}

func provRevision(s *st.InputSet) string {
	if s == nil || len(s.Sources) == 0 {
		return ""
	}
	return s.Sources[0].Revision
}

func setIs(s *st.InputSet, revision, outcome string) string {
	if s == nil {
		return "no such set"
	}
	if provRevision(s) != revision || s.Outcome != outcome {
		return fmt.Sprintf("%s %s, want %s %s", provRevision(s), s.Outcome, revision, outcome)
	}
	return ""
}

// TestProvenance: each step's status names the input values behind its
// outputs and the newer sets it works on or holds, with when it took each
// and when each ended; the lead time metrics count the same sets: one
// success per step and revision, the failed set, the superseded one.
func TestProvenance(t *testing.T) {
	ns := newNamespace(t)
	apply(t, ns, provChain(ns))
	apply(t, ns, provWorkload(ns, "c1"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c1", "spec", "commit"))

	_, p := waitProvenance(t, ns, "build", func(p st.Provenance) string { return setIs(p.Latest, "c1", st.OutcomeProcessing) })
	assert.Nil(t, p.Current, "nothing succeeded yet")
	assert.Equal(t, "https://git.example/app.git", p.Latest.Sources[0].URL)
	assert.Equal(t, "source", p.Latest.Sources[0].Resource)
	require.NotNil(t, p.Latest.TakenAt)
	assert.Nil(t, p.Latest.EndedAt)

	build(t, ns, "True", "img-c1")
	waitDeployed(t, ns, "img-c1")
	w, p := waitProvenance(t, ns, "build", func(p st.Provenance) string { return setIs(p.Current, "c1", st.OutcomeSucceeded) })
	assert.Nil(t, p.Latest)
	assert.Equal(t, stepStatus(w, "build")["inputDigest"], p.Current.Digest, "current is the input set the outputs came from")
	require.NotNil(t, p.Current.EndedAt)
	assert.False(t, p.Current.EndedAt.Before(p.Current.TakenAt))
	_, dp := waitProvenance(t, ns, "deploy", func(p st.Provenance) string {
		if p.Current == nil || len(p.Current.Images) != 1 || p.Current.Images[0].Image != "img-c1" {
			return "deploy's current set is not img-c1"
		}
		return ""
	})
	assert.Equal(t, "build", dp.Current.Images[0].Resource)
	_, sp := waitProvenance(t, ns, "source", func(p st.Provenance) string { return setIs(p.Current, "", st.OutcomeSucceeded) })
	assert.Positive(t, sp.Current.OwnerGeneration, "a source step's input is the owner's spec, at a generation")

	// c2 goes in; while the object works on it, c3 is held, then c4
	// replaces it (c3 is superseded).
	apply(t, ns, provWorkload(ns, "c2"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c2", "spec", "commit"))
	apply(t, ns, provWorkload(ns, "c3"))
	_, p = waitProvenance(t, ns, "build", func(p st.Provenance) string { return setIs(p.Held, "c3", st.OutcomeHeld) })
	assert.Empty(t, setIs(p.Current, "c1", st.OutcomeSucceeded))
	assert.Empty(t, setIs(p.Latest, "c2", st.OutcomeProcessing))
	apply(t, ns, provWorkload(ns, "c4"))
	waitProvenance(t, ns, "build", func(p st.Provenance) string { return setIs(p.Held, "c4", st.OutcomeHeld) })

	// c2 fails: recorded as failed, then c4 goes in.
	build(t, ns, "False", "img-broken")
	waitFor(t, testGVR, ns, "app-build", fieldIs("c4", "spec", "commit"))
	_, p = waitProvenance(t, ns, "build", func(p st.Provenance) string { return setIs(p.Latest, "c4", st.OutcomeProcessing) })
	assert.Empty(t, setIs(p.Current, "c1", st.OutcomeSucceeded), "downstream still runs what c1 made")
	assert.Nil(t, p.Held)

	// Status times are in whole seconds: c4's lead time is at least one.
	time.Sleep(2 * time.Second)
	build(t, ns, "True", "img-c4")
	waitDeployed(t, ns, "img-c4")
	w, _ = waitProvenance(t, ns, "build", func(p st.Provenance) string { return setIs(p.Current, "c4", st.OutcomeSucceeded) })
	for _, step := range []string{"source", "build", "deploy"} {
		b, _ := json.Marshal(stepStatus(w, step)["provenance"])
		t.Logf("step [%s]: provenance takes %d bytes of the status", step, len(b))
	}

	chain := uniq(ns, "prov")
	eventually(t, 10*time.Second, func() string {
		got := leadTimeSeries(t, chain)
		want := map[string]float64{"build/succeeded": 2, "build/failed": 1, "build/superseded": 1, "build/lead_count": 2}
		for k, v := range want {
			if got[k] != v {
				return fmt.Sprintf("series %v, want %v", got, want)
			}
		}
		if got["build/lead_sum"] < 1 || got["build/lead_sum"] > 120 {
			return fmt.Sprintf("lead time sum %v s, want the time the test played the builder", got["build/lead_sum"])
		}
		if got["deploy/succeeded"] < 2 {
			return fmt.Sprintf("series %v: deploy succeeded with img-c1 and img-c4", got)
		}
		// End to end: c1 and c4, each from its revision at the source
		// step to the deploy step's success (c4's over the 2 s slept).
		if got["chain/lead_count"] != 2 || got["chain/lead_sum"] < 2 || got["chain/lead_sum"] > 120 {
			return fmt.Sprintf("series %v: want two chain lead times, c4's at least 2 s", got)
		}
		return ""
	})
}

// leadTimeSeries reads this process's lead time metrics of chain: step/outcome
// counts, step/lead_count and step/lead_sum of the step histogram,
// chain/lead_count and chain/lead_sum of the end-to-end one.
func leadTimeSeries(t *testing.T, chain string) map[string]float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["chain"] != chain {
				continue
			}
			switch f.GetName() {
			case "kontinue_step_input_sets_total":
				out[l["step"]+"/"+l["outcome"]] = m.GetCounter().GetValue()
			case "kontinue_step_lead_time_seconds":
				out[l["step"]+"/lead_count"] = float64(m.GetHistogram().GetSampleCount())
				out[l["step"]+"/lead_sum"] = m.GetHistogram().GetSampleSum()
			case "kontinue_chain_lead_time_seconds":
				out["chain/lead_count"] = float64(m.GetHistogram().GetSampleCount())
				out["chain/lead_sum"] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// traceChains: provChain's steps plus one that stamps a Deliverable, and the
// delivery that deliverable walks (a source read from its spec, a deploy
// step taking it).
func traceChains(ns string) string {
	return provChain(ns) + fmt.Sprintf(`
  - name: deliverable
    templateRef: {kind: ClusterTemplate, name: %[1]s}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[1]s}
spec:
  template:
    apiVersion: carto.run/v1alpha1
    kind: Deliverable
    metadata: {name: $(workload.metadata.name)$, labels: {trace-delivery: %[2]s}}
    spec:
      source: {git: {url: "https://git.example/gitops.git", ref: {branch: main}}}
      params: [{name: gitops-commit, value: g7}]
---
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: %[3]s}
spec:
  urlPath: .data.url
  revisionPath: .data.revision
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-gitops}
    data: {url: $(deliverable.spec.source.git.url)$, revision: $(params.gitops-commit)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: %[4]s}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-live}
    data: {revision: $(source.revision)$}
---
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: %[2]s}
spec:
  selector: {trace-delivery: %[2]s}
  resources:
  - name: gitops
    templateRef: {kind: ClusterSourceTemplate, name: %[3]s}
  - name: live
    templateRef: {kind: ClusterTemplate, name: %[4]s}
    sources: [{name: source, resource: gitops}]
`, uniq(ns, "mkdlv"), uniq(ns, "tdel"), uniq(ns, "gitops"), uniq(ns, "live"))
}

// TestTrace: kontinue trace prints the chain from the source revision to
// the last step, from an owner, from a stamped object, and from a
// Deliverable through the Workload that stamped it.
func TestTrace(t *testing.T) {
	ns := newNamespace(t)
	// The workload's service account may stamp Deliverables here.
	apply(t, ns, `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: stamp-deliverables}
rules:
- apiGroups: [carto.run]
  resources: [deliverables]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: stamp-deliverables}
subjects: [{kind: ServiceAccount, name: default}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: stamp-deliverables}
`)
	apply(t, ns, traceChains(ns))
	apply(t, ns, provWorkload(ns, "c1"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c1", "spec", "commit"))
	build(t, ns, "True", "img-c1")
	waitDeployed(t, ns, "img-c1")
	waitProvenance(t, ns, "deploy", func(p st.Provenance) string {
		if p.Current == nil || len(p.Current.Images) == 0 || p.Current.Images[0].Image != "img-c1" {
			return "deploy has not taken img-c1"
		}
		return ""
	})
	waitOwner(t, deliverableGVR, ns, "app", "Ready", "True", "")

	code, out, errOut := kontinueCLI(t, "trace", "workload", "app", "-n", ns, "--step", "deploy", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var tr struct {
		Kind string
		Hops []struct {
			Owner, Step, Stamped, Set string
			Input                     *st.InputSet
			Outputs                   map[string]string
			Links                     []struct {
				Input, Resource, Value string
				Matches                bool
			}
			From *struct {
				Workload, Step, Failed, Reason string
				Proven                         bool
			}
		}
		Notes []string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &tr), out)
	require.Equal(t, "Trace", tr.Kind)
	require.Len(t, tr.Hops, 3, out)
	assert.Equal(t, []string{"source", "build", "deploy"}, []string{tr.Hops[0].Step, tr.Hops[1].Step, tr.Hops[2].Step})
	assert.Equal(t, "c1", tr.Hops[0].Outputs["revision"], "the commit")
	assert.Equal(t, "https://git.example/app.git@c1", tr.Hops[1].Links[0].Value)
	assert.True(t, tr.Hops[1].Links[0].Matches)
	assert.Equal(t, "img-c1", tr.Hops[2].Links[0].Value, "the image the deploy step took")
	assert.True(t, tr.Hops[2].Links[0].Matches)
	assert.Equal(t, st.OutcomeSucceeded, tr.Hops[1].Input.Outcome)
	require.NotNil(t, tr.Hops[1].Input.EndedAt)
	assert.Empty(t, tr.Notes)

	// From the object the deploy step stamped, as text.
	code, out, errOut = kontinueCLI(t, "trace", "configmap", "app-deploy", "-n", ns)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Workload/"+ns+"/app\n")
	assert.Contains(t, out, "[build] Test/"+ns+"/app-build  Succeeded  taken ")
	assert.Contains(t, out, "in  source: source <- [source] https://git.example/app.git@c1 = its outputs now")
	assert.Contains(t, out, "in  image: image <- [build] img-c1 = its outputs now")
	assert.Contains(t, out, "ConfigMap "+ns+"/app-deploy: stamped by Workload "+ns+"/app step [deploy] (its labels)")
	assert.NotContains(t, out, "not proven")

	// A new commit the build has not finished: the deploy step still runs
	// img-c1, and its trace still says c1.
	apply(t, ns, provWorkload(ns, "c2"))
	waitFor(t, testGVR, ns, "app-build", fieldIs("c2", "spec", "commit"))
	waitProvenance(t, ns, "build", func(p st.Provenance) string { return setIs(p.Latest, "c2", st.OutcomeProcessing) })
	code, out, errOut = kontinueCLI(t, "trace", "workload", "app", "-n", ns, "--step", "deploy")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "in  source: source <- [source] https://git.example/app.git@c1 (older than its outputs now)")
	assert.Contains(t, out, "took https://git.example/app.git@c1 from step [source], which has published other outputs since")

	// From the Deliverable: the workload's chain first, then the delivery;
	// the commit the workload wrote is the link no status proves: the step
	// that stamped the Deliverable is a first step, whose set (the
	// Workload's spec) is no revision.
	code, out, errOut = kontinueCLI(t, "trace", "deliverable", "app", "-n", ns, "-o", "json")
	require.Equal(t, 0, code, errOut)
	tr.Hops, tr.Notes = nil, nil
	require.NoError(t, json.Unmarshal([]byte(out), &tr), out)
	var owners []string
	for _, h := range tr.Hops {
		owners = append(owners, h.Owner+" "+h.Step)
	}
	assert.Equal(t, []string{"Workload/" + ns + "/app source", "Workload/" + ns + "/app build", "Workload/" + ns + "/app deploy",
		"Workload/" + ns + "/app deliverable", "Deliverable/" + ns + "/app gitops", "Deliverable/" + ns + "/app live"}, owners)
	assert.Equal(t, "https://git.example/gitops.git@g7", tr.Hops[5].Links[0].Value)
	require.NotNil(t, tr.Hops[4].From)
	assert.Equal(t, "Workload/"+ns+"/app", tr.Hops[4].From.Workload)
	assert.Equal(t, "deliverable", tr.Hops[4].From.Step)
	assert.False(t, tr.Hops[4].From.Proven)
	assert.Equal(t, "applied-digest", tr.Hops[4].From.Failed)
	assert.Equal(t, "the Workload's input set traces to no known revision", tr.Hops[4].From.Reason)
	assert.Contains(t, tr.Notes, "Deliverable/"+ns+"/app step [gitops]: that Workload/"+ns+"/app step [deliverable] made the revision it published is not proven (condition 2, applied-digest): the Workload's input set traces to no known revision")

	code, _, errOut = kontinueCLI(t, "trace", "configmap", "nope", "-n", ns)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not found")
}

// TestProvenanceOfTektonStep: a step with a run per input set (lifecycle
// tekton): latest is the newest run's set, current the set of the run
// whose outputs are published; a failed run ends its set as Failed.
func TestProvenanceOfTektonStep(t *testing.T) {
	k := newRunKit(t)
	chain, lint, deploy := uniq(k.ns, "chain"), uniq(k.ns, "lint"), uniq(k.ns, "deploy")
	apply(t, k.ns, k.tektonChain(chain, lint, deploy))
	k.setCommit("app", chain, "c1")
	run1 := k.waitStepRuns("app", "lint", "c1")[0]
	_, p := waitProvenance(t, k.ns, "lint", func(p st.Provenance) string {
		if p.Latest == nil || p.Latest.Outcome != st.OutcomeProcessing {
			return "no processing run"
		}
		return ""
	})
	assert.Nil(t, p.Current)
	assert.Equal(t, run1.GetLabels()["kontinue.dev/input-digest"], p.Latest.Digest, "a run's set is its input digest label")
	gen1 := p.Latest.OwnerGeneration
	assert.Positive(t, gen1)

	k.finish(run1.GetName(), "True", nil)
	k.waitDeployed("c1")
	w, p := waitProvenance(t, k.ns, "lint", func(p st.Provenance) string {
		if p.Current == nil || p.Current.Outcome != st.OutcomeSucceeded {
			return "run 1 not current"
		}
		return ""
	})
	assert.Equal(t, stepStatus(w, "lint")["inputDigest"], p.Current.Digest)
	assert.Nil(t, p.Latest)
	_, dp := waitProvenance(t, k.ns, "deploy", func(p st.Provenance) string {
		if p.Current == nil || len(p.Current.Sources) != 1 || p.Current.Sources[0].Revision != "c1" {
			return "deploy's current set is not c1"
		}
		return ""
	})
	assert.Equal(t, "lint", dp.Current.Sources[0].Resource)

	k.setCommit("app", chain, "c2")
	run2 := k.waitStepRuns("app", "lint", "c2", "c1")[0]
	k.finish(run2.GetName(), "False", nil)
	_, p = waitProvenance(t, k.ns, "lint", func(p st.Provenance) string {
		if p.Latest == nil || p.Latest.Outcome != st.OutcomeFailed {
			return "run 2 not failed"
		}
		return ""
	})
	assert.Equal(t, run2.GetLabels()["kontinue.dev/input-digest"], p.Latest.Digest)
	assert.Greater(t, p.Latest.OwnerGeneration, gen1, "the failed set came from the newer spec")
	require.NotNil(t, p.Current)
	assert.Equal(t, gen1, p.Current.OwnerGeneration, "outputs still from the first spec")

	eventually(t, 10*time.Second, func() string {
		got := leadTimeSeries(t, chain)
		if got["lint/succeeded"] != 1 || got["lint/failed"] != 1 || got["lint/lead_count"] != 1 {
			return fmt.Sprintf("series %v", got)
		}
		return ""
	})
}
