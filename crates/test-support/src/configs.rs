//! Gateway config templates (placeholders as [`crate::gateway::render`] fills them).

/// A deterministic 80-byte Envoy key (name, HMAC secret, AES secret) of letters, so that it can
/// be written as an `inline_string`.
pub fn ticket_key(seed: u8) -> String {
    (0..80u8)
        .map(|i| char::from(b'A' + (i.wrapping_mul(7).wrapping_add(seed.wrapping_mul(13))) % 26))
        .collect()
}

/// A filter chain's HTTP connection manager entry (`      - name: ...`, under `filters:`) that
/// answers every request with `direct_response` (e.g. `{ status: 200 }`) and routes nothing;
/// `hcm_extra` is more connection manager fields, indented ten spaces, or "".
pub fn direct_response_hcm(stat_prefix: &str, direct_response: &str, hcm_extra: &str) -> String {
    format!(
        r#"      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {stat_prefix}
{hcm_extra}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                direct_response: {direct_response}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#
    )
}

/// A minimal config: one TLS listener with a direct response, admin on `{{ADMIN}}`.
/// `tls_certificates` and extra `DownstreamTlsContext` fields go in through `tls_extra`.
pub fn direct_response_config(certificates: &str, tls_extra: &str, hcm_extra: &str) -> String {
    let hcm = direct_response_hcm(
        "ingress_http",
        r#"{ status: 200, body: { inline_string: "hello from quickshake" } }"#,
        hcm_extra,
    );
    format!(
        r#"
static_resources:
  listeners:
  - name: main
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{PORT}}}} }} }}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
{certificates}
{tls_extra}
      filters:
{hcm}admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {{{{ADMIN}}}} }} }}
"#
    )
}

/// A `tls_certificates` entry with a plain key (indented for `direct_response_config`).
pub fn plain_cert(name: &str) -> String {
    format!(
        "            - certificate_chain: {{ filename: {{{{CERTS}}}}/{name}.cert.pem }}\n              private_key: {{ filename: {{{{CERTS}}}}/{name}.key.pem }}"
    )
}

/// An `overload_manager` (a top-level bootstrap field) that lets the gateway hold at most 2
/// active downstream connections.
pub const OVERLOAD_TWO_CONNECTIONS: &str = r#"overload_manager:
  resource_monitors:
  - name: envoy.resource_monitors.global_downstream_max_connections
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig
      max_active_downstream_connections: 2
"#;
