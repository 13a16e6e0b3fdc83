{{/* Names and labels. */}}
{{- define "quickshake.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "quickshake.fullname" -}}
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

{{- define "quickshake.selectorLabels" -}}
app.kubernetes.io/name: {{ include "quickshake.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "quickshake.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "quickshake.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: ingress-gateway
{{- end }}

{{- define "quickshake.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "quickshake.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The CPU count: a whole number of cores, used for requests = limits and --concurrency.
Fails the render otherwise (a fractional CPU cannot get exclusive cores from the static CPU
manager, and the worker count must be a whole number).
*/}}
{{- define "quickshake.cpu" -}}
{{- $cpu := toString .Values.resources.cpu }}
{{- if not (regexMatch "^[1-9][0-9]*$" $cpu) }}
{{- fail (printf "resources.cpu must be a whole number of cores (got %q): requests = limits = cpu and --concurrency = cpu" $cpu) }}
{{- end }}
{{- $cpu }}
{{- end }}

{{- define "quickshake.configPath" -}}/etc/quickshake/config.yaml{{- end }}

{{/* The private key part of the tls_certificates entry (indented by the caller). */}}
{{- define "quickshake.privateKey" -}}
{{- $key := printf "%s/%s" .Values.tls.mountPath .Values.tls.keyFile }}
{{- $p := .Values.privateKeyProvider }}
{{- if eq $p.name "inline" }}
private_key: { filename: {{ $key }} }
{{- else if eq $p.name "cryptomb" }}
private_key_provider:
  provider_name: cryptomb
  fallback: {{ $p.cryptomb.fallback }}
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.private_key_providers.cryptomb.v3alpha.CryptoMbPrivateKeyMethodConfig
    private_key: { filename: {{ $key }} }
    poll_delay: {{ $p.cryptomb.pollDelay }}
{{- else if eq $p.name "batching" }}
{{- /* engine and batching are checked by quickshake itself (--mode validate), which knows its engines.
The block is files/batching-provider.yaml, its one copy: bench/, scripts/quickstart and the tests
fill in the same ${...} fields. */}}
{{- $block := .Files.Get "files/batching-provider.yaml" }}
{{- if not $block }}
{{- fail "files/batching-provider.yaml is missing from the chart" }}
{{- end }}
{{ $block
  | replace "${fallback}" (toString $p.batching.fallback)
  | replace "${private_key}" (printf "{ filename: %s }" $key)
  | replace "${poll_delay}" (toString $p.batching.pollDelay)
  | replace "${engine}" (toString $p.batching.engine)
  | replace "${batching}" (toString $p.batching.batching)
  | trim }}
{{- else }}
{{- fail (printf "privateKeyProvider.name must be inline, cryptomb or batching (got %q)" $p.name) }}
{{- end }}
{{- end }}

{{/* The generated Envoy v3 bootstrap (values.config empty). */}}
{{- define "quickshake.bootstrap" -}}
static_resources:
  listeners:
  - name: https
    address:
      socket_address: { address: 0.0.0.0, port_value: {{ .Values.listener.port }} }
    listener_filters:
    - name: envoy.filters.listener.tls_inspector
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector
    filter_chains:
    - transport_socket_connect_timeout: {{ .Values.listener.handshakeTimeout }}
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            {{- with .Values.listener.alpnProtocols }}
            alpn_protocols: {{ toJson . }}
            {{- end }}
            tls_certificates:
            - certificate_chain: { filename: {{ printf "%s/%s" .Values.tls.mountPath .Values.tls.certFile }} }
              {{- include "quickshake.privateKey" . | trim | nindent 14 }}
              {{- if .Values.tls.watch }}
              # Kubernetes updates a Secret volume by swapping its ..data symlink: watching the
              # directory reloads the certificate and key without a restart.
              watched_directory: { path: {{ .Values.tls.mountPath }} }
              {{- end }}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {{ .Values.listener.statPrefix }}
          {{- if .Values.accessLog }}
          access_log:
          - name: envoy.access_loggers.stdout
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog
          {{- end }}
          route_config:
            virtual_hosts:
            - name: default
              domains: ["*"]
              routes:
              - match: { prefix: / }
                direct_response:
                  status: {{ .Values.directResponse.status }}
                  body: { inline_string: {{ .Values.directResponse.body | toJson }} }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
admin:
  address:
    socket_address: { address: 0.0.0.0, port_value: {{ .Values.admin.port }} }
{{- if gt (int .Values.maxConnections) 0 }}
overload_manager:
  resource_monitors:
  - name: envoy.resource_monitors.global_downstream_max_connections
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig
      max_active_downstream_connections: {{ int .Values.maxConnections }}
{{- end }}
{{- end }}

{{- define "quickshake.config" -}}
{{- if .Values.config }}
{{- tpl .Values.config . }}
{{- else }}
{{- include "quickshake.bootstrap" . }}
{{- end }}
{{- end }}

{{/* The five NFD CPUID labels that together mean AVX-512 IFMA multi-buffer crypto (seed 003). */}}
{{- define "quickshake.ifmaExpressions" -}}
- key: feature.node.kubernetes.io/cpu-cpuid.AVX512F
  operator: Exists
- key: feature.node.kubernetes.io/cpu-cpuid.AVX512DQ
  operator: Exists
- key: feature.node.kubernetes.io/cpu-cpuid.AVX512BW
  operator: Exists
- key: feature.node.kubernetes.io/cpu-cpuid.AVX512IFMA
  operator: Exists
- key: feature.node.kubernetes.io/cpu-cpuid.AVX512VBMI2
  operator: Exists
{{- end }}

{{/* The pod's affinity: values.affinity plus the IFMA node affinity. */}}
{{- define "quickshake.affinity" -}}
{{- $mode := .Values.acceleration.ifma.nodeAffinity | default "none" }}
{{- $aff := deepCopy (.Values.affinity | default dict) }}
{{- $exprs := include "quickshake.ifmaExpressions" . | fromYamlArray }}
{{- if eq $mode "required" }}
{{- if hasKey $aff "nodeAffinity" }}{{ fail "affinity.nodeAffinity conflicts with acceleration.ifma.nodeAffinity; set one" }}{{ end }}
{{- $_ := set $aff "nodeAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" (list (dict "matchExpressions" $exprs)))) }}
{{- else if eq $mode "preferred" }}
{{- if hasKey $aff "nodeAffinity" }}{{ fail "affinity.nodeAffinity conflicts with acceleration.ifma.nodeAffinity; set one" }}{{ end }}
{{- $_ := set $aff "nodeAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" (int .Values.acceleration.ifma.weight) "preference" (dict "matchExpressions" $exprs)))) }}
{{- else if ne $mode "none" }}
{{- fail (printf "acceleration.ifma.nodeAffinity must be none, required or preferred (got %q)" $mode) }}
{{- end }}
{{- if $aff }}
{{- toYaml $aff }}
{{- end }}
{{- end }}
