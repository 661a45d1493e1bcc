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
