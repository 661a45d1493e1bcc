package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/reconciler/history"
)

func TestPrintHistory(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	t3 := metav1.NewTime(t0.Add(3 * time.Second))
	out := HistoryOutput{Owner: "Workload/dev/app", Steps: []string{"source", "build", "deploy"},
		Revisions: []history.Revision{
			{Roots: []history.Root{{Key: "k2", Label: "repo@c2"}}, Since: &t0, Steps: []history.Cell{
				{Step: "source", Outcome: "Succeeded", TakenAt: &t0, EndedAt: &t0},
				{Step: "build", Outcome: "Failed", Reason: "BuildFailed", Message: "tests\nfailed", Shadowed: true, TakenAt: &t0, EndedAt: &t3}}},
			{Roots: []history.Root{{Key: "k1", Label: "repo@c1"}}, Steps: []history.Cell{{Step: "build", Outcome: "Superseded"}}},
		},
		Notes: []string{"a note"}}
	var b strings.Builder
	require.NoError(t, printHistory(&b, out))
	assert.Equal(t, `Workload/dev/app
REVISION   SINCE                  source         build                                   deploy
repo@c2    2026-01-02T03:04:00Z   Succeeded 0s   Failed (BuildFailed) shadow served 3s   -
repo@c1    -                      -              Superseded                              -
Failures:
  repo@c2 [build] BuildFailed: tests failed
Notes:
  a note
`, b.String())
}
