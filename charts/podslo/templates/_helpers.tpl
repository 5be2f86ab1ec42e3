{{/*
Names. fullname is <release>-podslo, or the release name alone when it
already contains "podslo", so that release "podslo" gives podslo-exporter
and podslo-agent, the names of deploy/.
*/}}
{{- define "podslo.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "podslo.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* 50 + "-exporter" stays within 63, the limit of a label value. */}}
{{- define "podslo.exporter.fullname" -}}
{{- printf "%s-exporter" (include "podslo.fullname" .) -}}
{{- end -}}

{{- define "podslo.agent.fullname" -}}
{{- printf "%s-agent" (include "podslo.fullname" .) -}}
{{- end -}}

{{- define "podslo.exporter.serviceAccountName" -}}
{{- if .Values.exporter.serviceAccount.create -}}
{{- default (include "podslo.exporter.fullname" .) .Values.exporter.serviceAccount.name -}}
{{- else -}}
{{- required "exporter.serviceAccount.name: name the existing service account when exporter.serviceAccount.create is false" .Values.exporter.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "podslo.agent.serviceAccountName" -}}
{{- if .Values.agent.serviceAccount.create -}}
{{- default (include "podslo.agent.fullname" .) .Values.agent.serviceAccount.name -}}
{{- else -}}
{{- required "agent.serviceAccount.name: name the existing service account when agent.serviceAccount.create is false" .Values.agent.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; component labels come on top. */}}
{{- define "podslo.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "podslo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "podslo.exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "podslo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: exporter
{{- end -}}

{{- define "podslo.agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "podslo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "podslo.exporter.labels" -}}
{{ include "podslo.labels" . }}
app.kubernetes.io/component: exporter
{{- end -}}

{{- define "podslo.agent.labels" -}}
{{ include "podslo.labels" . }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "podslo.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
podslo.gomemlimit: 90% of a memory quantity, in bytes. GOMEMLIMIT takes
bytes, not Kubernetes quantities, and a resourceFieldRef can give the limit
but not a share of it. The schema admits only what this parses; fail is
for a value that passed some other way.
*/}}
{{- define "podslo.gomemlimit" -}}
{{- $q := toString .quantity -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$" $q) -}}
{{- fail (printf "%s: %q is not a memory quantity this chart understands (a number with an optional suffix Ki, Mi, Gi, Ti, k, M, G or T)" .path $q) -}}
{{- end -}}
{{- $num := regexReplaceAll "[A-Za-z]+$" $q "" -}}
{{- $unit := regexReplaceAll "^[0-9.]+" $q "" -}}
{{- $mult := get (dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776) $unit -}}
{{- if contains "." $num -}}
{{- printf "%d" (int64 (floor (divf (mulf (float64 $num) $mult 9) 10))) -}}
{{- else -}}
{{- printf "%d" (div (mul (int64 $num) $mult 9) 10) -}}
{{- end -}}
{{- end -}}

{{/* Whether the metrics ports ask for basic auth. */}}
{{- define "podslo.basicAuth" -}}
{{- if .Values.web.basicAuth.users }}true{{ end -}}
{{- end -}}

{{/* The web config's mount, shared by the exporter and the agent. */}}
{{- define "podslo.webConfigured" -}}
{{- if or .Values.web.tls.enabled .Values.web.basicAuth.users }}true{{ end -}}
{{- end -}}

{{- define "podslo.webArgs" -}}
{{- if include "podslo.webConfigured" . }}
- --web.config.file=/etc/podslo/web/web-config.yml
{{- end }}
{{- end -}}

{{- define "podslo.webVolumeMounts" -}}
{{- if include "podslo.webConfigured" . }}
- name: web-config
  mountPath: /etc/podslo/web
  readOnly: true
{{- end }}
{{- if .Values.web.tls.enabled }}
- name: tls
  mountPath: /etc/podslo/tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "podslo.webVolumes" -}}
{{- if include "podslo.webConfigured" . }}
- name: web-config
  secret:
    secretName: {{ include "podslo.fullname" . }}-web-config
{{- end }}
{{- if .Values.web.tls.enabled }}
- name: tls
  secret:
    secretName: {{ .Values.web.tls.secretName }}
{{- end }}
{{- end -}}

{{/*
Probes on /healthz and /readyz. Basic auth covers every path, and a
kubelet probe carrying a password would put it in the pod spec: with users
set, the probes only check the port.
*/}}
{{- define "podslo.probes" -}}
{{- if include "podslo.basicAuth" . }}
readinessProbe:
  tcpSocket: {port: metrics}
livenessProbe:
  tcpSocket: {port: metrics}
{{- else }}
{{- $scheme := ternary "HTTPS" "HTTP" .Values.web.tls.enabled }}
readinessProbe:
  httpGet: {path: /readyz, port: metrics, scheme: {{ $scheme }}}
livenessProbe:
  httpGet: {path: /healthz, port: metrics, scheme: {{ $scheme }}}
{{- end }}
{{- end -}}

{{/* The scrape settings of a ServiceMonitor or PodMonitor endpoint. */}}
{{- define "podslo.scrapeSecurity" -}}
{{- $root := .root -}}
{{- if $root.Values.web.tls.enabled }}
scheme: https
tlsConfig:
{{- if .tlsConfig }}
  {{- toYaml .tlsConfig | nindent 2 }}
{{- else }}
  ca:
    secret:
      name: {{ $root.Values.web.tls.secretName }}
      key: ca.crt
  serverName: {{ default (printf "%s.%s.svc" (include "podslo.exporter.fullname" $root) $root.Release.Namespace) $root.Values.web.tls.serverName }}
{{- end }}
{{- else }}
scheme: http
{{- end }}
{{- if include "podslo.basicAuth" $root }}
basicAuth:
  username:
    name: {{ $root.Values.web.basicAuth.scrapeSecretName }}
    key: username
  password:
    name: {{ $root.Values.web.basicAuth.scrapeSecretName }}
    key: password
{{- end }}
{{- end -}}

{{/*
podslo.checks fails the render on settings that would deploy something
broken or silently open.
*/}}
{{- define "podslo.checks" -}}
{{- include "podslo.exporter.checks" . -}}
{{- if and .Values.web.tls.enabled (not .Values.web.tls.secretName) -}}
{{- fail "web.tls.secretName: name the kubernetes.io/tls Secret to serve when web.tls.enabled is true" -}}
{{- end -}}
{{- if and .Values.web.basicAuth.users (not .Values.web.basicAuth.scrapeSecretName) (or .Values.exporter.serviceMonitor.enabled (and .Values.agent.enabled .Values.agent.podMonitor.enabled)) -}}
{{- fail "web.basicAuth.scrapeSecretName: name the Secret (keys username, password) Prometheus presents when web.basicAuth.users is set" -}}
{{- end -}}
{{- $np := .Values.exporter.networkPolicies -}}
{{- if and (not $np.enabled) (include "podslo.networkPluginProfile" . | trim) -}}
{{- fail "exporter.networkPolicies.profile: set, but exporter.networkPolicies.enabled is false, so no policy would be judged against it; enable NetworkPolicies or remove the profile" -}}
{{- end -}}
{{- if kindIs "map" $np.profile -}}
{{- with $np.profile.unimplemented -}}
{{- /* netpolicy.Table's versions; charts/networkpolicies_test.go checks each. */ -}}
{{- $versions := dict "ingress" 3 "podSelector" 3 "namespaceSelector" 3 "ports" 3 "namedPorts" 3 "egress" 8 "ipBlock" 8 "ipv6" 9 "podAndNamespaceSelector" 11 "sctp" 12 "endPort" 21 "namespaceByName" 21 -}}
{{- $max := int (trimPrefix "1." (toString $np.profile.maxVersion)) -}}
{{- range . -}}
{{- if gt (int (get $versions .)) $max -}}
{{- fail (printf "exporter.networkPolicies.profile.unimplemented: %s (1.%d) is newer than maxVersion %s: a plugin cannot know it without implementing it, and maxVersion already rules it out" . (int (get $versions .)) $np.profile.maxVersion) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (not $np.enabled) $np.events -}}
{{- fail "exporter.networkPolicies.events: true, but exporter.networkPolicies.enabled is false, so there are no policies to report on" -}}
{{- end -}}
{{- if and (not $np.enabled) $np.targetPods -}}
{{- fail "exporter.networkPolicies.targetPods: true, but exporter.networkPolicies.enabled is false, so there are no policies to count pods for" -}}
{{- end -}}
{{- end -}}

{{/* Who scrapes, as a NetworkPolicy peer. */}}
{{- define "podslo.prometheusPeer" -}}
{{- $p := .Values.networkPolicy.prometheus -}}
{{- if not (or $p.namespaceSelector $p.podSelector) -}}
{{- fail "networkPolicy.prometheus: set namespaceSelector, podSelector or both, to say who scrapes" -}}
{{- end -}}
{{- with $p.namespaceSelector }}
namespaceSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $p.podSelector }}
podSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The network plugin profile's file, from exporter.networkPolicies.profile:
the profile as YAML, or a string as it is (helm --set-file). Empty without
one. The exporter parses it strictly when it starts.
*/}}
{{- define "podslo.networkPluginProfile" -}}
{{- with .Values.exporter.networkPolicies.profile -}}
{{- if kindIs "string" . -}}
{{- . -}}
{{- else -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "podslo.networkPluginProfileDir" -}}/etc/podslo/network-plugin-profile{{- end -}}

{{/* The exporter's NetworkPolicy flags; none with the defaults. */}}
{{- define "podslo.networkPolicyArgs" -}}
{{- $np := .Values.exporter.networkPolicies -}}
{{- if not $np.enabled }}
- --networkpolicies=false
{{- end }}
{{- if include "podslo.networkPluginProfile" . | trim }}
- --network-plugin-profile={{ include "podslo.networkPluginProfileDir" . }}/profile.yaml
{{- end }}
{{- if $np.targetPods }}
- --networkpolicy-target-pods
{{- end }}
{{- if $np.events }}
- --networkpolicy-events
{{- end }}
{{- end -}}

{{/*
The exporter's install mode (docs/scaling.md): "perNode" for the per-node
DaemonSet, "sharded" for an autosharded StatefulSet of
exporter.sharding.replicas, else "single".
*/}}
{{- define "podslo.exporter.mode" -}}
{{- if eq .Values.exporter.mode "perNode" -}}
perNode
{{- else if gt (int .Values.exporter.sharding.replicas) 1 -}}
sharded
{{- else -}}
single
{{- end -}}
{{- end -}}

{{/* The namespaces the exporter watches: the allowlist less the denylist. */}}
{{- define "podslo.exporter.watchedNamespaces" -}}
{{- $deny := .Values.exporter.namespacesDenylist | default list -}}
{{- $out := list -}}
{{- range .Values.exporter.namespaces -}}
{{- if not (has . $deny) -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
The hostPath of a per-node exporter's state: exporter.perNode.hostPath, or
one directory per release, so that two releases on a node never open the
same state.
*/}}
{{- define "podslo.exporter.hostPath" -}}
{{- default (printf "/var/lib/podslo/%s/%s" .Release.Namespace (include "podslo.exporter.fullname" .)) .Values.exporter.perNode.hostPath -}}
{{- end -}}

{{/* The exporter's scope flags (docs/scaling.md); none in the single mode. */}}
{{- define "podslo.exporter.scopeArgs" -}}
{{- with .Values.exporter.namespaces }}
- --namespaces={{ join "," . }}
{{- end }}
{{- with .Values.exporter.namespacesDenylist }}
- --namespaces-denylist={{ join "," . }}
{{- end }}
{{- $mode := include "podslo.exporter.mode" . }}
{{- if eq $mode "sharded" }}
- --pod=$(POD_NAME)
- --pod-namespace=$(POD_NAMESPACE)
{{- else if eq $mode "perNode" }}
- --node-name=$(NODE_NAME)
{{- end }}
{{- end -}}

{{/* The downward API variables the scope flags read. */}}
{{- define "podslo.exporter.scopeEnv" -}}
{{- $mode := include "podslo.exporter.mode" . }}
{{- if eq $mode "sharded" }}
# Autosharding: the shard is this pod's ordinal, the total its
# StatefulSet's replicas.
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- else if eq $mode "perNode" }}
# Per node: only the pods bound to this node.
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- end }}
{{- end -}}

{{/*
podslo.exporter.checks fails the render on install-mode values that
contradict each other (docs/scaling.md).
*/}}
{{- define "podslo.exporter.checks" -}}
{{- $e := .Values.exporter -}}
{{- $replicas := int $e.sharding.replicas -}}
{{- if and (eq $e.mode "perNode") (gt $replicas 1) -}}
{{- fail (printf "exporter.sharding.replicas: %d, but exporter.mode is perNode: each per-node exporter owns its node's pods, which are not sharded further; set replicas to 1, or mode to statefulSet to shard" $replicas) -}}
{{- end -}}
{{- if and (eq $e.mode "perNode") $e.persistence.existingClaim -}}
{{- fail "exporter.persistence.existingClaim: set, but exporter.mode is perNode, whose state is on each node's hostPath (exporter.perNode.hostPath); remove the claim" -}}
{{- end -}}
{{- if and (eq $e.mode "perNode") $e.tolerations -}}
{{- fail "exporter.tolerations: set, but exporter.mode is perNode, whose DaemonSet takes exporter.perNode.tolerations; move them there" -}}
{{- end -}}
{{- if and (gt $replicas 1) $e.persistence.existingClaim -}}
{{- fail (printf "exporter.persistence.existingClaim: set, but exporter.sharding.replicas is %d: each shard needs a state of its own, which only volumeClaimTemplates give; remove the claim" $replicas) -}}
{{- end -}}
{{- if and $e.rbac.namespaced (not $e.namespaces) -}}
{{- fail "exporter.rbac.namespaced: true, but exporter.namespaces is empty: Roles can only be given for an allowlist of namespaces; list them, or set namespaced to false for the ClusterRole" -}}
{{- end -}}
{{- if and $e.namespaces (not (include "podslo.exporter.watchedNamespaces" . | fromJsonArray)) -}}
{{- fail (printf "exporter.namespacesDenylist: %s removes every namespace of exporter.namespaces %s: nothing would be watched" (join "," $e.namespacesDenylist) (join "," $e.namespaces)) -}}
{{- end -}}
{{- range $e.extraArgs -}}
{{- $flag := regexReplaceAll "=.*$" . "" -}}
{{- if has $flag (list "--namespaces" "--namespaces-denylist" "--node-name" "--shard" "--total-shards" "--pod" "--pod-namespace") -}}
{{- fail (printf "exporter.extraArgs: %s is set by the chart's install mode (exporter.mode, exporter.namespaces, exporter.namespacesDenylist, exporter.sharding, exporter.perNode), whose RBAC and volumes follow it; use those values instead" $flag) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /*
podslo.operatorAPI is "true" when the chart renders the Prometheus
Operator's kind .kind (ServiceMonitor, PodMonitor, PrometheusRule) of
monitoring.coreos.com/v1: with prometheusOperator "auto", only when the
cluster serves it, so that an install without the operator's CRDs does not
fail with `no matches for kind`. Each object's own setting still has to
enable it. Call with (dict "root" $ "kind" "ServiceMonitor").
*/}}
{{- define "podslo.operatorAPI" -}}
{{- $mode := toString .root.Values.prometheusOperator -}}
{{- if or (eq $mode "true") (and (eq $mode "auto") (.root.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" .kind))) -}}
true
{{- end -}}
{{- end -}}
