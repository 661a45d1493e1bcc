package render

import (
	"context"
	"strconv"
	"testing"

	"kontinue.dev/kontinue/reconciler/api"
)

// goBenchTemplate is a Deployment-like goTemplate: the leaves of
// BenchmarkStamp's template, with a function, a conditional and a loop.
const goBenchTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .workload.metadata.name }}
  labels: {app.kubernetes.io/component: run, app.kubernetes.io/part-of: {{ .workload.metadata.name | quote }}}
  annotations: {kontinue.dev/revision: {{ .source.revision | quote }}}
spec:
  replicas: {{ .params.replicas }}
  revisionHistoryLimit: 3
  selector: {matchLabels: {app: {{ .workload.metadata.name }}}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 25%, maxUnavailable: 0}}
  template:
    metadata: {labels: {app: {{ .workload.metadata.name }}, tier: web}}
    spec:
      serviceAccountName: default
      securityContext: {runAsNonRoot: true, runAsUser: 1000}
      containers:
      - name: workload
        image: {{ .images.img.image | quote }}
        imagePullPolicy: IfNotPresent
        args: ["--port", "8080", "--debug={{ if .params.debug }}true{{ else }}false{{ end }}"]
        env:
        {{- range $i, $v := .params.list }}
        - {name: {{ printf "V%d" $i }}, value: {{ $v | quote }}}
        {{- end }}
        ports: [{containerPort: 8080, protocol: TCP, name: http}]
        resources: {limits: {cpu: "1", memory: 1Gi}, requests: {cpu: 100m, memory: 256Mi}}
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 10}
`

// BenchmarkGoTemplateRender is one goTemplate render: "new-context" with a
// context that changes on every render (a new owner resourceVersion), as
// when an owner changes: a render by a pooled child; "new-context-no-pool"
// the same with a new child process for every render; "same-context" with
// the same one, as on a reconcile where nothing changed: from the cache.
// allocs/op and B/op count the controller's side only.
func BenchmarkGoTemplateRender(b *testing.B) {
	spec := &api.TemplateSpec{GoTemplate: goBenchTemplate}
	e := GoTemplate()
	ctx := context.Background()
	newContext := func(b *testing.B) {
		tc := testContext()
		md := tc["workload"].(map[string]any)["metadata"].(map[string]any)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			n++
			md["resourceVersion"] = strconv.Itoa(n)
			if _, err := e.Render(ctx, spec, tc); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("new-context", newContext)
	b.Run("new-context-no-pool", func(b *testing.B) {
		old := goTemplateChildren.maxIdle
		goTemplateChildren.maxIdle = 0
		defer func() { goTemplateChildren.maxIdle = old }()
		newContext(b)
	})
	b.Run("same-context", func(b *testing.B) {
		tc := testContext()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Render(ctx, spec, tc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
