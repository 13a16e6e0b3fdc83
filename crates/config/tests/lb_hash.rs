//! Consistent-hash load balancing: ring hash and Maglev clusters (typed
//! `load_balancing_policy` as Envoy Gateway writes it, legacy `lb_policy` as Istio's
//! DestinationRule `consistentHash` writes it) and routes' `hash_policy`.

use quickshake_config::*;
use serde_json::json;

fn cluster(extra: serde_json::Value) -> Result<Cluster, ConfigError> {
    let mut c = json!({
        "name": "c",
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {"cluster_name": "c", "endpoints": [{"lb_endpoints": [
            {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 1}}}}
        ]}]},
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        c[k] = v.clone();
    }
    cluster_resource(&c, "clusters[0]")
}

fn typed(name: &str, config: serde_json::Value) -> serde_json::Value {
    json!({"load_balancing_policy": {"policies": [{"typed_extension_config": {
        "name": name, "typed_config": config}}]}})
}

#[test]
fn envoy_gateways_maglev_and_ring_hash_policies() {
    let c = cluster(typed(
        "envoy.load_balancing_policies.maglev",
        json!({"@type": "type.googleapis.com/envoy.extensions.load_balancing_policies.maglev.v3.Maglev"}),
    ))
    .expect("maglev");
    assert_eq!(c.lb_policy, LbPolicy::Maglev { table_size: 65537 });
    let c = cluster(typed(
        "envoy.load_balancing_policies.maglev",
        json!({"@type": "type.googleapis.com/envoy.extensions.load_balancing_policies.maglev.v3.Maglev",
               "tableSize": "524287"}),
    ))
    .expect("maglev 524287");
    assert_eq!(c.lb_policy, LbPolicy::Maglev { table_size: 524287 });
    let c = cluster(typed(
        "envoy.load_balancing_policies.ring_hash",
        json!({"@type": "type.googleapis.com/envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash",
               "hash_function": "XX_HASH", "minimum_ring_size": 64, "maximum_ring_size": "4096",
               "consistent_hashing_lb_config": {"use_hostname_for_hashing": false}}),
    ))
    .expect("ring hash");
    assert_eq!(
        c.lb_policy,
        LbPolicy::RingHash {
            min_ring_size: 64,
            max_ring_size: 4096
        }
    );
}

#[test]
fn istios_legacy_ring_hash_and_maglev() {
    let c = cluster(
        json!({"lb_policy": "RING_HASH", "ring_hash_lb_config": {"minimum_ring_size": 2048}}),
    )
    .expect("ring");
    assert_eq!(
        c.lb_policy,
        LbPolicy::RingHash {
            min_ring_size: 2048,
            max_ring_size: 8 * 1024 * 1024
        }
    );
    let c = cluster(json!({"lb_policy": "RING_HASH"})).expect("ring defaults");
    assert_eq!(
        c.lb_policy,
        LbPolicy::RingHash {
            min_ring_size: 1024,
            max_ring_size: 8 * 1024 * 1024
        }
    );
    let c = cluster(json!({"lb_policy": "MAGLEV", "maglev_lb_config": {"table_size": 251}}))
        .expect("maglev");
    assert_eq!(c.lb_policy, LbPolicy::Maglev { table_size: 251 });
}

#[test]
fn refusals_name_the_field() {
    let cases = [
        (
            json!({"lb_policy": "MAGLEV", "maglev_lb_config": {"table_size": 1000}}),
            "clusters[0]: maglev_lb_config.table_size: must be a prime number, got 1000",
        ),
        (
            json!({"lb_policy": "RING_HASH", "ring_hash_lb_config": {"hash_function": "MURMUR_HASH_2"}}),
            "clusters[0]: ring_hash_lb_config.hash_function: not supported yet (only XX_HASH)",
        ),
        (
            json!({"lb_policy": "RING_HASH", "ring_hash_lb_config": {"minimum_ring_size": 9000, "maximum_ring_size": 4096}}),
            "minimum_ring_size (9000) > maximum_ring_size (4096)",
        ),
        (
            typed(
                "envoy.load_balancing_policies.ring_hash",
                json!({"@type": "type.googleapis.com/envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash",
                       "consistent_hashing_lb_config": {"hash_balance_factor": 150}}),
            ),
            "hash_balance_factor: not supported yet (bounded-load consistent hashing)",
        ),
        (
            json!({"lb_policy": "RANDOM"}),
            "clusters[0]: lb_policy: not supported yet",
        ),
    ];
    for (extra, want) in cases {
        let e = cluster(extra).expect_err(want);
        assert!(e.to_string().contains(want), "{e}\nwanted: {want}");
    }
}

fn route_with(hash_policy: serde_json::Value) -> Result<RouteConfig, ConfigError> {
    route_configuration(
        &json!({"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [
            {"match": {"prefix": "/"}, "route": {"cluster": "c", "hash_policy": hash_policy}}
        ]}]}),
        "RouteConfiguration r",
    )
}

#[test]
fn route_hash_policies() {
    let rc = route_with(json!([
        {"header": {"header_name": "X-User-Id"}},
        {"cookie": {"name": "test", "attributes": [{"name": "foo", "value": "bar"}]}, "terminal": true},
        {"connection_properties": {"source_ip": true}},
        {"query_parameter": {"name": "user"}},
    ]))
    .expect("hash policies");
    let RouteAction::Route(t) = &rc.virtual_hosts[0].routes[0].action else {
        panic!("not a route")
    };
    assert_eq!(
        t.hash_policy,
        vec![
            HashPolicy {
                source: HashSource::Header("x-user-id".into()),
                terminal: false
            },
            HashPolicy {
                source: HashSource::Cookie(CookieHash {
                    name: "test".into(),
                    ttl: None,
                    path: None,
                    attributes: vec![("foo".into(), "bar".into())],
                }),
                terminal: true
            },
            HashPolicy {
                source: HashSource::SourceIp,
                terminal: false
            },
            HashPolicy {
                source: HashSource::QueryParameter("user".into()),
                terminal: false
            },
        ]
    );
    assert!(!t.weighted_use_hash_policy);
    // Istio's httpCookie: a cookie generated when absent.
    let rc = route_with(json!([{"cookie": {"name": "s", "ttl": "0s", "path": "/"}}])).expect("ttl");
    let RouteAction::Route(t) = &rc.virtual_hosts[0].routes[0].action else {
        panic!("not a route")
    };
    assert_eq!(
        t.hash_policy[0].source,
        HashSource::Cookie(CookieHash {
            name: "s".into(),
            ttl: Some(std::time::Duration::ZERO),
            path: Some("/".into()),
            attributes: Vec::new(),
        })
    );
    let rc = route_configuration(
        &json!({"name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [
            {"match": {"prefix": "/"}, "route": {
                "hash_policy": [{"header": {"header_name": "x-user-id"}}],
                "weighted_clusters": {"clusters": [{"name": "a", "weight": 1}, {"name": "b", "weight": 1}],
                                      "use_hash_policy": true}}}
        ]}]}),
        "RouteConfiguration w",
    )
    .expect("use_hash_policy");
    let RouteAction::Route(t) = &rc.virtual_hosts[0].routes[0].action else {
        panic!("not a route")
    };
    assert!(t.weighted_use_hash_policy);
    for (p, want) in [
        (
            json!([{"header": {"header_name": "a", "regex_rewrite": {}}}]),
            "hash_policy[0].header.regex_rewrite: not supported yet",
        ),
        (
            json!([{"filter_state": {"key": "k"}}]),
            "hash_policy[0].filter_state: not supported yet",
        ),
        (
            json!([{"header": {"header_name": "a"}, "query_parameter": {"name": "b"}}]),
            "only one of header, cookie, connection_properties, query_parameter",
        ),
    ] {
        let e = route_with(p).expect_err(want);
        assert!(e.to_string().contains(want), "{e}\nwanted: {want}");
    }
}
