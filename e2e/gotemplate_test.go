package e2e

// goTemplates as a tenant's attack surface: a template that spins or
// allocates without end is bounded like a Helm chart (helm_test.go).

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// goMapped is the memory the Go runtime of this process (the e2e suite and
// the Kontinue it runs) has mapped: heap, stacks and the runtime's own. It
// does not shrink when the heap does, so it holds the peak.
func goMapped() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// Workloads feeding goTemplates a loop that doubles a string 25 times (512
// MiB) or nested ranges that write nothing and never end, more of them
// than there are render slots, all in one namespace: each gets a stamp
// failure naming the limit that stopped it; the controller's memory does
// not grow with them; the spinning ones are stopped at the deadline; a
// goTemplate of another namespace renders meanwhile, and one of the same
// namespace once they are stopped.
func TestGoTemplateRunawayTemplatesAreBounded(t *testing.T) {
	k := newKit(t)
	cm := "{apiVersion: v1, kind: ConfigMap, metadata: {name: {{ .workload.metadata.name }}}, data: {%s}}"
	chain := func(name, body string) string {
		tmpl, chain := k.name(name), k.name(name+"-chain")
		k.apply(k.templateYAML("ClusterTemplate", tmpl, "\n  goTemplate: |\n    "+body))
		k.apply(k.chainYAML(chain, "", k.step("config", "ClusterTemplate", tmpl, "")))
		return chain
	}
	bomb := chain("bomb", `{{ $s := "0123456789abcdef" }}{{ range until (int .params.doublings) }}{{ $s = print $s $s }}{{ end }}`+
		fmt.Sprintf(cm, `length: "{{ len $s }}"`))
	spin := chain("spin", `{{ range until (int .params.count) }}{{ range until (int $.params.count) }}{{ end }}{{ end }}`+
		fmt.Sprintf(cm, `count: "done"`))
	fine := chain("fine", fmt.Sprintf(cm, `count: {{ .params.count | quote }}`))
	runtime.GC()
	before := goMapped()

	bombs, spins := []string{"bomb0", "bomb1"}, []string{"spin0", "spin1", "spin2", "spin3"}
	for _, name := range bombs {
		k.workload(name, bomb, "  params: [{name: doublings, value: 25}]\n")
	}
	for _, name := range spins {
		k.workload(name, spin, "  params: [{name: count, value: 65536}]\n")
	}
	// Another namespace's goTemplate renders while they run.
	other := newKit(t)
	start := time.Now()
	other.workload("fine", fine, "  params: [{name: count, value: \"7\"}]\n")
	other.waitObj(configMapGVR, "fine", other.dataIs("count", "7"))
	t.Logf("another namespace's goTemplate rendered %s after it was created", time.Since(start).Round(time.Millisecond))
	running := 0
	for _, name := range spins {
		if c := k.stepCond(get(t, workloadGVR, k.ns, name), "config", "ResourceSubmitted"); c == nil || c["reason"] != "TemplateStampFailure" {
			running++
		}
	}
	assert.Positive(t, running, "the other namespace's template rendered while spinning ones were still running")

	for _, name := range bombs {
		w := k.waitStep(name, "config", "ResourceSubmitted", "False", "TemplateStampFailure")
		k.assertCond(k.stepCond(w, "config", "ResourceSubmitted"), "False", "TemplateStampFailure",
			"goTemplate failed to render: the template needs more than 256 MiB of memory")
		k.assertCond(ownerCondition(w, "Ready"), "False", "TemplateStampFailure")
	}
	for _, name := range spins {
		eventually(t, 90*time.Second, func() string {
			c := k.stepCond(get(t, workloadGVR, k.ns, name), "config", "ResourceSubmitted")
			if msg, _ := c["message"].(string); !strings.Contains(msg, "goTemplate rendering did not finish within 10s") {
				return fmt.Sprintf("%s: %v", name, c)
			}
			return ""
		})
	}
	grown := goMapped() - before
	t.Logf("the Go runtime's mapped memory grew by %.1f MiB", float64(grown)/(1<<20))
	// Each bomb needs 768 MiB (the string and its last half); the
	// controller (this process) did not get it.
	assert.Less(t, grown, int64(128<<20), "the controller's memory grew by %d MiB", grown>>20)
	assert.Empty(t, k.objects(k.ns), "nothing stamped")

	// The spinning templates were stopped at the deadline: their slots are
	// free for the namespace's own templates.
	k.workload("fine", fine, "  params: [{name: count, value: \"8\"}]\n")
	k.waitObj(configMapGVR, "fine", k.dataIs("count", "8"))
}
