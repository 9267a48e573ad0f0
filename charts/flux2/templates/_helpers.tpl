{{/*
The image of a controller: image:tag, or image@sha256:… when tag is a digest.
*/}}
{{- define "flux2.image" -}}
{{- if hasPrefix "sha256:" .tag -}}
{{- printf "%s@%s" .image .tag -}}
{{- else -}}
{{- printf "%s:%s" .image .tag -}}
{{- end -}}
{{- end -}}

{{/*
The labels every object of the chart carries, as the community chart sets them
(app.kubernetes.io/instance is the release namespace there too).
*/}}
{{- define "flux2.labels" -}}
app.kubernetes.io/instance: {{ .Release.Namespace | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: flux
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The address controllers send events to when notification-controller is installed.
*/}}
{{- define "flux2.eventsAddr" -}}
--events-addr=http://notification-controller.$(RUNTIME_NAMESPACE).svc.{{ .Values.clusterDomain | default "cluster.local" }}.
{{- end -}}

{{/*
A controller's ServiceAccount. Call with (dict "root" $ "name" "source-controller" "values" .Values.sourceController).
*/}}
{{- define "flux2.serviceAccount" -}}
{{- if .values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  labels:
    app.kubernetes.io/component: {{ .name }}
    {{- include "flux2.labels" .root | nindent 4 }}
  {{- with .values.serviceAccount.annotations }}
  annotations: {{ toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/*
A controller's Deployment, shaped like the community chart's: one replica, pod label app=<name>,
container "manager" with RUNTIME_NAMESPACE, probes on named ports, a read-only root file system
and emptyDir volumes. Call with a dict:
  root      the chart's context ($)
  name      the controller's name, also its Deployment's, ServiceAccount's and pod label's
  values    the controller's values (.Values.sourceController …)
  args      the controller's own arguments (a list), before the common ones
  events    whether it sends events to notification-controller (when that is installed)
  ports     the container's ports (a list of {name, containerPort})
  readiness the readiness probe's httpGet ({path, port})
  mounts    volume mounts (a list of {name, mountPath}), each an emptyDir volume
  strategy  the Deployment strategy type ("" for the default)
  grace     terminationGracePeriodSeconds
*/}}
{{- define "flux2.deployment" -}}
{{- $v := .values -}}
{{- $root := .root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  labels:
    app.kubernetes.io/component: {{ .name }}
    {{- include "flux2.labels" $root | nindent 4 }}
    control-plane: controller
    {{- with $v.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  replicas: {{ if kindIs "invalid" $v.replicas }}1{{ else }}{{ $v.replicas }}{{ end }}
  selector:
    matchLabels:
      app: {{ .name }}
  {{- with .strategy }}
  strategy:
    type: {{ . }}
  {{- end }}
  template:
    metadata:
      {{- with $v.annotations }}
      annotations: {{ toYaml . | nindent 8 }}
      {{- end }}
      labels:
        app: {{ .name }}
        {{- with $v.labels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      automountServiceAccountToken: {{ $v.serviceAccount.automount }}
      serviceAccountName: {{ .name }}
      terminationGracePeriodSeconds: {{ .grace }}
      securityContext:
        fsGroup: 1337
      {{- with $v.priorityClassName }}
      priorityClassName: {{ . | quote }}
      {{- end }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets: {{ toYaml . | nindent 8 }}
      {{- end }}
      containers:
      - name: manager
        image: {{ include "flux2.image" $v }}
        imagePullPolicy: {{ $v.imagePullPolicy | default "IfNotPresent" }}
        args:
        {{- range .args }}
        - {{ . }}
        {{- end }}
        {{- if and .events $root.Values.notificationController.create }}
        - {{ include "flux2.eventsAddr" $root }}
        {{- end }}
        - --watch-all-namespaces={{ $root.Values.watchAllNamespaces }}
        - --log-level={{ $root.Values.logLevel | default "info" }}
        - --log-encoding=json
        - --enable-leader-election
        {{- range $v.container.additionalArgs }}
        - {{ . }}
        {{- end }}
        env:
        - name: RUNTIME_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        {{- with $v.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        ports:
        {{- range .ports }}
        - name: {{ .name }}
          containerPort: {{ .containerPort }}
          protocol: TCP
        {{- end }}
        livenessProbe:
          httpGet:
            path: /healthz
            port: healthz
        readinessProbe:
          httpGet:
            path: {{ .readiness.path }}
            port: {{ .readiness.port }}
        {{- with $v.resources }}
        resources: {{ toYaml . | nindent 10 }}
        {{- end }}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            drop:
            - ALL
          readOnlyRootFilesystem: true
          runAsNonRoot: true
          runAsUser: 65534
          seccompProfile:
            type: RuntimeDefault
        volumeMounts:
        {{- range .mounts }}
        - name: {{ .name }}
          mountPath: {{ .mountPath }}
        {{- end }}
      volumes:
      {{- range .mounts }}
      - name: {{ .name }}
        emptyDir: {}
      {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector: {{ toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity: {{ toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations: {{ toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}
