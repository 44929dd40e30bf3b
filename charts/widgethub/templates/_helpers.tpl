{{/* The chart's name, or nameOverride. */}}
{{- define "widgethub.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' base name: the release's name when it contains the chart's. */}}
{{- define "widgethub.fullname" -}}
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

{{/* Labels of every object. */}}
{{- define "widgethub.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "widgethub.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: widgethub
{{- end }}

{{/* Labels that select the manager's pods. */}}
{{- define "widgethub.selectorLabels" -}}
app.kubernetes.io/name: {{ include "widgethub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{- define "widgethub.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "widgethub.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "widgethub.registrationNamespace" -}}
{{- default .Release.Namespace .Values.registrationNamespace }}
{{- end }}

{{/* The namespace whose ClusterProfiles register members. */}}
{{- define "widgethub.clusterProfileNamespace" -}}
{{- default (include "widgethub.registrationNamespace" .) .Values.clusterProfiles.namespace }}
{{- end }}

{{/* Where the ConfigMap of the access provider file is mounted. */}}
{{- define "widgethub.clusterProfileDir" -}}
/etc/widgethub/clusterprofiles
{{- end }}

{{/* The access provider file: the ConfigMap's one key, providers.json. */}}
{{- define "widgethub.clusterProfileProviderFile" -}}
{{- include "widgethub.clusterProfileDir" . }}/providers.json
{{- end }}

{{- define "widgethub.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The manager's arguments, in config/manager's order, then the options set. */}}
{{- define "widgethub.args" -}}
{{- $m := .Values.members }}
{{- $w := .Values.workers }}
{{- if .Values.sharding }}
- --sharding
{{- else }}
- --leader-elect={{ .Values.leaderElect }}
{{- end }}
- --registration-namespace={{ include "widgethub.registrationNamespace" . }}
- --metrics-bind-address={{ if .Values.metrics.port }}:{{ .Values.metrics.port }}{{ else }}0{{ end }}
- --health-probe-bind-address=:{{ .Values.probePort }}
{{- if not .Values.metrics.secure }}
- --metrics-secure=false
{{- else if .Values.metrics.certSecret }}
- --metrics-cert-path=/etc/widgethub/metrics-certs
{{- end }}
{{- if not (kindIs "invalid" $m.qps) }}
- --member-qps={{ $m.qps }}
{{- end }}
{{- if not (kindIs "invalid" $m.burst) }}
- --member-burst={{ $m.burst }}
{{- end }}
{{- with $m.syncTimeout }}
- --member-sync-timeout={{ . }}
{{- end }}
{{- with $m.requestTimeout }}
- --member-request-timeout={{ . }}
{{- end }}
{{- if not (kindIs "invalid" $m.maxObjects) }}
- --member-max-objects={{ $m.maxObjects }}
{{- end }}
{{- with $m.probeInterval }}
- --probe-interval={{ . }}
{{- end }}
{{- with $m.probeTimeout }}
- --probe-timeout={{ . }}
{{- end }}
{{- if not (kindIs "invalid" $m.probeFailureThreshold) }}
- --probe-failure-threshold={{ $m.probeFailureThreshold }}
{{- end }}
{{- if $m.allowCredentialPlugins }}
- --allow-credential-plugins
{{- end }}
{{- if $m.allowInsecure }}
- --allow-insecure-members
{{- end }}
{{- if $m.allowLinkLocal }}
- --allow-link-local-members
{{- end }}
{{- if not (kindIs "invalid" $w.maxConcurrentReconciles) }}
- --max-concurrent-reconciles={{ $w.maxConcurrentReconciles }}
{{- end }}
{{- if not (kindIs "invalid" $w.maxConcurrentReconcilesPerMember) }}
- --max-concurrent-reconciles-per-member={{ $w.maxConcurrentReconcilesPerMember }}
{{- end }}
{{- if .Values.clusterProfiles.providers }}
- --clusterprofile-provider-file={{ include "widgethub.clusterProfileProviderFile" . }}
{{- with .Values.clusterProfiles.namespace }}
- --clusterprofile-namespace={{ . }}
{{- end }}
{{- else if .Values.clusterProfiles.namespace }}
{{- fail "clusterProfiles.namespace needs clusterProfiles.providers: without an access provider file the manager reads no ClusterProfiles" }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* The name of the metrics port: https when secure, as config/manager names it. */}}
{{- define "widgethub.metricsPortName" -}}
{{- if .Values.metrics.secure }}https{{ else }}http{{ end }}
{{- end }}
