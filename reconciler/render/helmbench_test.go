package render

import "testing"

// BenchmarkHelmChild is one chart rendered in a child process.
func BenchmarkHelmChild(b *testing.B) {
	req := &helmRequest{Archive: appChart(b, "1.0.0"), Values: []byte(`{}`), Release: "r", Namespace: "ns", Revision: 1, MaxBytes: limits.bytes}
	for b.Loop() {
		m, err := runHelm(b.Context(), req, nil, "ns")
		if err != nil || m.Fail != "" {
			b.Fatal(err, m)
		}
	}
}
