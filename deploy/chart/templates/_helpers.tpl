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
