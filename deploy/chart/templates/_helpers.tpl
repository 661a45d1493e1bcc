{{/*
The dashboard's ServiceAccount as namespace/name: a bare name is in the
release namespace.
*/}}
{{- define "kontinue.dashboardServiceAccount" -}}
{{- $sa := required "dashboard.serviceAccount: the dashboard reads with that account's rights" .Values.dashboard.serviceAccount -}}
{{- if contains "/" $sa -}}
{{- $sa -}}
{{- else -}}
{{- printf "%s/%s" .Release.Namespace $sa -}}
{{- end -}}
{{- end -}}

{{/*
The labels every object carries (Helm's and Kubernetes' recommended ones).
Selectors use app.kubernetes.io/name alone, which never changes on upgrade.
*/}}
{{- define "kontinue.labels" -}}
app.kubernetes.io/name: kontinue
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: kontinue
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The container image: repository, then :tag (default: the chart's
appVersion, none when only a digest is given), then @digest when set (a
release pins it: the tag is for people, the digest is what runs).
*/}}
{{- define "kontinue.image" -}}
{{- $tag := .Values.image.tag -}}
{{- if and (not $tag) (not .Values.image.digest) -}}
{{- $tag = .Chart.AppVersion -}}
{{- end -}}
{{- .Values.image.repository -}}
{{- with $tag }}:{{ . }}{{ end -}}
{{- with .Values.image.digest }}@{{ . }}{{ end -}}
{{- end -}}

{{/*
Sharding (docs/operations.md#sharding): the Deployment kontinue serves the
owners without the label kontinue.dev/shard (the default shard), and one
Deployment kontinue-shard-<name> per name of sharding.shards serves the
owners labelled with it.
*/}}
{{- define "kontinue.checkSharding" -}}
{{- if and (not .Values.sharding.defaultShard) (not .Values.sharding.shards) -}}
{{- fail "sharding.defaultShard: false needs sharding.shards: no replica would serve any owner" -}}
{{- end -}}
{{- if and .Values.dashboard.enabled (not .Values.sharding.defaultShard) -}}
{{- fail "dashboard.enabled needs sharding.defaultShard: the Deployment kontinue serves the dashboard" -}}
{{- end -}}
{{- end -}}

{{/*
The name of a shard's objects (Deployment, PodDisruptionBudget): kontinue
for the default shard ("").
*/}}
{{- define "kontinue.shardName" -}}
{{- if . -}}kontinue-shard-{{ . }}{{- else -}}kontinue{{- end -}}
{{- end -}}

{{/*
The selector of a shard's Pods. The default shard's is the one the
Deployment kontinue always had (a Deployment's selector cannot change);
a shard's Pods carry another app.kubernetes.io/name so that no selector
picks Pods of two Deployments.
*/}}
{{- define "kontinue.selectorLabels" -}}
{{- if . -}}
app.kubernetes.io/name: kontinue-shard
kontinue.dev/controller-shard: {{ . | quote }}
{{- else -}}
app.kubernetes.io/name: kontinue
{{- end -}}
{{- end -}}

{{/*
The labels every controller Pod carries when there are shards: the metrics
Service selects them all.
*/}}
{{- define "kontinue.controllerLabels" -}}
app.kubernetes.io/part-of: kontinue
app.kubernetes.io/component: controller
{{- end -}}

{{/*
A Deployment of the controller for a shard: dict "root" (the chart's
context) and "shard" ("" for the default shard).
*/}}
{{- define "kontinue.deployment" -}}
{{- $root := .root -}}
{{- $v := .root.Values -}}
{{- $shard := .shard }}
# Replicas: one leads (holds the Lease) and runs the controllers, the others
# wait and take over when it goes.
{{- with $shard }}
# Shard {{ . }}: the owners labelled kontinue.dev/shard={{ . }}, and what they
# stamped (Lease {{ $v.leaderElection.id }}-shard-{{ . }}).
{{- end }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "kontinue.shardName" $shard }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "kontinue.labels" $root | nindent 4 }}
    {{- with $shard }}
    kontinue.dev/controller-shard: {{ . | quote }}
    {{- end }}
spec:
  replicas: {{ $v.replicas }}
  selector:
    matchLabels:
      {{- include "kontinue.selectorLabels" $shard | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "kontinue.selectorLabels" $shard | nindent 8 }}
        {{- if $v.sharding.shards }}
        {{- include "kontinue.controllerLabels" $root | nindent 8 }}
        {{- end }}
      {{- with $v.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ $v.serviceAccount.name }}
      {{- with $v.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      # The shutdown grace period plus 15 s to release the Lease.
      terminationGracePeriodSeconds: {{ add (include "kontinue.seconds" $v.shutdownGracePeriod) 15 }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        {{- if $v.attestation.keySecret }}
        # The signing key's file is the group's (0440), not the world's.
        fsGroup: 65532
        {{- end }}
        seccompProfile:
          type: RuntimeDefault
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm:
              topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  {{- include "kontinue.selectorLabels" $shard | nindent 18 }}
      containers:
      - name: kontinue
        image: {{ include "kontinue.image" $root }}
        imagePullPolicy: {{ $v.image.pullPolicy }}
        args:
        - controller
        {{- with $shard }}
        - --shard={{ . }}
        {{- end }}
        {{- if $v.leaderElection.enabled }}
        - --leader-elect
        - --leader-election-id={{ $v.leaderElection.id }}
        {{- end }}
        {{- if $v.metrics.enabled }}
        - --metrics-bind-address=:{{ $v.metrics.port }}
        {{- else }}
        - --metrics-bind-address=0
        {{- end }}
        {{- if and $v.dashboard.enabled (not $shard) }}
        - --dashboard-bind-address=:{{ $v.dashboard.port }}
        - --dashboard-service-account={{ include "kontinue.dashboardServiceAccount" $root }}
        {{- end }}
        - --health-probe-bind-address=:8081
        - --shutdown-grace-period={{ $v.shutdownGracePeriod }}
        - --workers={{ $v.workers }}
        {{- if $v.kstatusConditions }}
        - --kstatus-conditions
        {{- end }}
        - --log-format={{ $v.logFormat }}
        {{- with $v.logLevel }}
        - --log-level={{ . }}
        {{- end }}
        {{- if $v.attestation.keySecret }}
        - --attestation-key=/etc/kontinue/attestation/{{ $v.attestation.secretKey }}
        {{- end }}
        {{- range $v.extraArgs }}
        - {{ . }}
        {{- end }}
        env:
        # The Go runtime keeps the heap under the container's memory limit.
        - name: GOMEMLIMIT
          valueFrom:
            resourceFieldRef:
              resource: limits.memory
        ports:
        {{- if $v.metrics.enabled }}
        - name: metrics
          containerPort: {{ $v.metrics.port }}
          protocol: TCP
        {{- end }}
        {{- if and $v.dashboard.enabled (not $shard) }}
        - name: dashboard
          containerPort: {{ $v.dashboard.port }}
          protocol: TCP
        {{- end }}
        - name: probes
          containerPort: 8081
          protocol: TCP
        livenessProbe:
          httpGet:
            path: /healthz
            port: probes
          initialDelaySeconds: 5
          periodSeconds: 10
        readinessProbe:
          httpGet:
            path: /readyz
            port: probes
          periodSeconds: 5
        resources:
          {{- toYaml $v.resources | nindent 10 }}
        volumeMounts:
        # The root filesystem is read-only. Kontinue writes no file (its
        # ytt, Helm and goTemplate renderers get their input on stdin); /tmp
        # is for a library that would.
        - name: tmp
          mountPath: /tmp
        {{- if $v.attestation.keySecret }}
        - name: attestation-key
          mountPath: /etc/kontinue/attestation
          readOnly: true
        {{- end }}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          runAsNonRoot: true
          capabilities:
            drop: [ALL]
          seccompProfile:
            type: RuntimeDefault
      volumes:
      - name: tmp
        emptyDir:
          sizeLimit: 64Mi
      {{- if $v.attestation.keySecret }}
      - name: attestation-key
        secret:
          secretName: {{ $v.attestation.keySecret }}
          defaultMode: 0440
          items:
          - key: {{ $v.attestation.secretKey }}
            path: {{ $v.attestation.secretKey }}
      {{- end }}
{{- end -}}

{{/*
kontinue.seconds: a Go duration (values.schema.json's pattern: 1m30s, 45s,
1.5h, 500ms) in whole seconds, rounded up; Helm has no duration parser.
*/}}
{{- define "kontinue.seconds" -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h)" . -1 -}}
{{- $n := float64 (regexFind "^[0-9]+(\\.[0-9]+)?" .) -}}
{{- $unit := regexReplaceAll "^[0-9]+(\\.[0-9]+)?" . "" -}}
{{- $scale := get (dict "ns" 0.000000001 "us" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0) $unit -}}
{{- $total = addf $total (mulf $n $scale) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end -}}
