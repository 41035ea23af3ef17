{{- define "llmkube.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "llmkube.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "llmkube.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "llmkube.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "llmkube.selectorLabels" -}}
app.kubernetes.io/name: {{ include "llmkube.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "llmkube.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "llmkube.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Leader election: explicit true/false wins; unset means on with more than one replica. */}}
{{- define "llmkube.leaderElection" -}}
{{- if kindIs "invalid" .Values.leaderElection.enabled }}
{{- if gt (int .Values.replicas) 1 }}true{{ else }}false{{ end }}
{{- else }}
{{- if .Values.leaderElection.enabled }}true{{ else }}false{{ end }}
{{- end }}
{{- end }}

{{- define "llmkube.webhookSecret" -}}
{{- if .Values.webhook.certManager.enabled }}
{{- printf "%s-webhook-cert" (include "llmkube.fullname" .) }}
{{- else }}
{{- required "webhook.certSecretName is required when webhook.certManager.enabled is false" .Values.webhook.certSecretName }}
{{- end }}
{{- end }}

{{/* Scrape annotations: explicit true/false wins; unset means on without a ServiceMonitor. */}}
{{- define "llmkube.scrapeAnnotations" -}}
{{- if kindIs "invalid" .Values.metrics.scrapeAnnotations }}
{{- if .Values.metrics.serviceMonitor.enabled }}false{{ else }}true{{ end }}
{{- else }}
{{- if .Values.metrics.scrapeAnnotations }}true{{ else }}false{{ end }}
{{- end }}
{{- end }}
