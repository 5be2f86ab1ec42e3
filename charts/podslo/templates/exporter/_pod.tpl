{{/*
The exporter's pod template, shared by the StatefulSet (single and
sharded modes) and the per-node DaemonSet; it differs by mode in the
scope flags, the downward API variables and the state volume.
*/}}
{{- define "podslo.exporter.sloValues" -}}
{{- toYaml (dict "monitoring" (dict "slos" .Values.monitoring.slos "extraSLOs" .Values.monitoring.extraSLOs)) }}
{{- end -}}

{{- define "podslo.exporter.podTemplate" -}}
{{- $mode := include "podslo.exporter.mode" . -}}
metadata:
  labels:
    {{- include "podslo.exporter.selectorLabels" . | nindent 4 }}
    {{- with .Values.exporter.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- $annotations := deepCopy (.Values.exporter.podAnnotations | default dict) }}
  {{- /* The exporter reads its SLOs once: new ones restart it. */}}
  {{- $_ := set $annotations "checksum/slos" (include "podslo.exporter.sloValues" . | sha256sum) }}
  {{- with include "podslo.networkPluginProfile" . | trim }}
  {{- /* The exporter reads the profile once: a new one restarts it. */}}
  {{- $_ := set $annotations "checksum/network-plugin-profile" (sha256sum .) }}
  {{- end }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "podslo.exporter.serviceAccountName" . }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.exporter.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    {{- if eq $mode "perNode" }}
    # fsGroup does not apply to a hostPath: the init container below
    # gives the state directory to the exporter's user.
    {{- else }}
    # The state volume is writable by the exporter's group, on the volumes
    # that apply fsGroup (exporter.volumePermissions for the others).
    fsGroup: 65532
    {{- end }}
    seccompProfile:
      type: RuntimeDefault
  {{- $permissions := toString .Values.exporter.volumePermissions.enabled }}
  {{- if or (eq $permissions "true") (and (eq $permissions "auto") (eq $mode "perNode")) }}
  {{- $image := .Values.exporter.volumePermissions.image }}
  initContainers:
    # The kubelet creates a missing hostPath directory as root, mode 0755,
    # and a hostPath, like some PersistentVolumes (local, some NFS),
    # ignores fsGroup: this gives the directory (not its contents, which
    # the exporter creates itself) to uid 65532, and keeps other users of
    # the node out of it. Root only for chown and chmod.
    - name: state-permissions
      image: {{ ternary (printf "%s@%s" $image.repository $image.digest) (printf "%s:%s" $image.repository $image.tag) (ne $image.digest "") }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      command: [sh, -c, "chown 65532:65532 /var/lib/podslo && chmod 0700 /var/lib/podslo"]
      securityContext:
        runAsNonRoot: false
        runAsUser: 0
        runAsGroup: 0
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: [ALL]
          add: [CHOWN, FOWNER]
      resources:
        requests:
          cpu: 10m
          memory: 16Mi
        limits:
          memory: 16Mi
      volumeMounts:
        - name: state
          mountPath: /var/lib/podslo
  {{- end }}
  containers:
    - name: exporter
      image: {{ include "podslo.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      # The exporter's own binary: the image's /podslo also holds the
      # agent and the demo, whose code would be mapped into its memory.
      command: [/podslo-exporter]
      args:
        - exporter
        - --listen-address=:{{ .Values.exporter.port }}
        - --state-dir=/var/lib/podslo
        - --log-format={{ .Values.logFormat }}
        - --log-level={{ .Values.logLevel }}
        - --slos-values=/etc/podslo/slos/values.yaml
        {{- with include "podslo.exporter.scopeArgs" . | trim }}{{ . | nindent 8 }}{{ end }}
        {{- with include "podslo.webArgs" . | trim }}{{ . | nindent 8 }}{{ end }}
        {{- with include "podslo.networkPolicyArgs" . | trim }}{{ . | nindent 8 }}{{ end }}
        {{- range .Values.exporter.histogramLabels }}
        - --histogram-label={{ . }}
        {{- end }}
        {{- with .Values.exporter.extraArgs }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- $scopeEnv := include "podslo.exporter.scopeEnv" . | trim }}
      {{- $memory := "" }}
      {{- with .Values.exporter.resources.limits }}{{ with .memory }}{{ $memory = . }}{{ end }}{{ end }}
      {{- if or $scopeEnv $memory }}
      env:
        {{- with $scopeEnv }}{{ . | nindent 8 }}{{ end }}
        {{- with $memory }}
        # Keep the Go heap under the container limit: the heap otherwise
        # grows to twice the live data between collections. 90% leaves
        # room for what is not heap (stacks, badger's mmap'd tables).
        - name: GOMEMLIMIT
          value: {{ include "podslo.gomemlimit" (dict "quantity" . "path" "exporter.resources.limits.memory") | quote }}
        {{- end }}
      {{- end }}
      ports:
        - name: metrics
          containerPort: {{ .Values.exporter.port }}
      {{- include "podslo.probes" . | trim | nindent 6 }}
      resources:
        {{- toYaml .Values.exporter.resources | nindent 8 }}
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: [ALL]
      volumeMounts:
        - name: state
          mountPath: /var/lib/podslo
        - name: slos
          mountPath: /etc/podslo/slos
          readOnly: true
        {{- with include "podslo.webVolumeMounts" . | trim }}{{ . | nindent 8 }}{{ end }}
        {{- if include "podslo.networkPluginProfile" . | trim }}
        - name: network-plugin-profile
          mountPath: {{ include "podslo.networkPluginProfileDir" . }}
          readOnly: true
        {{- end }}
  {{- with .Values.exporter.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with (eq $mode "perNode" | ternary .Values.exporter.perNode.tolerations .Values.exporter.tolerations) }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.exporter.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumes:
    {{- if eq $mode "perNode" }}
    # The state of this node's exporter, on the node: no volume to attach
    # or move, and it goes with the node.
    - name: state
      hostPath:
        path: {{ include "podslo.exporter.hostPath" . }}
        type: DirectoryOrCreate
    {{- end }}
    {{- with .Values.exporter.persistence.existingClaim }}
    - name: state
      persistentVolumeClaim:
        claimName: {{ . }}
    {{- end }}
    - name: slos
      configMap:
        name: {{ include "podslo.exporter.fullname" . }}-slos
    {{- with include "podslo.webVolumes" . | trim }}{{ . | nindent 4 }}{{ end }}
    {{- if include "podslo.networkPluginProfile" . | trim }}
    - name: network-plugin-profile
      configMap:
        name: {{ include "podslo.exporter.fullname" . }}-network-plugin-profile
    {{- end }}
{{- end -}}
