//! Strictness: unknown fields anywhere name their exact path; wrong type URLs; unsupported
//! features; value and cross-listener errors.

use quickshake_config::*;
use serde_json::{json, Value};

mod common;
use common::*;

/// Field names whose value is a list in Envoy (a single mapping there stands for a list).
const LIST_FIELDS: &[&str] = &[
    "listeners",
    "filter_chains",
    "tls_certificates",
    "filters",
    "virtual_hosts",
    "routes",
    "http_filters",
    "access_log",
    "listener_filters",
    "keys",
    "resource_monitors",
    "layers",
];

/// Every mapping in the document with its config path (as the loader writes it).
fn mappings(
    v: &Value,
    path: &str,
    key: &str,
    out: &mut Vec<(String, Vec<String>)>,
    trail: Vec<String>,
) {
    match v {
        Value::Object(map) => {
            let path = if LIST_FIELDS.contains(&key) {
                format!("{path}[0]")
            } else {
                path.to_owned()
            };
            out.push((path.clone(), trail.clone()));
            for (k, child) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                let mut t = trail.clone();
                t.push(k.clone());
                mappings(child, &p, k, out, t);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let mut t = trail.clone();
                t.push(i.to_string());
                mappings(item, &format!("{path}[{i}]"), "", out, t);
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, trail: &[String]) -> &'a mut Value {
    let mut cur = v;
    for step in trail {
        cur = match cur {
            Value::Array(a) => &mut a[step.parse::<usize>().unwrap()],
            Value::Object(m) => m.get_mut(step).unwrap(),
            _ => unreachable!(),
        };
    }
    cur
}

#[test]
fn unknown_field_anywhere_names_its_path() {
    for name in ["full.yaml", "seed.yaml", "proxy.yaml"] {
        let doc = fixture_json(name);
        let mut all = Vec::new();
        mappings(&doc, "", "", &mut all, Vec::new());
        let mut checked = 0;
        for (path, trail) in all {
            // Free-form places: a provider's own config and runtime layers.
            if path.ends_with("private_key_provider.typed_config")
                || path.contains("private_key_provider.typed_config.")
                || path.contains("static_layer")
            {
                continue;
            }
            let mut v = doc.clone();
            let obj = at(&mut v, &trail);
            // `typed_config: {}` plus a field is no longer the empty shorthand.
            if obj.as_object().unwrap().is_empty() && path.ends_with("typed_config") {
                continue;
            }
            obj.as_object_mut()
                .unwrap()
                .insert("bogus".into(), json!(1));
            let e = err(&v);
            let want = if path.is_empty() {
                "bogus".to_owned()
            } else {
                format!("{path}.bogus")
            };
            assert_eq!(e.to_string(), format!("{want}: unknown field"), "in {name}");
            assert_eq!(e.path(), Some(want.as_str()));
            checked += 1;
        }
        assert!(checked > 20, "{name}: only {checked} mappings checked");
    }
}

#[test]
fn unknown_field_exact_message() {
    let mut v = fixture_json("seed.yaml");
    v["static_resources"]["listeners"][0]["bogus"] = json!(true);
    assert_eq!(
        err(&v).to_string(),
        "static_resources.listeners[0].bogus: unknown field"
    );
}

#[test]
fn wrong_type_url_names_the_field() {
    let mut v = fixture_json("seed.yaml");
    seed_tls(&mut v)["@type"] =
        json!("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext");
    assert_eq!(
        err(&v).to_string(),
        format!(
            "{TLS}.@type: expected type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext, got type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
        )
    );

    let mut v = fixture_json("seed.yaml");
    seed_tls(&mut v).as_object_mut().unwrap().remove("@type");
    let e = err(&v);
    assert_eq!(e.path(), Some(format!("{TLS}.@type").as_str()));

    let mut v = fixture_json("seed.yaml");
    seed_hcm(&mut v)["@type"] = json!("type.googleapis.com/envoy.config.filter.network.http_connection_manager.v2.HttpConnectionManager");
    let e = err(&v);
    assert_eq!(
        e.path(),
        Some("static_resources.listeners[0].filter_chains[0].filters[0].typed_config.@type")
    );

    // Any type-URL prefix is fine, as in Envoy.
    let mut v = fixture_json("seed.yaml");
    seed_tls(&mut v)["@type"] =
        json!("example.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext");
    parse_json(&v).unwrap();

    // The router's typed_config: @type checked when present.
    let mut v = fixture_json("seed.yaml");
    seed_hcm(&mut v)["http_filters"][0]["typed_config"] =
        json!({"@type": "type.googleapis.com/foo.Bar"});
    assert_eq!(
        err(&v).path(),
        Some("static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters[0].typed_config.@type")
    );
    let mut v = fixture_json("seed.yaml");
    seed_hcm(&mut v)["http_filters"][0]
        .as_object_mut()
        .unwrap()
        .remove("typed_config");
    parse_json(&v).unwrap();
}

#[test]
fn provider_type_url_is_not_checked_but_required() {
    let mut v = fixture_json("seed.yaml");
    seed_tls(&mut v)["common_tls_context"]["tls_certificates"]["private_key_provider"]
        ["typed_config"]["@type"] = json!("type.googleapis.com/some.Other");
    let b = parse_json(&v).unwrap();
    let p = b.listeners[0].filter_chains[0]
        .tls
        .as_ref()
        .unwrap()
        .certificates[0]
        .private_key_provider
        .clone()
        .unwrap();
    assert_eq!(p.type_url, "type.googleapis.com/some.Other");

    let mut v = fixture_json("seed.yaml");
    seed_tls(&mut v)["common_tls_context"]["tls_certificates"]["private_key_provider"]
        ["typed_config"]
        .as_object_mut()
        .unwrap()
        .remove("@type");
    assert_eq!(
        err(&v).to_string(),
        format!("{TLS}.common_tls_context.tls_certificates[0].private_key_provider.typed_config.@type: required")
    );
}

#[test]
fn certificate_needs_a_key() {
    let mut v = fixture_json("seed.yaml");
    seed_tls(&mut v)["common_tls_context"]["tls_certificates"]
        .as_object_mut()
        .unwrap()
        .remove("private_key_provider");
    let e = err(&v);
    assert_eq!(
        e.to_string(),
        format!("{TLS}.common_tls_context.tls_certificates[0]: needs private_key or private_key_provider")
    );
    let mut v = fixture_json("seed.yaml");
    seed_tls(&mut v)["common_tls_context"]["tls_certificates"]
        .as_object_mut()
        .unwrap()
        .remove("certificate_chain");
    assert_eq!(
        err(&v).path(),
        Some(format!("{TLS}.common_tls_context.tls_certificates[0].certificate_chain").as_str())
    );
}

#[test]
fn not_supported_yet() {
    let cases: Vec<(Mutate, &str, &str)> = vec![
        (
            Box::new(|v| {
                v["static_resources"]["clusters"] =
                    json!([{"name": "c", "type": "ORIGINAL_DST"}])
            }),
            "static_resources.clusters[0].type",
            "not supported yet",
        ),
        (
            Box::new(|v| {
                v["static_resources"]["listeners"][0]["listener_filters"] = json!([{
                    "name": "envoy.filters.listener.proxy_protocol",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol",
                        "rules": []
                    }
                }])
            }),
            "static_resources.listeners[0].listener_filters[0].typed_config.rules",
            "not supported yet",
        ),
        (
            Box::new(|v| {
                seed_hcm(v)["route_config"]["virtual_hosts"][0]["routes"][0] = json!({
                    "match": {"prefix": "/"},
                    "route": {"cluster_header": "x-cluster"}
                })
            }),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[0].route.cluster_header",
            "not supported yet",
        ),
        (
            Box::new(|v| v["static_resources"]["listeners"][0]["socket_options"] = json!([])),
            "static_resources.listeners[0].socket_options",
            "not supported yet",
        ),
    ];
    for (mutate, path, message) in cases {
        let mut v = fixture_json("seed.yaml");
        mutate(&mut v);
        let e = err(&v);
        assert_eq!(e.to_string(), format!("{path}: {message}"));
        assert_eq!(e.path(), Some(path));
    }
}

#[test]
fn value_errors() {
    let cases: Vec<(Mutate, &str)> = vec![
        (
            Box::new(|v| v["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"] = json!(70000)),
            "static_resources.listeners[0].address.socket_address.port_value",
        ),
        (
            Box::new(|v| v["static_resources"]["listeners"][0]["address"]["socket_address"]["address"] = json!("example.com")),
            "static_resources.listeners[0].address.socket_address.address",
        ),
        (
            Box::new(|v| seed_hcm(v)["codec_type"] = json!("spdy")),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.codec_type",
        ),
        (
            Box::new(|v| { seed_hcm(v).as_object_mut().unwrap().remove("stat_prefix"); }),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.stat_prefix",
        ),
        (
            Box::new(|v| seed_hcm(v)["max_request_headers_kb"] = json!(9000)),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.max_request_headers_kb",
        ),
        (
            Box::new(|v| seed_hcm(v)["common_http_protocol_options"] = json!({"idle_timeout": "soon"})),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.common_http_protocol_options.idle_timeout",
        ),
        (
            Box::new(|v| seed_tls(v)["common_tls_context"]["tls_params"] = json!({"tls_minimum_protocol_version": "TLSv1_4"})),
            "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.common_tls_context.tls_params.tls_minimum_protocol_version",
        ),
        (
            Box::new(|v| v["static_resources"]["listeners"][0]["filter_chains"]["transport_socket"]["name"] = json!("envoy.transport_sockets.alts")),
            "static_resources.listeners[0].filter_chains[0].transport_socket.name",
        ),
        (
            Box::new(|v| v["static_resources"]["listeners"][0]["filter_chains"]["filters"] = json!([])),
            "static_resources.listeners[0].filter_chains[0].filters",
        ),
        (
            Box::new(|v| seed_hcm(v)["http_filters"][0]["name"] = json!("envoy.filters.http.lua")),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters[0].name",
        ),
        (
            Box::new(|v| seed_hcm(v)["route_config"]["virtual_hosts"][0]["routes"][0]["direct_response"]["status"] = json!(42)),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[0].direct_response.status",
        ),
        (
            Box::new(|v| seed_tls(v)["session_ticket_keys"] = json!({"keys": [{"inline_string": "short"}]})),
            "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.session_ticket_keys.keys[0]",
        ),
        (
            Box::new(|v| {
                let k = "K".repeat(80);
                seed_tls(v)["session_ticket_keys"] = json!({"keys": [{"inline_string": k}]});
                seed_tls(v)["session_ticket_keys_sds_secret_config"] =
                    json!({"name": "t", "sds_config": {"path_config_source": {"path": "/t"}}});
            }),
            "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.session_ticket_keys_sds_secret_config",
        ),
        (
            Box::new(|v| seed_tls(v)["session_ticket_keys_sds_secret_config"] = json!({"sds_config": {"ads": {}}})),
            "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.session_ticket_keys_sds_secret_config.name",
        ),
        (
            Box::new(|v| seed_tls(v)["require_client_certificate"] = json!(true)),
            "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.require_client_certificate",
        ),
        (
            Box::new(|v| v["static_resources"]["listeners"][0]["name"] = json!(5)),
            "static_resources.listeners[0].name",
        ),
    ];
    for (i, (mutate, path)) in cases.into_iter().enumerate() {
        let mut v = fixture_json("seed.yaml");
        mutate(&mut v);
        let e = err(&v);
        assert_eq!(e.path(), Some(path), "case {i}: {e}");
        assert!(
            e.to_string().starts_with(&format!("{path}: ")),
            "case {i}: {e}"
        );
    }
}

#[test]
fn cross_checks() {
    // Two listeners with the same name.
    let mut v = fixture_json("seed.yaml");
    let mut second = v["static_resources"]["listeners"][0].clone();
    second["address"]["socket_address"]["port_value"] = json!(9002);
    v["static_resources"]["listeners"][0]["name"] = json!("l");
    second["name"] = json!("l");
    v["static_resources"]["listeners"] = json!([
        v["static_resources"]["listeners"][0].clone(),
        second.clone()
    ]);
    let e = err(&v);
    assert_eq!(e.path(), Some("static_resources.listeners[1].name"));

    // Same address.
    second["name"] = json!("m");
    second["address"]["socket_address"]["port_value"] = json!(9000);
    v["static_resources"]["listeners"][1] = second.clone();
    let e = err(&v);
    assert_eq!(e.path(), Some("static_resources.listeners[1].address"));
    assert!(
        e.to_string().contains("static_resources.listeners[0]"),
        "{e}"
    );

    // Listener on the admin address.
    second["address"]["socket_address"]["port_value"] = json!(9001);
    v["static_resources"]["listeners"][1] = second;
    let e = err(&v);
    assert!(e.to_string().contains("admin.address"), "{e}");

    // Duplicate server names across chains of one listener (case-insensitive).
    let mut v = fixture_json("seed.yaml");
    let mut chain = v["static_resources"]["listeners"][0]["filter_chains"].clone();
    chain["filter_chain_match"] = json!({"server_names": ["a.example", "b.example"]});
    let mut other = chain.clone();
    other["filter_chain_match"] = json!({"server_names": ["c.example", "B.example"]});
    v["static_resources"]["listeners"][0]["filter_chains"] = json!([chain, other]);
    let e = err(&v);
    assert_eq!(
        e.path(),
        Some("static_resources.listeners[0].filter_chains[1].filter_chain_match.server_names[1]")
    );

    // Two catch-all chains.
    let mut v = fixture_json("seed.yaml");
    let chain = v["static_resources"]["listeners"][0]["filter_chains"].clone();
    v["static_resources"]["listeners"][0]["filter_chains"] = json!([chain.clone(), chain]);
    assert_eq!(
        err(&v).path(),
        Some("static_resources.listeners[0].filter_chains[1].filter_chain_match")
    );
}

#[test]
fn empty_and_odd_documents() {
    assert_eq!(
        parse_str("").unwrap_err().to_string(),
        "(root): the configuration is empty"
    );
    assert!(parse_str("[1, 2]")
        .unwrap_err()
        .to_string()
        .starts_with("(root): expected a mapping"));
    assert_eq!(parse_str("{}").unwrap().listeners.len(), 0);
    assert_eq!(
        parse_str("bogus: 1").unwrap_err().to_string(),
        "bogus: unknown field"
    );
    assert_eq!(
        parse_str("dynamic_resources: {lds_config: {ads: {}}}")
            .unwrap_err()
            .to_string(),
        "dynamic_resources.lds_config: uses ads, but dynamic_resources.ads_config is not set"
    );
}
