//! QUIC (HTTP/3) listeners: Envoy's configuration parsed, and the errors naming their field.

use std::time::Duration;

use quickshake_config::*;

const QUIC: &str = r#"
static_resources:
  listeners:
  - name: quic
    address: { socket_address: { address: 127.0.0.1, port_value: 10000, protocol: UDP } }
    udp_listener_config:
      quic_options:
        quic_protocol_options: { max_concurrent_streams: 50, initial_stream_window_size: 65536 }
        idle_timeout: 30s
      downstream_socket_config: { prefer_gro: false }
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.quic
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.quic.v3.QuicDownstreamTransport
          downstream_tls_context:
            common_tls_context:
              tls_certificates:
              - certificate_chain: { filename: /c.pem }
                private_key: { filename: /k.pem }
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          codec_type: HTTP3
          stat_prefix: h3
          http3_protocol_options: {}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: / }
                direct_response: { status: 200 }
  - name: tcp
    address: { socket_address: { address: 127.0.0.1, port_value: 10000 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: tcp
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: / }
                direct_response: { status: 200 }
"#;

fn err(yaml: &str) -> String {
    match parse_str(yaml) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn envoys_http3_listener_parses_beside_a_tcp_listener_on_the_same_port() {
    let b = parse_str(QUIC).unwrap();
    let q = b.listeners[0].quic.as_ref().expect("a QUIC listener");
    assert_eq!(q.max_concurrent_streams, 50);
    assert_eq!(q.initial_stream_window_size, 65536);
    assert_eq!(q.initial_connection_window_size, 24 * 1024 * 1024);
    assert_eq!(q.idle_timeout, Duration::from_secs(30));
    assert_eq!(q.crypto_handshake_timeout, Duration::from_secs(20));
    assert!(!q.prefer_gro);
    let chain = &b.listeners[0].filter_chains[0];
    assert!(chain.tls.as_ref().is_some_and(|t| t.quic));
    assert_eq!(chain.http().unwrap().codec_type, CodecType::Http3);
    assert!(b.listeners[1].quic.is_none());
    assert!(q.enabled);
}

#[test]
fn client_certificates_and_a_disabled_quic_listener_parse() {
    let yaml = QUIC
        .replace(
            "        idle_timeout: 30s\n",
            "        idle_timeout: 30s\n        enabled: { default_value: false, runtime_key: quic.off }\n",
        )
        .replace(
            "            common_tls_context:\n              tls_certificates:",
            "            require_client_certificate: true\n            common_tls_context:\n              validation_context: { trusted_ca: { filename: /ca.pem } }\n              tls_certificates:",
        );
    let b = parse_str(&yaml).unwrap();
    assert!(!b.listeners[0].quic.as_ref().expect("QUIC").enabled);
    let tls = b.listeners[0].filter_chains[0].tls.as_ref().expect("TLS");
    assert!(tls.quic && tls.require_client_certificate && tls.trusted_ca.is_some());
}

#[test]
fn quic_listener_errors_name_the_field() {
    let e = err(&QUIC.replace("      quic_options:\n", "      quic_optionz:\n"));
    assert!(
        e.contains("static_resources.listeners[0].udp_listener_config.quic_optionz"),
        "{e}"
    );
    // A UDP address without quic_options: a raw UDP listener (udp_proxy) is not supported.
    let no_quic = QUIC.replace(
        "    udp_listener_config:\n      quic_options:\n        quic_protocol_options: { max_concurrent_streams: 50, initial_stream_window_size: 65536 }\n        idle_timeout: 30s\n      downstream_socket_config: { prefer_gro: false }\n",
        "",
    );
    let e = err(&no_quic);
    assert!(
        e.contains("listeners[0].address.socket_address.protocol"),
        "{e}"
    );
    // HTTP3 on the TCP listener.
    let e = err(&QUIC.replace(
        "stat_prefix: tcp",
        "stat_prefix: tcp\n          codec_type: HTTP3",
    ));
    assert!(
        e.contains("listeners[1].filter_chains[0].filters[0].typed_config.codec_type"),
        "{e}"
    );
    // The QUIC listener's connection manager without HTTP3.
    let e = err(&QUIC.replace("          codec_type: HTTP3\n", ""));
    assert!(
        e.contains("listeners[0].filter_chains[0].filters[0].typed_config.codec_type"),
        "{e}"
    );
    // 0-RTT is not supported yet.
    let e = err(&QUIC.replace(
        "          downstream_tls_context:",
        "          enable_early_data: true\n          downstream_tls_context:",
    ));
    assert!(
        e.contains("typed_config.enable_early_data") && e.contains("not supported"),
        "{e}"
    );
    // Two QUIC listeners on one address.
    let (head, tcp) = QUIC.split_at(QUIC.find("  - name: tcp").unwrap());
    let quic = &head[head.find("  - name: quic").unwrap()..];
    let dup = format!("{head}{}{tcp}", quic.replace("name: quic", "name: quic2"));
    let e = err(&dup);
    assert!(
        e.contains("listeners[1].address") && e.contains("already used"),
        "{e}"
    );
}
