{{/* The release's full name: the operator's Deployment, ServiceAccount and RBAC objects. */}}
{{- define "odradek.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "odradek.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "odradek.labels" -}}
{{ include "odradek.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: odradek
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "odradek.serviceAccountName" -}}
{{- default (include "odradek.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "odradek.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "odradek.clusterImage" -}}
{{- default (include "odradek.image" .) .Values.clusterImage -}}
{{- end -}}

{{/* "true" when the operator replicas elect a leader through kopf peering. */}}
{{- define "odradek.peering" -}}
{{- if and .Values.operator.enabled (or .Values.peering.enabled (gt (int .Values.operator.replicas) 1)) -}}
true
{{- end -}}
{{- end -}}

{{- define "odradek.peeringName" -}}
{{- default (include "odradek.fullname" .) .Values.peering.name -}}
{{- end -}}

{{/* Whether the API server serves a kind of the chart's own CRDs (group/version/Kind). */}}
{{- define "odradek.served" -}}
{{- if .root.Capabilities.APIVersions.Has .gvk -}}
true
{{- end -}}
{{- end -}}
