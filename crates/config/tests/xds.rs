//! What xDS needs from the model: RDS route sources, standalone RouteConfiguration / Cluster /
//! ClusterLoadAssignment resources, EDS clusters, `load_balancing_policy`; and the HTTP features
//! Envoy Gateway's and Istio's bootstraps use (header matchers, path normalization, the
//! health-check and compressor filters).

use std::time::Duration;

use quickshake_config::*;
use serde_json::json;

mod common;
use common::*;

fn yaml(text: &str) -> serde_json::Value {
    serde_yaml::from_str(text).expect("yaml")
}

#[test]
fn gateway_shapes_parse() {
    let b = load_file(&fixture("gateway_shapes.yaml")).unwrap();
    let stats = b.listeners[0].filter_chains[0].http().unwrap();
    assert_eq!(
        stats.path_normalization,
        PathNormalization {
            normalize_path: true,
            merge_slashes: true,
            escaped_slashes: EscapedSlashesAction::UnescapeAndRedirect
        }
    );
    let route = &stats.virtual_hosts()[0].routes[0];
    assert_eq!(route.matcher, RouteMatch::Path("/stats/prometheus".into()));
    assert_eq!(route.headers[0].name, ":method");
    assert!(route.headers[0].matches(Some("GET")));
    assert!(!route.headers[0].matches(Some("POST")));
    let libs: Vec<_> = stats
        .http_filters
        .iter()
        .map(|f| match f {
            HttpFilter::Compressor(c) => c.library,
            other => panic!("only compressors here: {other:?}"),
        })
        .collect();
    assert_eq!(
        libs,
        [
            CompressionLibrary::Brotli { quality: 3 },
            CompressionLibrary::Zstd { level: 3 },
            CompressionLibrary::Gzip { level: 1 }
        ]
    );
    let HttpFilter::Compressor(gz) = &stats.http_filters[2] else {
        panic!("gzip")
    };
    assert!(gz.remove_accept_encoding_header);
    assert_eq!(gz.min_content_length, 100);
    assert!(
        gz.content_types.iter().any(|t| t == "application/json"),
        "Envoy's default list"
    );

    let ready = b.listeners[1].filter_chains[0].http().unwrap();
    let HttpFilter::HealthCheck(hc) = &ready.http_filters[0] else {
        panic!("health check")
    };
    assert!(!hc.pass_through_mode);
    assert_eq!(hc.cache_time, Some(Duration::from_secs(5)));
    assert!(hc.headers[0].matches(Some("/ready")));

    let dynamic = b.listeners[2].filter_chains[0].http().unwrap();
    match &dynamic.routes {
        RouteSource::Rds {
            route_config_name,
            config_source,
        } => {
            assert_eq!(route_config_name, "http-10080");
            assert_eq!(config_source.kind, ConfigSourceKind::Ads);
            assert_eq!(
                config_source.initial_fetch_deadline(),
                None,
                "0s waits for ever"
            );
        }
        RouteSource::Static(_) => panic!("rds"),
    }
    assert!(dynamic.virtual_hosts().is_empty());

    let eds = &b.clusters[1];
    assert_eq!(eds.lb_policy, LbPolicy::LeastRequest);
    assert!(eds.endpoints.is_empty());
    match &eds.discovery {
        ClusterDiscovery::Eds {
            service_name,
            config_source,
        } => {
            assert_eq!(service_name, "local_cluster");
            assert_eq!(
                config_source.initial_fetch_deadline(),
                Some(Duration::from_secs(15)),
                "Envoy's default"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(b.clusters[0].circuit_breakers.max_connections, 100000);
    assert_eq!(b.clusters[2].protocol, UpstreamProtocol::Http2);
}

#[test]
fn route_configuration_alone() {
    let rc = route_configuration(
        &yaml(
            "name: r1\nvirtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n  \
             - match: {prefix: /, case_sensitive: false}\n    route: {cluster: not-yet}",
        ),
        "RouteConfiguration r1",
    )
    .unwrap();
    assert_eq!(rc.name, "r1");
    assert!(!rc.validate_clusters, "RDS default");
    assert!(!rc.ignore_port_in_host_matching, "Envoy's default");
    let ignoring = route_configuration(
        &yaml("name: r2\nignore_port_in_host_matching: true\nvirtual_hosts: []"),
        "RouteConfiguration r2",
    )
    .unwrap();
    assert!(ignoring.ignore_port_in_host_matching);
    let e = route_configuration(
        &yaml("ignore_port_in_host_matching: 1"),
        "RouteConfiguration r3",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("RouteConfiguration r3: ignore_port_in_host_matching: "),
        "{e}"
    );
    assert!(!rc.virtual_hosts[0].routes[0].case_sensitive);
    let e = route_configuration(
        &yaml(
            "name: local_route\nvirtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n  \
             - match: {prefix: /}\n    direct_response: {status: 200}\n  \
             - match: {prefix: /, bogus: 1}\n    direct_response: {status: 200}",
        ),
        "RouteConfiguration local_route",
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "RouteConfiguration local_route: virtual_hosts[0].routes[1].match.bogus: unknown field"
    );
    let e = route_configuration(&json!([]), "RouteConfiguration x").unwrap_err();
    assert_eq!(e.path(), Some("RouteConfiguration x"));
    let e = route_configuration(
        &yaml(
            "virtual_hosts:\n- name: v\n  domains: ['*']\n  routes:\n  \
             - match: {prefix: /, headers: [{name: x, string_match: {safe_regex: {regex: '('}}}]}\n    \
             direct_response: {status: 200}",
        ),
        "R",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("R: virtual_hosts[0].routes[0].match.headers[0].string_match.safe_regex.regex: invalid regex"),
        "{e}"
    );
}

/// `grpc_services[].initial_metadata`: kept (keys lower-cased) for the xDS client to send.
#[test]
fn grpc_service_initial_metadata() {
    let src = |metadata: &str| {
        api_config_source(
            &yaml(&format!(
                "api_type: GRPC\ngrpc_services: [{{envoy_grpc: {{cluster_name: xds-grpc}}, \
                 initial_metadata: {metadata}}}]"
            )),
            "ads_config",
        )
    };
    let a = src("[{key: X-Token, value: 'a b'}, {key: x-empty}]").unwrap();
    assert_eq!(
        a.initial_metadata,
        vec![
            ("x-token".to_owned(), "a b".to_owned()),
            ("x-empty".to_owned(), String::new())
        ]
    );
    assert!(src("[]").unwrap().initial_metadata.is_empty());
    for (bad, at) in [
        ("[{key: 'bad key', value: v}]", "initial_metadata[0].key"),
        ("[{key: ':path', value: v}]", "initial_metadata[0].key"),
        ("[{value: v}]", "initial_metadata[0]"),
        ("[{key: k, value: \"a\\nb\"}]", "initial_metadata[0].value"),
        (
            "[{key: k, raw_value: YQ==}]",
            "initial_metadata[0].raw_value",
        ),
    ] {
        let e = src(bad).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("ads_config: grpc_services[0].{at}")),
            "{bad}: {e}"
        );
    }
}

#[test]
fn inline_route_config_validates_clusters_unless_told_not_to() {
    let base = |extra: &str| {
        format!(
            "static_resources:\n  listeners:\n  - address: {{socket_address: {{address: 127.0.0.1, port_value: 1}}}}\n    \
             filter_chains:\n    - filters:\n      - name: envoy.filters.network.http_connection_manager\n        \
             typed_config:\n          \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n          \
             stat_prefix: s\n{extra}"
        )
    };
    let routes = "          route_config:\n            VALIDATE\n            virtual_hosts:\n            \
                  - {name: v, domains: ['*'], routes: [{match: {prefix: /}, route: {cluster: ghost}}]}\n";
    let e = parse_str(&base(&routes.replace("VALIDATE", "name: r"))).unwrap_err();
    assert!(e.to_string().contains("unknown cluster 'ghost'"), "{e}");
    let b = parse_str(&base(
        &routes.replace("VALIDATE", "validate_clusters: false"),
    ))
    .unwrap();
    let h = b.listeners[0].filter_chains[0].http().unwrap();
    assert!(!h.routes.static_config().unwrap().validate_clusters);

    let both = format!(
        "{}          rds: {{route_config_name: r, config_source: {{ads: {{}}}}}}\n",
        routes.replace("VALIDATE", "name: r")
    );
    let e = parse_str(&base(&both)).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("typed_config.rds: cannot be combined with route_config"),
        "{e}"
    );
    let e = parse_str(&base("")).unwrap_err();
    assert!(e.to_string().ends_with("needs route_config or rds"), "{e}");
    let grpc = "          rds:\n            route_config_name: r\n            config_source:\n              \
                resource_api_version: V3\n              api_config_source:\n                \
                api_type: DELTA_GRPC\n                transport_api_version: V3\n                \
                grpc_services: [{envoy_grpc: {cluster_name: xds}}]\n";
    let b = parse_str(&base(grpc)).unwrap();
    let h = b.listeners[0].filter_chains[0].http().unwrap();
    let RouteSource::Rds { config_source, .. } = &h.routes else {
        panic!("rds")
    };
    let ConfigSourceKind::Api(api) = &config_source.kind else {
        panic!("api_config_source")
    };
    assert_eq!(
        (
            api.api_type,
            api.cluster_name.as_str(),
            api.set_node_on_first_message_only
        ),
        (XdsApiType::DeltaGrpc, "xds", false)
    );
    let e = parse_str(&base(&grpc.replace("DELTA_GRPC", "REST"))).unwrap_err();
    assert!(
        e.to_string().ends_with(
            "api_config_source.api_type: not supported yet (api_type GRPC or DELTA_GRPC)"
        ),
        "{e}"
    );
}

#[test]
fn cluster_resources() {
    let c = cluster_resource(
        &yaml("name: svc\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}"),
        "Cluster svc",
    )
    .unwrap();
    assert_eq!(c.path, "Cluster svc");
    assert!(
        matches!(&c.discovery, ClusterDiscovery::Eds { service_name, .. } if service_name == "svc")
    );
    let e = cluster_resource(&yaml("name: svc\ntype: EDS"), "Cluster svc").unwrap_err();
    assert_eq!(
        e.to_string(),
        "Cluster svc: eds_cluster_config: required field is missing"
    );
    let e = cluster_resource(
        &yaml(
            "name: svc\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\n\
             load_assignment: {endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}}]}]}",
        ),
        "C",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("C: load_assignment: an EDS cluster"),
        "{e}"
    );

    // load_balancing_policy: the first supported policy wins; none supported is an error.
    let lbp = |policies: &str| {
        cluster_resource(
            &yaml(&format!(
                "name: s\nload_assignment: {{endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 10.0.0.1, port_value: 80}}}}}}}}]}}]}}\n\
                 load_balancing_policy: {{policies: [{policies}]}}"
            )),
            "C",
        )
    };
    let p = |t: &str| {
        format!(
            "{{typed_extension_config: {{name: n, typed_config: {{'@type': type.googleapis.com/envoy.extensions.load_balancing_policies.{t}}}}}}}"
        )
    };
    // Ring hash and Maglev are supported; Random is not.
    let ring = p("random.v3.Random");
    let lr = p("least_request.v3.LeastRequest");
    let rr = p("round_robin.v3.RoundRobin");
    assert_eq!(
        lbp(&format!("{ring}, {lr}, {rr}")).unwrap().lb_policy,
        LbPolicy::LeastRequest
    );
    assert_eq!(
        lbp(&format!("{rr}, {lr}")).unwrap().lb_policy,
        LbPolicy::RoundRobin
    );
    let e = lbp(&ring).unwrap_err();
    assert_eq!(
        e.to_string(),
        "C: load_balancing_policy.policies[0].typed_extension_config.typed_config.@type: not \
         supported yet (only envoy.load_balancing_policies.round_robin, least_request, ring_hash and \
         maglev)"
    );
}

#[test]
fn cluster_load_assignments() {
    let eps = cluster_load_assignment(
        &yaml(
            "cluster_name: svc\npolicy: {overprovisioning_factor: 140}\nendpoints:\n\
             - locality: {zone: z1}\n  load_balancing_weight: 2\n  lb_endpoints:\n  \
             - {endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 8080}}}, load_balancing_weight: 3}\n  \
             - {endpoint: {address: {socket_address: {address: 10.0.0.2, port_value: 8080}}}, health_status: UNHEALTHY}\n  \
             - {endpoint: {address: {socket_address: {address: '::1', port_value: 8080}}}, health_status: HEALTHY}\n  \
             - {endpoint: {address: {socket_address: {address: 10.0.0.4, port_value: 8080}}}, health_status: DRAINING}",
        ),
        "ClusterLoadAssignment svc",
    )
    .unwrap();
    assert_eq!(
        eps,
        vec![
            Endpoint {
                host: "10.0.0.1".into(),
                port: 8080,
                socket_labels: Default::default(),
            },
            Endpoint {
                host: "::1".into(),
                port: 8080,
                socket_labels: Default::default(),
            }
        ]
    );
    assert!(cluster_load_assignment(&yaml("cluster_name: svc"), "X")
        .unwrap()
        .is_empty());
    let e = cluster_load_assignment(&yaml("endpoints: []"), "X").unwrap_err();
    assert_eq!(e.to_string(), "X: cluster_name: required field is missing");
    let e = cluster_load_assignment(
        &yaml("cluster_name: s\nendpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: web, port_value: 1}}}}]}]"),
        "X",
    )
    .unwrap_err();
    assert!(
        e.to_string().starts_with("X: endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address: \"web\" is not an IP address"),
        "{e}"
    );
}

#[test]
fn http_filter_errors() {
    let hcm = |filters: &str| {
        format!(
            "static_resources:\n  listeners:\n  - address: {{socket_address: {{address: 127.0.0.1, port_value: 1}}}}\n    \
             filter_chains:\n    - filters:\n      - name: envoy.filters.network.http_connection_manager\n        \
             typed_config:\n          \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n          \
             stat_prefix: s\n          route_config: {{}}\n          http_filters: {filters}\n"
        )
    };
    let at = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters";
    let e = parse_str(&hcm(
        "[{name: envoy.filters.http.router}, {name: envoy.filters.http.router}]",
    ))
    .unwrap_err();
    assert!(
        e.to_string().starts_with(&format!("{at}[1]: the router")),
        "{e}"
    );
    let e = parse_str(&hcm("[{name: x, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck}}]")).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{at}[0].typed_config.pass_through_mode: required field is missing")
    );
    let e = parse_str(&hcm("[{name: c, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor, compressor_library: {name: l, typed_config: {'@type': type.googleapis.com/envoy.extensions.compression.brotli.compressor.v3.Brotli, quality: 12}}}}]")).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "{at}[0].typed_config.compressor_library.typed_config.quality: must be in 0..=11"
        )),
        "{e}"
    );
    let e = parse_str(&hcm("[{name: envoy.filters.http.lua}]")).unwrap_err();
    assert!(
        e.to_string()
            .contains("unknown HTTP filter \"envoy.filters.http.lua\""),
        "{e}"
    );
}
