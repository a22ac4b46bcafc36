{{/*
Names, labels and shared pieces of the switchboard chart.
*/}}

{{/* The chart's name: nameOverride, or the chart's own. */}}
{{- define "switchboard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/* The prefix of every object's name: fullnameOverride, or the release's name with the chart's. */}}
{{- define "switchboard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The name of one component's objects, e.g. "<fullname>-api". Called with (dict "root" $ "component" "api"). */}}
{{- define "switchboard.componentName" -}}
{{- printf "%s-%s" (include "switchboard.fullname" .root | trunc 50 | trimSuffix "-") .component -}}
{{- end }}

{{/* The chart label: name and version. */}}
{{- define "switchboard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/* The labels that select a component's pods. Called with (dict "root" $ "component" "api"). */}}
{{- define "switchboard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchboard.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The standard labels of every object. Called with (dict "root" $ "component" "api"). */}}
{{- define "switchboard.labels" -}}
helm.sh/chart: {{ include "switchboard.chart" .root }}
{{ include "switchboard.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: switchboard
{{- end }}

{{/* The container image of the API and the operator: image.repository at image.tag, or at the chart's appVersion. */}}
{{- define "switchboard.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end }}

{{/* Where the custom resources live (RESOURCE_NAMESPACE): resourceNamespace, or the release's namespace. */}}
{{- define "switchboard.resourceNamespace" -}}
{{- default .Release.Namespace .Values.resourceNamespace -}}
{{- end }}

{{/* The service accounts of the API and the operator. */}}
{{- define "switchboard.apiServiceAccountName" -}}
{{- if .Values.api.serviceAccount.create -}}
{{- default (include "switchboard.componentName" (dict "root" . "component" "api")) .Values.api.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.api.serviceAccount.name -}}
{{- end -}}
{{- end }}

{{- define "switchboard.operatorServiceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (include "switchboard.componentName" (dict "root" . "component" "operator")) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end }}

{{/* The Secret and key holding DATABASE_URL: database.existingSecret, or the Secret this chart makes from database.url. */}}
{{- define "switchboard.databaseSecretName" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else if .Values.database.url -}}
{{- include "switchboard.componentName" (dict "root" . "component" "database") -}}
{{- else -}}
{{- fail "set database.url (a postgres:// URL) or database.existingSecret (a Secret holding one): the API and the operator need a PostgreSQL 15+ server" -}}
{{- end -}}
{{- end }}

{{- define "switchboard.databaseSecretKey" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecretKey -}}
{{- else -}}
url
{{- end -}}
{{- end }}

{{/*
The Secret and key holding SWITCHBOARD_SECRET: switchboardSecret.existingSecret, or the Secret this chart makes from
switchboardSecret.value. Without either the install fails: the processes would keep the master secret in the database
it protects.
*/}}
{{- define "switchboard.switchboardSecretName" -}}
{{- if .Values.switchboardSecret.existingSecret -}}
{{- .Values.switchboardSecret.existingSecret -}}
{{- else if .Values.switchboardSecret.value -}}
{{- include "switchboard.componentName" (dict "root" . "component" "secret") -}}
{{- else -}}
{{- fail "set switchboardSecret.existingSecret (a Secret holding SWITCHBOARD_SECRET, 32 characters or more, at switchboardSecret.key) or switchboardSecret.value: without it the master secret that seals SIP passwords and signs tokens would be kept in the database it protects" -}}
{{- end -}}
{{- end }}

{{- define "switchboard.switchboardSecretKey" -}}
{{- if .Values.switchboardSecret.existingSecret -}}
{{- .Values.switchboardSecret.key -}}
{{- else -}}
secret
{{- end -}}
{{- end }}

{{/* The webhook's Service and its TLS Secret. */}}
{{- define "switchboard.webhookServiceName" -}}
{{- include "switchboard.componentName" (dict "root" . "component" "operator") -}}
{{- end }}

{{- define "switchboard.webhookSecretName" -}}
{{- include "switchboard.componentName" (dict "root" . "component" "webhook-tls") -}}
{{- end }}

{{/*
The settings both the API and the operator take (core/config.ts names), as container env entries.
*/}}
{{- define "switchboard.sharedEnv" -}}
- name: HOST
  value: "0.0.0.0"
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "switchboard.databaseSecretName" . }}
      key: {{ include "switchboard.databaseSecretKey" . }}
- name: DATABASE_POOL_SIZE
  value: {{ .Values.database.poolSize | int64 | quote }}
- name: SWITCHBOARD_DATA_DIR
  value: /data
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: SHUTDOWN_TIMEOUT_MS
  value: {{ .Values.shutdownTimeoutMs | int64 | quote }}
- name: RESOURCE_NAMESPACE
  value: {{ include "switchboard.resourceNamespace" . | quote }}
- name: RESOURCE_STORE
  value: kubernetes
- name: WEBHOOK_ALLOW_PRIVATE_NETWORKS
  value: {{ .Values.webhookAllowPrivateNetworks | quote }}
- name: SWITCHBOARD_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "switchboard.switchboardSecretName" . }}
      key: {{ include "switchboard.switchboardSecretKey" . }}
{{- end }}

{{/* The pod security context of the API and the operator. */}}
{{- define "switchboard.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser | int64 }}
runAsGroup: {{ .Values.securityContext.runAsGroup | int64 }}
fsGroup: {{ .Values.securityContext.runAsGroup | int64 }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The container security context of the API and the operator: nothing written outside /tmp and /data. */}}
{{- define "switchboard.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
{{- end }}

{{/* Kubernetes waits SHUTDOWN_TIMEOUT_MS, and 10 s more, before it kills a pod that is stopping. */}}
{{- define "switchboard.terminationGracePeriodSeconds" -}}
{{- add (div (.Values.shutdownTimeoutMs | int64) 1000) 10 -}}
{{- end }}
