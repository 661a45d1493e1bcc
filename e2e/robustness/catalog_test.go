package robustness

import (
	"sort"
	"strconv"
	"strings"

	"kontinue.dev/kontinue/e2e/robustness/check"
)

// The platform team's catalog: templates and chains, one set per run
// (cluster-scoped names start with the run's prefix, @P@). Every template
// has an edition (@E:<name>@) that the platform's edits bump.
//
//	main    (Workloads)  src → cfg (options a/b on param variant) → widget (gated) → echo
//	                     with a roll-out: a canary wave by label, then everyone
//	apps    (Workloads)  src → yaml (goTemplate: a Widget from a YAML param, fromYaml)
//	                     → app (Deployment; options: healthRule with shadow, or
//	                     observedCompletion) → test (a Job per input set) → go (goTemplate)
//	canary  (Workloads)  cwidget (gated) → cfinal (goTemplate): the quiet tenant's chain
//	deliver (Deliverables) dsrc → deploy (ClusterDeploymentTemplate, a real
//	                     Deployment, gated on its rollout) → notify
//	runs    (Workloads run-<n>, the lane's: lane_test.go) run (runnable: true:
//	                     a generated ClusterRunTemplate and Runnable, a Widget
//	                     per commit) → rnote (the run's output)
//	hogs    (Workloads hog-<n>, the lane's) hog (goTemplate: nested loops that
//	                     write nothing, from param loops)
//	verified (Workloads ver-<n>, the lane's: lane_test.go) vimg (an image from
//	                     param image) → vdeploy (its verify: policy requires a
//	                     signature by the run's key: registry_test.go)
//
// Params name what they feed: value (the widget's spec.value, any JSON),
// variant (a/b), text, srcSuffix and cfgSuffix (object names: collisions),
// fail and hang (the widget controller's verdict), yaml (a YAML text the
// yaml step turns into a Widget's value), image (crash in the tag
// crash-loops), rule (health/completion), exit and runFor (the Job),
// loops (the goTemplate's work), tick (the canary), revision (deliverables).
var catalogDocs = map[string]string{
	"src": `
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: @P@-src}
spec:
  urlPath: data.url
  revisionPath: data.revision
  params: [{name: srcSuffix, default: src}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-$(params.srcSuffix)$}
    data:
      url: $(workload.spec.source.git.url)$
      revision: $(workload.spec.source.git.ref.commit)$
      edition: "@E:src@"`,
	"cfg-a": `
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: @P@-cfg-a}
spec:
  configPath: data.revision
  params: [{name: cfgSuffix, default: cfg}, {name: text, default: plain}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-$(params.cfgSuffix)$}
    data: {revision: $(source.revision)$, variant: a, text: $(params.text)$, edition: "@E:cfg-a@"}`,
	"cfg-b": `
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: @P@-cfg-b}
spec:
  configPath: data.revision
  params: [{name: cfgSuffix, default: cfg}, {name: text, default: plain}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-$(params.cfgSuffix)$}
    data: {revision: $(source.revision)$, variant: b, text: $(params.text)$, b-only: "yes", edition: "@E:cfg-b@"}`,
	"widget": `
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: @P@-widget}
spec:
  configPath: spec.value
  params: [{name: value, default: 0}, {name: fail, default: false}, {name: hang, default: false}]
  observedCompletion:
    succeeded: {key: status.ready, value: true}
    failed: {key: status.ready, value: false}
  progressDeadline: 15s
  template:
    apiVersion: robustness.kontinue.dev/v1
    kind: Widget
    metadata: {name: $(workload.metadata.name)$-w}
    spec: {value: $(params.value)$, fail: $(params.fail)$, hang: $(params.hang)$, revision: $(config)$, edition: "@E:widget@"}`,
	"echo": `
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: @P@-echo}
spec:
  template:
    apiVersion: robustness.kontinue.dev/v1
    kind: Widget
    metadata: {name: $(workload.metadata.name)$-echo}
    spec: {value: $(config)$, edition: "@E:echo@"}`,
	"app-hr": `
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: @P@-app-hr}
spec:
  params: [{name: image, default: registry.example/app:v0}]
  shadow: true
  healthRule:
    multiMatch:
      healthy:
        matchFields:
        - {key: status.updatedReplicas, operator: In, values: [1]}
        - {key: status.replicas, operator: In, values: [1]}
        - {key: status.availableReplicas, operator: In, values: [1]}
      unhealthy:
        matchFields:
        - key: 'status.conditions[?(@.type=="Progressing")].reason'
          operator: In
          values: [ProgressDeadlineExceeded]
          messagePath: 'status.conditions[?(@.type=="Progressing")].message'
  progressDeadline: 20s
  goTemplate: |
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: {{ .workload.metadata.name }}-app}
    spec:
      replicas: 1
      progressDeadlineSeconds: 5
      strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
      selector: {matchLabels: {app: {{ .workload.metadata.name }}-app}}
      template:
        metadata:
          labels: {app: {{ .workload.metadata.name }}-app}
          annotations: {edition: "@E:app-hr@"}
        spec:
          containers:
          - name: app
            image: {{ .params.image | quote }}
            env: [{name: KWOK_EXIT_CODE, value: "{{ if contains "crash" .params.image }}1{{ else }}0{{ end }}"}]`,
	"app-oc": `
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: @P@-app-oc}
spec:
  params: [{name: image, default: registry.example/app:v0}]
  observedCompletion:
    succeeded:
    - {key: status.updatedReplicas, value: 1}
    - {key: status.replicas, value: 1}
    - {key: status.availableReplicas, value: 1}
    failed:
    - {key: 'status.conditions[?(@.type=="Progressing")].reason', value: ProgressDeadlineExceeded}
    - {key: status.updatedReplicas, value: 1}
  progressDeadline: 20s
  goTemplate: |
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: {{ .workload.metadata.name }}-app}
    spec:
      replicas: 1
      progressDeadlineSeconds: 5
      strategy: {type: Recreate}
      selector: {matchLabels: {app: {{ .workload.metadata.name }}-app}}
      template:
        metadata:
          labels: {app: {{ .workload.metadata.name }}-app}
          annotations: {edition: "@E:app-oc@"}
        spec:
          containers:
          - name: app
            image: {{ .params.image | quote }}
            env: [{name: KWOK_EXIT_CODE, value: "{{ if contains "crash" .params.image }}1{{ else }}0{{ end }}"}]`,
	"yaml": `
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: @P@-yaml}
spec:
  params: [{name: yaml, default: "{}"}]
  goTemplate: |
    apiVersion: robustness.kontinue.dev/v1
    kind: Widget
    metadata: {name: {{ .workload.metadata.name }}-y}
    spec:
      value: {{ .params.yaml | fromYaml | toJson }}
      edition: "@E:yaml@"`,
	"test": `
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: @P@-test}
spec:
  lifecycle: immutable
  imagePath: metadata.annotations.image
  params: [{name: exit, default: "0"}, {name: runFor, default: 1s}]
  healthRule:
    multiMatch:
      healthy:
        matchConditions: [{type: Complete, status: "True"}]
      unhealthy:
        matchFields:
        - key: status.conditions[?(@.type=="Failed")].status
          operator: In
          values: ["True"]
          messagePath: status.conditions[?(@.type=="Failed")].message
  template:
    apiVersion: batch/v1
    kind: Job
    metadata:
      generateName: $(workload.metadata.name)$-test-
      annotations: {image: $(source.revision)$}
    spec:
      backoffLimit: 0
      activeDeadlineSeconds: 20
      template:
        metadata:
          annotations: {kwok.kontinue.dev/run-for: $(params.runFor)$}
        spec:
          restartPolicy: Never
          containers:
          - name: test
            image: registry.example/tester
            command: [make, test]
            env: [{name: KWOK_EXIT_CODE, value: $(params.exit)$}, {name: EDITION, value: "@E:test@"}]`,
	"go": `
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: @P@-go}
spec:
  params: [{name: loops, default: 1}]
  goTemplate: |
    {{- range until (int .params.loops) }}{{ range until (int $.params.loops) }}{{ end }}{{ end }}
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: {{ .workload.metadata.name }}-go}
    data:
      image: {{ .image | quote }}
      edition: "@E:go@"`,
	"cwidget": `
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: @P@-cwidget}
spec:
  configPath: spec.value
  params: [{name: tick, default: k0}]
  observedCompletion:
    succeeded: {key: status.ready, value: true}
    failed: {key: status.ready, value: false}
  progressDeadline: 15s
  template:
    apiVersion: robustness.kontinue.dev/v1
    kind: Widget
    metadata: {name: $(workload.metadata.name)$-w}
    spec: {value: $(params.tick)$, edition: "@E:cwidget@"}`,
	"cfinal": `
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: @P@-cfinal}
spec:
  goTemplate: |
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: {{ .workload.metadata.name }}-final}
    data:
      tick: {{ printf "%v" .config | quote }}
      edition: "@E:cfinal@"`,
	"run": `
apiVersion: carto.run/v1alpha1
kind: ClusterConfigTemplate
metadata: {name: @P@-run}
spec:
  runnable: true
  configPath: spec.value
  observedCompletion:
    succeeded: {key: status.ready, value: true}
    failed: {key: status.ready, value: false}
  template:
    apiVersion: robustness.kontinue.dev/v1
    kind: Widget
    metadata: {name: $(workload.metadata.name)$-run}
    spec: {value: $(workload.spec.source.git.ref.commit)$, edition: "@E:run@"}`,
	"rnote": `
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: @P@-rnote}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-rnote}
    data: {run: $(config)$, edition: "@E:rnote@"}`,
	"hog": `
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: @P@-hog}
spec:
  params: [{name: loops, default: 1}]
  goTemplate: |
    {{- range until (int .params.loops) }}{{ range until (int $.params.loops) }}{{ end }}{{ end }}
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: {{ .workload.metadata.name }}-hog}
    data: {edition: "@E:hog@"}`,
	"vimg": `
apiVersion: carto.run/v1alpha1
kind: ClusterImageTemplate
metadata: {name: @P@-vimg}
spec:
  params: [{name: image, default: none}]
  imagePath: data.image
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-vimg}
    data: {image: $(params.image)$, edition: "@E:vimg@"}`,
	"vdeploy": `
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: @P@-vdeploy}
spec:
  params: [{name: note, default: none}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(workload.metadata.name)$-vdeploy}
    data: {image: $(images.app.image)$, note: $(params.note)$, edition: "@E:vdeploy@"}`,
	"dsrc": `
apiVersion: carto.run/v1alpha1
kind: ClusterSourceTemplate
metadata: {name: @P@-dsrc}
spec:
  urlPath: data.url
  revisionPath: data.revision
  params: [{name: image, default: registry.example/app:v0}, {name: revision, default: r0}]
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-manifest}
    data: {url: $(params.image)$, revision: $(params.revision)$, edition: "@E:dsrc@"}`,
	"deploy": `
apiVersion: carto.run/v1alpha1
kind: ClusterDeploymentTemplate
metadata: {name: @P@-deploy}
spec:
  observedCompletion:
    succeeded:
    - {key: status.updatedReplicas, value: 1}
    - {key: status.replicas, value: 1}
    - {key: status.availableReplicas, value: 1}
    failed:
      key: 'status.conditions[?(@.type=="Progressing")].reason'
      value: ProgressDeadlineExceeded
  progressDeadline: 20s
  goTemplate: |
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: {{ .deliverable.metadata.name }}-app}
    spec:
      replicas: 1
      minReadySeconds: 2
      progressDeadlineSeconds: 6
      strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
      selector: {matchLabels: {app: {{ .deliverable.metadata.name }}-app}}
      template:
        metadata:
          labels: {app: {{ .deliverable.metadata.name }}-app}
          annotations: {revision: {{ .deployment.revision | quote }}, edition: "@E:deploy@"}
        spec:
          containers:
          - name: app
            image: {{ .deployment.url | quote }}
            env: [{name: KWOK_EXIT_CODE, value: "{{ if contains "crash" .deployment.url }}1{{ else }}0{{ end }}"}]`,
	"notify": `
apiVersion: carto.run/v1alpha1
kind: ClusterTemplate
metadata: {name: @P@-notify}
spec:
  template:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: $(deliverable.metadata.name)$-notify}
    data: {revision: $(source.revision)$, edition: "@E:notify@"}`,
}

// chainNames are the chains, in the order the platform applies them.
var chainNames = []string{"main", "apps", "canary", "deliver", "runs", "hogs", "verified"}

// chainDocs are the chains; @POF@ is the main chain's pauseOnFailure, @VKEY@
// the verified chain's public key (the run's registry: registry_test.go).
var chainDocs = map[string]string{
	"main": `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: @P@-main}
spec:
  selector: {robustness.kontinue.dev/chain: @P@-main}
  rollout:
    waves:
    - selector: {matchLabels: {robustness.kontinue.dev/wave: canary}}
    pauseOnFailure: @POF@
  resources:
  - name: src
    templateRef: {kind: ClusterSourceTemplate, name: @P@-src}
  - name: cfg
    templateRef:
      kind: ClusterConfigTemplate
      options:
      - name: @P@-cfg-a
        selector:
          matchFields: [{key: 'spec.params[?(@.name=="variant")].value', operator: In, values: [a]}]
      - name: @P@-cfg-b
        selector:
          matchFields: [{key: 'spec.params[?(@.name=="variant")].value', operator: In, values: [b]}]
    sources: [{name: source, resource: src}]
  - name: widget
    templateRef: {kind: ClusterConfigTemplate, name: @P@-widget}
    configs: [{name: config, resource: cfg}]
  - name: echo
    templateRef: {kind: ClusterTemplate, name: @P@-echo}
    configs: [{name: config, resource: widget}]`,
	"apps": `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: @P@-apps}
spec:
  selector: {robustness.kontinue.dev/chain: @P@-apps}
  resources:
  - name: src
    templateRef: {kind: ClusterSourceTemplate, name: @P@-src}
  - name: yaml
    templateRef: {kind: ClusterTemplate, name: @P@-yaml}
  - name: app
    templateRef:
      kind: ClusterTemplate
      options:
      - name: @P@-app-hr
        selector:
          matchFields: [{key: 'spec.params[?(@.name=="rule")].value', operator: In, values: [health]}]
      - name: @P@-app-oc
        selector:
          matchFields: [{key: 'spec.params[?(@.name=="rule")].value', operator: In, values: [completion]}]
  - name: test
    templateRef: {kind: ClusterImageTemplate, name: @P@-test}
    sources: [{name: source, resource: src}]
  - name: go
    templateRef: {kind: ClusterTemplate, name: @P@-go}
    images: [{name: image, resource: test}]`,
	"canary": `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: @P@-canary}
spec:
  selector: {robustness.kontinue.dev/chain: @P@-canary}
  resources:
  - name: cwidget
    templateRef: {kind: ClusterConfigTemplate, name: @P@-cwidget}
  - name: cfinal
    templateRef: {kind: ClusterTemplate, name: @P@-cfinal}
    configs: [{name: config, resource: cwidget}]`,
	"runs": `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: @P@-runs}
spec:
  selector: {robustness.kontinue.dev/chain: @P@-runs}
  resources:
  - name: run
    templateRef: {kind: ClusterConfigTemplate, name: @P@-run}
  - name: rnote
    templateRef: {kind: ClusterTemplate, name: @P@-rnote}
    configs: [{name: config, resource: run}]`,
	"hogs": `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: @P@-hogs}
spec:
  selector: {robustness.kontinue.dev/chain: @P@-hogs}
  resources:
  - name: hog
    templateRef: {kind: ClusterTemplate, name: @P@-hog}`,
	"verified": `
apiVersion: carto.run/v1alpha1
kind: ClusterSupplyChain
metadata: {name: @P@-verified}
spec:
  selector: {robustness.kontinue.dev/chain: @P@-verified}
  resources:
  - name: vimg
    templateRef: {kind: ClusterImageTemplate, name: @P@-vimg}
  - name: vdeploy
    templateRef: {kind: ClusterTemplate, name: @P@-vdeploy}
    images: [{name: app, resource: vimg}]
    verify:
      images: [{name: app, keys: [{publicKey: @VKEY@}]}]`,
	"deliver": `
apiVersion: carto.run/v1alpha1
kind: ClusterDelivery
metadata: {name: @P@-deliver}
spec:
  selector: {robustness.kontinue.dev/chain: @P@-deliver}
  resources:
  - name: dsrc
    templateRef: {kind: ClusterSourceTemplate, name: @P@-dsrc}
  - name: deploy
    templateRef: {kind: ClusterDeploymentTemplate, name: @P@-deploy}
    deployment: {resource: dsrc}
  - name: notify
    templateRef: {kind: ClusterTemplate, name: @P@-notify}
    sources: [{name: deployed, resource: deploy}]`,
}

// chainTemplates are the templates each chain's steps name.
var chainTemplates = map[string][]string{
	"main":     {"src", "cfg-a", "cfg-b", "widget", "echo"},
	"apps":     {"src", "yaml", "app-hr", "app-oc", "test", "go"},
	"deliver":  {"dsrc", "deploy", "notify"},
	"canary":   {"cwidget", "cfinal"},
	"runs":     {"run", "rnote"},    // the lane's (lane_test.go)
	"hogs":     {"hog"},             // the lane's
	"verified": {"vimg", "vdeploy"}, // the lane's
}

// verifyRule: what invariant 9 knows of the verified chain and the run's
// registry.
func verifyRule(prefix string, digests map[string]string) check.VerifyRule {
	return check.VerifyRule{Template: prefix + "-vdeploy", Step: "vdeploy", Path: "data.image", Digests: digests}
}

// chainsOfKind: the chains an owner kind selects.
var chainsOfKind = map[string][]string{
	"Workload":    {"main", "apps"},
	"Deliverable": {"deliver"},
}

// templateNames are the catalog's template names, sorted.
func templateNames() []string {
	var out []string
	for n := range catalogDocs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// render fills a catalog document in for a run.
func render(doc, prefix string, edition int, pauseOnFailure bool) string {
	r := strings.NewReplacer("@P@", prefix, "@POF@", strconv.FormatBool(pauseOnFailure))
	out := r.Replace(doc)
	// @E:<name>@ → the edition.
	for {
		i := strings.Index(out, "@E:")
		if i < 0 {
			break
		}
		j := strings.Index(out[i+3:], "@")
		out = out[:i] + "e" + strconv.Itoa(edition) + out[i+3+j+1:]
	}
	return out
}

// What the checks know of the catalog.

// gatedTemplates hold each input set until it ends (a success rule, or a
// healthRule with shadow: true).
func gatedTemplates(prefix string) func(string) bool {
	g := map[string]bool{}
	for _, n := range []string{"widget", "cwidget", "app-hr", "app-oc", "deploy"} {
		g[prefix+"-"+n] = true
	}
	return func(t string) bool { return g[t] }
}

func valueRules(prefix string) []check.ValueRule {
	return []check.ValueRule{
		{Template: prefix + "-widget", Param: "value", Path: "spec.value"},
		{Template: prefix + "-echo", Param: "value", Path: "spec.value", OwnerReady: true},
		{Template: prefix + "-cwidget", Param: "tick", Path: "spec.value"},
	}
}

func outputPaths(prefix string) check.Outputs {
	src := map[string]string{"url": "data.url", "revision": "data.revision"}
	cfg := map[string]string{"config": "data.revision"}
	return check.Outputs{
		prefix + "-src": src, prefix + "-dsrc": src,
		prefix + "-cfg-a": cfg, prefix + "-cfg-b": cfg,
	}
}
