//! Fields Envoy Gateway sets that quickshake now takes with Envoy's semantics:
//! `validation_context.match_typed_subject_alt_names` (inline, in an SDS file as Envoy
//! Gateway's `xds-trusted-ca.json`, upstream and downstream) and a listener's `access_log`
//! (with `filter.response_flag_filter`).

use quickshake_config::*;
use serde_json::{json, Value};

mod common;
use common::*;

const TLS_TYPE: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext";
const UP_TYPE: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
const VC: &str = "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.common_tls_context.validation_context";

/// A listener with one TLS chain whose `validation_context` is `vc`, a cluster whose upstream
/// `validation_context` is `up_vc`, and the listener's `access_log`.
fn bootstrap(vc: Value, up_vc: Value, access_log: Value) -> Value {
    json!({
        "static_resources": {
            "clusters": [{"name": "be",
                "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {
                    "@type": UP_TYPE, "common_tls_context": {"validation_context": up_vc}}},
                "load_assignment": {"cluster_name": "be", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9}}}}]}]}}],
            "listeners": [{
                "name": "tls",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10443}},
                "access_log": access_log,
                "filter_chains": [{
                    "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {
                        "@type": TLS_TYPE,
                        "common_tls_context": {
                            "tls_certificates": [{"certificate_chain": {"filename": "/c.pem"}, "private_key": {"filename": "/k.pem"}}],
                            "validation_context": vc,
                        },
                    }},
                    "filters": [{"name": "envoy.filters.network.tcp_proxy", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                        "stat_prefix": "t", "cluster": "be"}}],
                }],
            }],
        }
    })
}

fn ca_with(sans: Value) -> Value {
    json!({"trusted_ca": {"filename": "/ca.pem"}, "match_typed_subject_alt_names": sans})
}

fn plain() -> Value {
    bootstrap(
        json!({"trusted_ca": {"filename": "/ca.pem"}}),
        json!({"trusted_ca": {"filename": "/ca.pem"}}),
        json!([]),
    )
}

#[test]
fn san_matchers_parse_upstream_and_downstream() {
    let v = bootstrap(
        ca_with(json!([
            {"san_type": "DNS", "matcher": {"exact": "envoy-gateway"}},
            {"san_type": 3, "matcher": {"prefix": "spiffe://cluster.local/", "ignore_case": true}},
            {"san_type": "IP_ADDRESS", "matcher": {"safe_regex": {"regex": "10\\..*"}}},
            {"san_type": "EMAIL", "matcher": {"suffix": "@example.com"}},
        ])),
        ca_with(json!([{"san_type": "DNS", "matcher": {"exact": "backend"}}])),
        json!([]),
    );
    let b = parse_json(&v).unwrap();
    let down = b.listeners[0].filter_chains[0].tls.as_ref().unwrap();
    let types: Vec<SanType> = down.san_matchers.iter().map(|m| m.san_type).collect();
    assert_eq!(
        types,
        [
            SanType::Dns,
            SanType::Uri,
            SanType::IpAddress,
            SanType::Email
        ]
    );
    assert!(down.san_matchers[0].matches(SanType::Dns, "ENVOY-GATEWAY"));
    assert!(down.san_matchers[1].matches(SanType::Uri, "SPIFFE://cluster.local/ns/a"));
    assert!(down.san_matchers[2].matches(SanType::IpAddress, "10.0.0.1"));
    assert!(!down.san_matchers[2].matches(SanType::IpAddress, "110.0.0.1"));
    let up = b.clusters[0].upstream_tls.as_ref().unwrap();
    assert_eq!(up.san_matchers.len(), 1);
    assert!(up.san_matchers[0].matches(SanType::Dns, "backend"));
    // Without matchers, nothing changes.
    let b = parse_json(&plain()).unwrap();
    assert!(b.listeners[0].filter_chains[0]
        .tls
        .as_ref()
        .unwrap()
        .san_matchers
        .is_empty());
    assert!(b.clusters[0]
        .upstream_tls
        .as_ref()
        .unwrap()
        .san_matchers
        .is_empty());
}

#[test]
fn san_matcher_errors_name_the_field() {
    let down = |sans: Value| err(&bootstrap(ca_with(sans), json!({}), json!([]))).to_string();
    let e = down(json!([{"san_type": "DNS_NAME", "matcher": {"exact": "a"}}]));
    assert_eq!(
        e,
        format!("{VC}.match_typed_subject_alt_names[0].san_type: expected SAN_TYPE_UNSPECIFIED, DNS, EMAIL, URI, IP_ADDRESS or OTHER_NAME, got \"DNS_NAME\"")
    );
    let e = down(json!([{"san_type": 0, "matcher": {"exact": "a"}}]));
    assert_eq!(
        e,
        format!("{VC}.match_typed_subject_alt_names[0].san_type: must be DNS, EMAIL, URI, IP_ADDRESS or OTHER_NAME")
    );
    let e = down(
        json!([{"san_type": "DNS", "matcher": {"exact": "a"}}, {"san_type": "OTHER_NAME", "oid": "1.3.6.1.4.1.311.20.2.3", "matcher": {"exact": "a"}}]),
    );
    assert!(
        e.starts_with(&format!(
            "{VC}.match_typed_subject_alt_names[1].san_type: not supported yet"
        )),
        "{e}"
    );
    let e = down(json!([{"san_type": "DNS"}]));
    assert!(
        e.starts_with(&format!("{VC}.match_typed_subject_alt_names[0]")),
        "{e}"
    );
    let e = down(json!([{"san_type": "DNS", "matcher": {"safe_regex": {"regex": "("}}}]));
    assert!(
        e.starts_with(&format!(
            "{VC}.match_typed_subject_alt_names[0].matcher.safe_regex.regex: invalid regex"
        )),
        "{e}"
    );
    let e = down(json!([{"san_type": "DNS", "matcher": {"exact": "a"}, "bogus": 1}]));
    assert_eq!(
        e,
        format!("{VC}.match_typed_subject_alt_names[0].bogus: unknown field")
    );
    // Envoy: SAN-based verification without a trusted CA is insecure and not allowed.
    let e = err(&bootstrap(
        json!({"match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": "a"}}]}),
        json!({}),
        json!([]),
    ))
    .to_string();
    assert!(
        e.starts_with(&format!(
            "{VC}.match_typed_subject_alt_names: needs trusted_ca"
        )),
        "{e}"
    );
    // The deprecated untyped form stays refused.
    let e = err(&bootstrap(
        json!({"trusted_ca": {"filename": "/ca.pem"}, "match_subject_alt_names": [{"exact": "a"}]}),
        json!({}),
        json!([]),
    ))
    .to_string();
    assert_eq!(
        e,
        format!("{VC}.match_subject_alt_names: not supported yet")
    );
}

/// Envoy Gateway's `xds-trusted-ca.json` (v1.5 and later), as `proxy_sds.go` writes it.
#[test]
fn sds_file_validation_context_brings_its_matchers() {
    let dir = std::env::temp_dir().join(format!("qs-eg-sds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("xds-trusted-ca.json");
    std::fs::write(
        &file,
        json!({"resources": [{
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
            "name": "xds_trusted_ca",
            "validation_context": {
                "trusted_ca": {"filename": "/certs/ca.crt"},
                "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": "envoy-gateway"}}],
            },
        }]})
        .to_string(),
    )
    .unwrap();
    let mut v = plain();
    v["static_resources"]["clusters"][0]["transport_socket"]["typed_config"]
        ["common_tls_context"] = json!({
        "validation_context_sds_secret_config": {"name": "xds_trusted_ca", "sds_config": {
            "path_config_source": {"path": file.to_str().unwrap()}, "resource_api_version": "V3"}},
    });
    let b = parse_json(&v).unwrap();
    let up = b.clusters[0].upstream_tls.as_ref().unwrap();
    let r = up.trusted_ca_sds.as_ref().expect("an SDS reference");
    let vc = load_sds_trusted_ca(r).unwrap();
    assert_eq!(vc.trusted_ca, DataSource::Filename("/certs/ca.crt".into()));
    assert_eq!(vc.san_matchers.len(), 1);
    assert!(vc.san_matchers[0].matches(SanType::Dns, "envoy-gateway"));
    assert!(!vc.san_matchers[0].matches(SanType::Dns, "envoy-gateway.other"));
    // A matcher error inside the file names the file and the field.
    std::fs::write(
        &file,
        json!({"resources": [{"name": "xds_trusted_ca", "validation_context": {
            "trusted_ca": {"filename": "/certs/ca.crt"},
            "match_typed_subject_alt_names": [{"san_type": "DNSS", "matcher": {"exact": "a"}}]}}]})
        .to_string(),
    )
    .unwrap();
    let e = load_sds_trusted_ca(r).unwrap_err().to_string();
    assert!(
        e.contains("resources[0].validation_context.match_typed_subject_alt_names[0].san_type"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn eg_access_log(filter: Value) -> Value {
    json!([{
        "name": "envoy.access_loggers.file",
        "filter": filter,
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
            "path": "/dev/stdout",
            "log_format": {"json_format": {"response_flags": "%RESPONSE_FLAGS%", "start_time": "%START_TIME%"}},
        },
    }])
}

#[test]
fn listener_access_log_parses_with_its_filter() {
    let ca = json!({"trusted_ca": {"filename": "/ca.pem"}});
    let v = bootstrap(
        ca.clone(),
        ca.clone(),
        eg_access_log(json!({"response_flag_filter": {"flags": ["NR"]}})),
    );
    let b = parse_json(&v).unwrap();
    let logs = &b.listeners[0].access_logs;
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0].sink, AccessLogSink::File("/dev/stdout".into()));
    let f = logs[0].filter.as_ref().expect("a filter");
    assert_eq!(f, &AccessLogFilter::ResponseFlag(vec!["NR".into()]));
    assert!(f.passes(Some("NR")));
    assert!(!f.passes(Some("NC")));
    assert!(!f.passes(None));
    // No flags listed: any flag passes.
    assert!(AccessLogFilter::ResponseFlag(Vec::new()).passes(Some("UF")));
    assert!(!AccessLogFilter::ResponseFlag(Vec::new()).passes(None));
    assert!(parse_json(&plain()).unwrap().listeners[0]
        .access_logs
        .is_empty());

    const AL: &str = "static_resources.listeners[0].access_log[0].filter";
    let e = err(&bootstrap(
        ca.clone(),
        ca.clone(),
        eg_access_log(json!({"response_flag_filter": {"flags": ["XX"]}})),
    ))
    .to_string();
    assert!(
        e.starts_with(&format!(
            "{AL}.response_flag_filter.flags[0]: unknown response flag \"XX\""
        )),
        "{e}"
    );
    let e = err(&bootstrap(
        ca.clone(),
        ca,
        eg_access_log(json!({"status_code_filter": {}})),
    ))
    .to_string();
    assert_eq!(e, format!("{AL}.status_code_filter: not supported yet"));
}
