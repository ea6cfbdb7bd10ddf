{{/* Names and labels shared by every component. */}}

{{- define "reprise.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "reprise.fullname" -}}
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

{{- define "reprise.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object the chart makes. Not `app.kubernetes.io/managed-by: reprise`: that marks what
the operator makes (the PodMonitor selects replay workers by it); the chart's objects are Helm's. */}}
{{- define "reprise.labels" -}}
helm.sh/chart: {{ include "reprise.chart" . }}
{{ include "reprise.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: reprise
{{- end }}

{{- define "reprise.selectorLabels" -}}
app.kubernetes.io/name: {{ include "reprise.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "reprise.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "reprise.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference: the digest wins over the tag; the tag defaults to the appVersion. */}}
{{- define "reprise.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Checks that the schema cannot express. */}}
{{- define "reprise.validate" -}}
{{- if and (gt (int .Values.operator.replicas) 1) (not .Values.operator.leaderElection) }}
{{- fail "operator.replicas > 1 needs operator.leaderElection=true: two operators without a Lease would act on the same replays" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.service.enabled" }}
{{- end }}
{{- end }}
