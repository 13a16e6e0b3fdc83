//! Proxying configuration: clusters, routes to clusters, redirects, tcp_proxy, PROXY protocol.

use std::time::Duration;

use quickshake_config::*;
use serde_json::json;

mod common;
use common::*;

const HCM: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config";

#[test]
fn proxy_config_parses() {
    let b = load_file(&fixture("proxy.yaml")).unwrap();
    assert_eq!(b.clusters.len(), 3);

    let api = &b.clusters[0];
    assert_eq!(api.name, "api");
    assert_eq!(api.path, "static_resources.clusters[0]");
    assert_eq!(api.discovery, ClusterDiscovery::StrictDns);
    assert_eq!(api.connect_timeout, Duration::from_millis(250));
    assert_eq!(api.dns_refresh_rate, Duration::from_secs(10));
    assert_eq!(api.lb_policy, LbPolicy::LeastRequest);
    assert_eq!(api.protocol, UpstreamProtocol::Http2);
    assert_eq!(
        api.endpoints,
        vec![
            Endpoint {
                host: "api-1.internal".into(),
                port: 8443,
                socket_labels: Default::default(),
            },
            Endpoint {
                host: "api-2.internal".into(),
                port: 8443,
                socket_labels: Default::default(),
            },
        ]
    );
    assert_eq!(
        api.circuit_breakers,
        CircuitBreakers {
            max_connections: 100,
            max_pending_requests: 50,
            max_requests: 200,
            max_retries: 5
        }
    );
    let tls = api.upstream_tls.as_ref().unwrap();
    assert_eq!(tls.sni.as_deref(), Some("api.internal"));
    assert_eq!(tls.alpn_protocols, vec!["h2"]);
    assert_eq!(
        tls.trusted_ca,
        Some(DataSource::Filename("/nonexistent/upstream-ca.pem".into()))
    );
    let cc = tls.client_certificate.as_ref().unwrap();
    assert_eq!(
        cc.private_key,
        Some(DataSource::InlineString("UPSTREAMSECRETKEY".into()))
    );

    let web = &b.clusters[1];
    assert_eq!(web.discovery, ClusterDiscovery::LogicalDns);
    assert_eq!(web.connect_timeout, Duration::from_secs(5));
    assert_eq!(web.dns_refresh_rate, Duration::from_secs(5));
    assert_eq!(web.lb_policy, LbPolicy::RoundRobin);
    assert_eq!(web.protocol, UpstreamProtocol::Http1);
    assert_eq!(web.circuit_breakers, CircuitBreakers::default());
    assert_eq!(web.circuit_breakers.max_retries, 3);
    assert!(web.upstream_tls.is_none());

    let db = &b.clusters[2];
    assert_eq!(db.discovery, ClusterDiscovery::Static);
    assert_eq!(db.protocol, UpstreamProtocol::Http2);
    assert_eq!(
        db.endpoints,
        vec![
            Endpoint {
                host: "10.0.0.5".into(),
                port: 5432,
                socket_labels: Default::default(),
            },
            Endpoint {
                host: "::1".into(),
                port: 5433,
                socket_labels: Default::default(),
            },
        ]
    );

    let http = &b.listeners[0];
    assert!(!http.proxy_protocol);
    let h = http.filter_chains[0].http().unwrap();
    assert_eq!(h.upgrade_types, vec!["websocket"]);
    assert!(h.use_remote_address);
    assert_eq!(h.xff_num_trusted_hops, 1);
    assert!(!h.generate_request_id);

    let plain = &h.virtual_hosts()[0].routes[0].action;
    assert!(matches!(
        plain,
        RouteAction::Redirect(Redirect {
            https_redirect: true,
            host_redirect: None,
            path_redirect: None,
            response_code: 301,
            ..
        })
    ));
    let routes = &h.virtual_hosts()[1].routes;
    let RouteAction::Route(api_route) = &routes[0].action else {
        panic!("{:?}", routes[0].action)
    };
    assert_eq!(
        **api_route,
        RouteTarget {
            cluster: "api".into(),
            timeout: Some(Duration::from_secs(30)),
            prefix_rewrite: Some("/".into()),
            retry_policy: Some(RetryPolicy {
                retry_on: vec![
                    "5xx".into(),
                    "connect-failure".into(),
                    "retriable-status-codes".into()
                ],
                num_retries: 3,
                per_try_timeout: Some(Duration::from_secs(2)),
                retriable_status_codes: vec![503, 504],
                previous_hosts: false,
                host_selection_retry_max_attempts: 1,
                back_off: None,
            }),
            upgrades: Vec::new(),
            max_grpc_timeout: None,
            grpc_timeout_offset: None,
            regex_rewrite: None,
            host_rewrite_literal: None,
            append_x_forwarded_host: false,
            idle_timeout: None,
            mirrors: Vec::new(),
            cluster_not_found_status: 503,
            weighted: Vec::new(),
            hash_policy: Vec::new(),
            weighted_use_hash_policy: false,
        }
    );
    let RouteAction::Redirect(old) = &routes[1].action else {
        panic!()
    };
    assert_eq!(old.host_redirect.as_deref(), Some("new.example.com"));
    assert_eq!(old.path_redirect.as_deref(), Some("/new"));
    assert_eq!(old.response_code, 308);
    assert!(!old.https_redirect);
    let RouteAction::Route(ws) = &routes[2].action else {
        panic!()
    };
    assert_eq!(ws.timeout, None);
    let RouteAction::Route(web_route) = &routes[3].action else {
        panic!()
    };
    assert_eq!(web_route.cluster, "web");
    assert_eq!(web_route.timeout, Some(Duration::from_secs(15)));
    assert_eq!(web_route.retry_policy, None);
    assert_eq!(web_route.prefix_rewrite, None);

    let tcp = &b.listeners[1];
    assert!(tcp.proxy_protocol);
    assert!(tcp.filter_chains[0].http().is_none());
    let t = tcp.filter_chains[0].network.tcp_proxy().unwrap();
    assert_eq!(t.stat_prefix, "db");
    assert_eq!(t.cluster, "db");
    assert_eq!(t.idle_timeout, Some(Duration::from_secs(600)));
    assert_eq!(
        t.path,
        "static_resources.listeners[1].filter_chains[0].filters[0].typed_config"
    );

    // Debug never shows the upstream client key; config_dump redacts it.
    assert!(!format!("{b:?}").contains("UPSTREAMSECRETKEY"));
    let dump = b.config_dump().to_string();
    assert!(!dump.contains("UPSTREAMSECRETKEY"), "{dump}");
    assert!(dump.contains("/nonexistent/client.pem"));
    assert!(dump.contains("api-1.internal"));
}

#[test]
fn defaults_and_shorthands() {
    let mut v = fixture_json("proxy.yaml");
    // tcp_proxy idle_timeout: default 1h, 0s = none.
    let tp = &mut v["static_resources"]["listeners"][1]["filter_chains"][0]["filters"][0]
        ["typed_config"];
    tp.as_object_mut().unwrap().remove("idle_timeout");
    let b = parse_json(&v).unwrap();
    let t = b.listeners[1].filter_chains[0].network.tcp_proxy().unwrap();
    assert_eq!(t.idle_timeout, Some(Duration::from_secs(3600)));
    v["static_resources"]["listeners"][1]["filter_chains"][0]["filters"][0]["typed_config"]
        ["idle_timeout"] = json!("0s");
    let b = parse_json(&v).unwrap();
    let t = b.listeners[1].filter_chains[0].network.tcp_proxy().unwrap();
    assert_eq!(t.idle_timeout, None);

    // Legacy filter name, proxy_protocol without typed_config.
    let mut v = fixture_json("proxy.yaml");
    v["static_resources"]["listeners"][1]["filter_chains"][0]["filters"][0]["name"] =
        json!("envoy.tcp_proxy");
    v["static_resources"]["listeners"][1]["listener_filters"] =
        json!([{"name": "envoy.filters.listener.proxy_protocol"}]);
    let b = parse_json(&v).unwrap();
    assert!(b.listeners[1].proxy_protocol);

    // generate_request_id defaults to true; no upgrades by default.
    let b = load_file(&fixture("seed.yaml")).unwrap();
    let h = b.listeners[0].filter_chains[0].http().unwrap();
    assert!(h.generate_request_id);
    assert!(!h.use_remote_address);
    assert_eq!(h.xff_num_trusted_hops, 0);
    assert!(h.upgrade_types.is_empty());
    assert!(b.clusters.is_empty());
    assert!(!b.listeners[0].proxy_protocol);

    // Explicit HTTP/1 protocol options, numeric redirect code, retry_policy defaults.
    let mut v = fixture_json("proxy.yaml");
    v["static_resources"]["clusters"][0]["typed_extension_protocol_options"]
        ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]["explicit_http_config"] =
        json!({"http_protocol_options": {}});
    let routes = &mut v["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
        ["typed_config"]["route_config"]["virtual_hosts"][1]["routes"];
    routes[1]["redirect"]["response_code"] = json!(1);
    routes[0]["route"]["retry_policy"] = json!({"retry_on": "gateway-error"});
    let b = parse_json(&v).unwrap();
    assert_eq!(b.clusters[0].protocol, UpstreamProtocol::Http1);
    let routes = &b.listeners[0].filter_chains[0]
        .http()
        .unwrap()
        .virtual_hosts()[1]
        .routes;
    let RouteAction::Redirect(r) = &routes[1].action else {
        panic!()
    };
    assert_eq!(r.response_code, 302);
    let RouteAction::Route(t) = &routes[0].action else {
        panic!()
    };
    let rp = t.retry_policy.as_ref().unwrap();
    assert_eq!(rp.num_retries, 1);
    assert_eq!(rp.per_try_timeout, None);
    assert!(rp.retriable_status_codes.is_empty());
}

#[test]
fn unknown_cluster_names_the_path() {
    let mut v = fixture_json("proxy.yaml");
    v["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        ["route_config"]["virtual_hosts"][1]["routes"][3]["route"]["cluster"] = json!("nope");
    let e = err(&v);
    let path = format!("{HCM}.route_config.virtual_hosts[1].routes[3].route.cluster");
    assert_eq!(e.path(), Some(path.as_str()));
    assert_eq!(e.to_string(), format!("{path}: unknown cluster 'nope'"));

    let mut v = fixture_json("proxy.yaml");
    v["static_resources"]["listeners"][1]["filter_chains"][0]["filters"][0]["typed_config"]
        ["cluster"] = json!("gone");
    let e = err(&v);
    assert_eq!(
        e.to_string(),
        "static_resources.listeners[1].filter_chains[0].filters[0].typed_config.cluster: \
         unknown cluster 'gone'"
    );

    // No clusters at all: a route to one is an error too.
    let mut v = fixture_json("seed.yaml");
    seed_hcm(&mut v)["route_config"]["virtual_hosts"][0]["routes"][0] =
        json!({"match": {"prefix": "/"}, "route": {"cluster": "x"}});
    assert_eq!(
        err(&v).path(),
        Some(format!("{HCM}.route_config.virtual_hosts[0].routes[0].route.cluster").as_str())
    );
}

/// Istio's `BlackHoleCluster`: STATIC, no `load_assignment` (or an empty one). Envoy accepts it
/// and answers requests routed there 503 `no healthy upstream`.
#[test]
fn a_static_cluster_may_have_no_endpoints() {
    for empty in [
        None,
        Some(json!({"cluster_name": "db"})),
        Some(json!({"cluster_name": "db", "endpoints": []})),
    ] {
        let mut v = fixture_json("proxy.yaml");
        let db = v["static_resources"]["clusters"][2]
            .as_object_mut()
            .unwrap();
        db.remove("hosts");
        if let Some(la) = &empty {
            db.insert("load_assignment".into(), la.clone());
        }
        let b = parse_json(&v).unwrap_or_else(|e| panic!("{empty:?}: {e}"));
        assert_eq!(b.clusters[2].discovery, ClusterDiscovery::Static);
        assert!(b.clusters[2].endpoints.is_empty(), "{empty:?}");
        assert!(b.clusters[2].pipe.is_none());
    }
    let c = cluster_resource(
        &serde_yaml::from_str("{name: BlackHoleCluster, type: STATIC, connect_timeout: 10s}")
            .unwrap(),
        "Cluster BlackHoleCluster",
    )
    .unwrap();
    assert!(c.endpoints.is_empty());
}

#[test]
fn cluster_errors() {
    let cases: Vec<(Mutate, &str)> = vec![
        (
            Box::new(|v| v["static_resources"]["clusters"][1]["name"] = json!("api")),
            "static_resources.clusters[1].name",
        ),
        (
            Box::new(|v| {
                v["static_resources"]["clusters"][2]["hosts"][0]["socket_address"]["address"] =
                    json!("db.internal")
            }),
            "static_resources.clusters[2].hosts[0].socket_address.address",
        ),
        // No endpoints: a STATIC cluster may have none (see
        // `a_static_cluster_may_have_no_endpoints`), a DNS cluster may not.
        (
            Box::new(|v| {
                v["static_resources"]["clusters"][2]["type"] = json!("STRICT_DNS");
                v["static_resources"]["clusters"][2]["hosts"] = json!([]);
            }),
            "static_resources.clusters[2].hosts",
        ),
        (
            Box::new(|v| {
                v["static_resources"]["clusters"][2]["type"] = json!("STRICT_DNS");
                v["static_resources"]["clusters"][2]
                    .as_object_mut()
                    .unwrap()
                    .remove("hosts");
            }),
            "static_resources.clusters[2]",
        ),
        (
            Box::new(|v| {
                let eps = &mut v["static_resources"]["clusters"][1]["load_assignment"]
                    ["endpoints"][0]["lb_endpoints"];
                let first = eps[0].clone();
                eps.as_array_mut().unwrap().push(first);
            }),
            "static_resources.clusters[1].load_assignment",
        ),
        (
            Box::new(|v| v["static_resources"]["clusters"][0]["type"] = json!("DNS")),
            "static_resources.clusters[0].type",
        ),
        (
            Box::new(|v| v["static_resources"]["clusters"][0]["lb_policy"] = json!("RANDOM")),
            "static_resources.clusters[0].lb_policy",
        ),
        (
            Box::new(|v| {
                v["static_resources"]["clusters"][2]["hosts"][0]["socket_address"]["port_value"] =
                    json!(0)
            }),
            "static_resources.clusters[2].hosts[0].socket_address.port_value",
        ),
        (
            Box::new(|v| {
                v["static_resources"]["clusters"][0]["transport_socket"]["typed_config"]["@type"] =
                    json!("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext")
            }),
            "static_resources.clusters[0].transport_socket.typed_config.@type",
        ),
        (
            Box::new(|v| {
                v["static_resources"]["clusters"][0]["typed_extension_protocol_options"]
                    ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]["@type"] =
                    json!("type.googleapis.com/envoy.extensions.upstreams.tcp.v3.TcpProtocolOptions")
            }),
            "static_resources.clusters[0].typed_extension_protocol_options.envoy.extensions.upstreams.http.v3.HttpProtocolOptions.@type",
        ),
        (
            Box::new(|v| {
                v["static_resources"]["listeners"][1]["filter_chains"][0]["filters"][0]
                    ["typed_config"]["@type"] = json!("type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager")
            }),
            "static_resources.listeners[1].filter_chains[0].filters[0].typed_config.@type",
        ),
        (
            Box::new(|v| {
                v["static_resources"]["listeners"][1]["listener_filters"][0]["typed_config"]
                    ["@type"] = json!("type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector")
            }),
            "static_resources.listeners[1].listener_filters[0].typed_config.@type",
        ),
        (
            Box::new(|v| {
                v["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
                    ["typed_config"]["route_config"]["virtual_hosts"][1]["routes"][0]["route"]
                    ["retry_policy"]["retry_on"] = json!("5xx,sometimes")
            }),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[1].routes[0].route.retry_policy.retry_on",
        ),
        (
            Box::new(|v| {
                v["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
                    ["typed_config"]["route_config"]["virtual_hosts"][1]["routes"][1]["redirect"]
                    ["response_code"] = json!("MOVED")
            }),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[1].routes[1].redirect.response_code",
        ),
    ];
    for (i, (mutate, path)) in cases.into_iter().enumerate() {
        let mut v = fixture_json("proxy.yaml");
        mutate(&mut v);
        let e = err(&v);
        assert_eq!(e.path(), Some(path), "case {i}: {e}");
    }
}
