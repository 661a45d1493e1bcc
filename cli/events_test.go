package cli

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kontinue.dev/kontinue/cli/view"
)

func TestEventsMergedAndSorted(t *testing.T) {
	at := func(min int) metav1.Time { return metav1.NewTime(testNow.Add(time.Duration(-min) * time.Minute)) }
	evs := []corev1.Event{
		{InvolvedObject: corev1.ObjectReference{Kind: "Image", Name: "app"}, Type: "Warning", Reason: "BuildFailed", Message: "the build\nfailed", LastTimestamp: at(1), Count: 3},
		{InvolvedObject: corev1.ObjectReference{Kind: "Workload", Name: "app"}, Type: "Normal", Reason: "StampedObjectApplied", Message: "created Image dev/app", LastTimestamp: at(90)},
		// Written by the events.k8s.io API: eventTime and a series.
		{InvolvedObject: corev1.ObjectReference{Kind: "Workload", Name: "app"}, Type: "Normal", Reason: "ResourceOutputChanged", Message: "step [source] url",
			EventTime: metav1.NewMicroTime(testNow.Add(-3 * time.Hour)), Series: &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(testNow.Add(-30 * time.Minute))}},
		{InvolvedObject: corev1.ObjectReference{Kind: "GitRepository", Name: "app"}, Type: "Normal", Reason: "Fetched", ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(200)}},
	}
	sortEvents(evs)
	tab := newTable("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
	for _, e := range evs {
		tab.add(eventRow(e, testNow)...)
	}
	var out bytes.Buffer
	require.NoError(t, tab.write(&out, false))
	golden(t, "events/table.txt", out.String())
	require.Len(t, filterTypes(evs, []string{"Warning"}), 1)
}

func TestEventTargets(t *testing.T) {
	var v view.Owner
	v.OwnerKind, v.Namespace, v.Name = "Workload", "dev", "app"
	v.Steps = []view.Step{
		{Stamped: &view.Ref{Kind: "Image", Namespace: "dev", Name: "app"}, Objects: []view.Ref{{Kind: "Service", Namespace: "dev", Name: "app"}},
			Shadow: &view.Ref{Kind: "Image", Namespace: "dev", Name: "app-shadow"}},
		{Stamped: &view.Ref{Kind: "Runnable", Namespace: "dev", Name: "tests"},
			Runnable: &view.Runnable{LatestRun: &view.Ref{Kind: "PipelineRun", Namespace: "dev", Name: "tests-x"}}},
	}
	v.Orphans = []view.Ref{{Kind: "ConfigMap", Namespace: "dev", Name: "old"}}
	got := eventTargets(v)
	for _, want := range []eventTarget{{"Workload", "dev", "app"}, {"Image", "dev", "app"}, {"Service", "dev", "app"}, {"Image", "dev", "app-shadow"},
		{"Runnable", "dev", "tests"}, {"PipelineRun", "dev", "tests-x"}, {"ConfigMap", "dev", "old"}} {
		require.True(t, got[want], "%v", want)
	}
	require.Len(t, got, 7)
}

// TestEventsSortedWithinASecond: lastTimestamp has whole seconds, so the
// events of one reconcile tie; the UnixNano client-go's recorders put in an
// event's name orders them as they happened, not by object and reason.
func TestEventsSortedWithinASecond(t *testing.T) {
	sec := time.Date(2026, 11, 24, 21, 52, 17, 0, time.UTC)
	ev := func(obj, reason string, nanos int, name string) corev1.Event {
		if name == "" {
			name = fmt.Sprintf("web.%x", sec.Add(time.Duration(nanos)).UnixNano())
		}
		return corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name}, InvolvedObject: corev1.ObjectReference{Kind: obj, Name: "web"},
			Reason: reason, LastTimestamp: metav1.NewTime(sec)}
	}
	evs := []corev1.Event{
		ev("Workload", "ResourceHealthyStatusChanged", 900, ""),
		ev("Deployment", "ScalingReplicaSet", 500, ""),
		ev("Workload", "StampedObjectApplied", 300, ""),
		ev("Workload", "ResourceOutputChanged", 100, ""),
		// No time in its name, or one of another second (an event seen
		// again later): the second, before those of that second with nanoseconds.
		ev("Workload", "Aggregated", 0, fmt.Sprintf("web.%x", sec.Add(-time.Hour).UnixNano())),
		ev("Job", "Completed", 0, "web-tests.custom"),
	}
	sortEvents(evs)
	var got []string
	for _, e := range evs {
		got = append(got, e.InvolvedObject.Kind+" "+e.Reason)
	}
	require.Equal(t, []string{"Job Completed", "Workload Aggregated", "Workload ResourceOutputChanged", "Workload StampedObjectApplied",
		"Deployment ScalingReplicaSet", "Workload ResourceHealthyStatusChanged"}, got)
}
