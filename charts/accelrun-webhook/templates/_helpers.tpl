{{/* Names, labels and the version switches of the chart. */}}

{{- define "accelrun-webhook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "accelrun-webhook.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "accelrun-webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "accelrun-webhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "accelrun-webhook.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "accelrun-webhook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: admission-webhook
{{- end }}

{{- define "accelrun-webhook.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "accelrun-webhook.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret with tls.crt and tls.key that the pods mount. */}}
{{- define "accelrun-webhook.tlsSecretName" -}}
{{- if eq .Values.tls.mode "secret" }}
{{- required "tls.secret.name is required with tls.mode=secret" .Values.tls.secret.name }}
{{- else }}
{{- printf "%s-tls" (include "accelrun-webhook.fullname" .) }}
{{- end }}
{{- end }}

{{/* The DNS names the API server may dial. */}}
{{- define "accelrun-webhook.dnsNames" -}}
{{- $svc := include "accelrun-webhook.fullname" . -}}
- {{ printf "%s.%s.svc" $svc .Release.Namespace }}
- {{ printf "%s.%s.svc.%s" $svc .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{/*
"true" when matchConditions are rendered: forced by the value, or on
Kubernetes >= 1.27 (field added in 1.27, on by default from 1.28).
*/}}
{{- define "accelrun-webhook.matchConditions" -}}
{{- $v := toString .Values.webhook.matchConditions }}
{{- if eq $v "true" }}true
{{- else if eq $v "false" }}false
{{- else if semverCompare ">=1.27-0" .Capabilities.KubeVersion.Version }}true
{{- else }}false
{{- end }}
{{- end }}

{{- define "accelrun-webhook.jobNameLabel" -}}
{{- if .Values.webhook.jobNameLabel }}
{{- .Values.webhook.jobNameLabel }}
{{- else if semverCompare ">=1.27-0" .Capabilities.KubeVersion.Version }}
{{- "batch.kubernetes.io/job-name" }}
{{- else }}
{{- "job-name" }}
{{- end }}
{{- end }}

{{/*
policy/v1 when the API server serves it (GA in 1.21); policy/v1beta1 on a
v1.20 server.  Offline renders list both API versions, so the Kubernetes
version decides there too.
*/}}
{{- define "accelrun-webhook.pdbApiVersion" -}}
{{- if and (.Capabilities.APIVersions.Has "policy/v1") (semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version) }}
{{- "policy/v1" }}
{{- else }}
{{- "policy/v1beta1" }}
{{- end }}
{{- end }}
