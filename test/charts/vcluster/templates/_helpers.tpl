{{/* Common labels: global.labels plus the fixed app/release labels. */}}
{{- define "vcluster.labels" -}}
{{- with omit (.Values.global.labels | default dict) "app" "release" }}
{{ toYaml . }}
{{- end }}
app: vcluster
release: {{ .Release.Name | quote }}
{{- end }}

{{/* Selector labels of the control plane pods. */}}
{{- define "vcluster.selectorLabels" -}}
app: vcluster
release: {{ .Release.Name | quote }}
{{- end }}

{{/* "true" if the value passed is true or "true", "" otherwise. */}}
{{- define "vcluster.enabled" -}}
{{- if eq (toString .) "true" }}true{{ end }}
{{- end }}
