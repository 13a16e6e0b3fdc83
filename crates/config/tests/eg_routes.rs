//! Envoy Gateway's listener and route fields: `default_filter_chain`, `path_separated_prefix`
//! and the route's `upgrade_configs`, from the captured resources of `testdata/envoy-gateway/`
//! (as xDS delivers them) and in a static bootstrap; validation errors name the field path.

use quickshake_config::*;
use serde_json::{json, Value};

mod common;
use common::*;

fn captured(file: &str, name: &str) -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/envoy-gateway/");
    let text = std::fs::read_to_string(format!("{path}{file}")).expect("captured resources");
    let all: Vec<Value> = serde_json::from_str(&text).expect("JSON");
    all.into_iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {file}"))
}

#[test]
fn envoy_gateways_plain_http_listener_is_its_default_filter_chain() {
    let mut l = captured("listeners.json", "default/eg/http");
    // Not this test's field.
    l.as_object_mut().expect("listener").remove("access_log");
    let listener = listener_resource(&l, &[]).expect("listener");
    assert_eq!(listener.filter_chains.len(), 1);
    let chain = &listener.filter_chains[0];
    assert!(chain.default);
    assert!(chain.server_names.is_empty());
    assert_eq!(chain.path, "default_filter_chain");
    assert!(chain.http().is_some());
}

#[test]
fn default_filter_chain_comes_last_and_ignores_its_match() {
    let mut v = fixture_json("seed.yaml");
    let l = &mut v["static_resources"]["listeners"][0];
    let mut named = l["filter_chains"].clone();
    named["filter_chain_match"] = json!({"server_names": ["a.example"]});
    let mut default = named.clone();
    default["filter_chain_match"] = json!({"server_names": ["b.example"]});
    l["filter_chains"] = json!([named.clone()]);
    l["default_filter_chain"] = default;
    let b = parse_json(&v).expect("parses");
    let chains = &b.listeners[0].filter_chains;
    assert_eq!(chains.len(), 2);
    assert!(!chains[0].default);
    assert_eq!(chains[0].server_names, ["a.example"]);
    assert!(chains[1].default);
    assert!(chains[1].server_names.is_empty());
    assert_eq!(
        chains[1].path,
        "static_resources.listeners[0].default_filter_chain"
    );

    // A default chain alone serves the listener; an error inside it names its path.
    let mut v = fixture_json("seed.yaml");
    let l = &mut v["static_resources"]["listeners"][0];
    let mut only = l["filter_chains"].clone();
    l.as_object_mut().expect("listener").remove("filter_chains");
    l["default_filter_chain"] = only.clone();
    assert!(parse_json(&v).is_ok());
    only["filters"] = json!([]);
    v["static_resources"]["listeners"][0]["default_filter_chain"] = only;
    assert_eq!(
        err(&v).path(),
        Some("static_resources.listeners[0].default_filter_chain.filters")
    );

    // Neither: the listener has nothing to serve with.
    let mut v = fixture_json("seed.yaml");
    let l = &mut v["static_resources"]["listeners"][0];
    l.as_object_mut().expect("listener").remove("filter_chains");
    assert_eq!(
        err(&v).path(),
        Some("static_resources.listeners[0].filter_chains")
    );
}

#[test]
fn envoy_gateways_route_parses_path_separated_prefix_and_upgrade_configs() {
    let mut rc = captured("routes.json", "default/eg/http");
    rc.as_object_mut()
        .expect("route configuration")
        .remove("@type");
    let rc = route_configuration(&rc, "RouteConfiguration default/eg/http").expect("routes");
    let route = &rc.virtual_hosts[0].routes[0];
    assert_eq!(
        route.matcher,
        RouteMatch::PathSeparatedPrefix("/app".into())
    );
    let RouteAction::Route(target) = &route.action else {
        panic!("{:?}", route.action)
    };
    assert_eq!(target.upgrades, [("websocket".to_owned(), true)]);
}

fn route_error(route: Value) -> ConfigError {
    let mut v = fixture_json("seed.yaml");
    seed_hcm(&mut v)["route_config"]["virtual_hosts"][0]["routes"][0] = route;
    err(&v)
}

const ROUTE0: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[0]";

#[test]
fn path_separated_prefix_is_validated_as_envoy_does() {
    // Envoy's pattern `^[^?#]+[^?#/]$` (no leading `/` asked: `app` loads, and matches nothing).
    for bad in ["/app/", "/", "a", "/a?b", "/a#b", ""] {
        let e = route_error(json!({
            "match": {"path_separated_prefix": bad},
            "direct_response": {"status": 200}
        }));
        assert_eq!(
            e.path(),
            Some(format!("{ROUTE0}.match.path_separated_prefix").as_str()),
            "{bad:?}: {e}"
        );
    }
    let e = route_error(json!({
        "match": {"path_separated_prefix": "/app", "prefix": "/"},
        "direct_response": {"status": 200}
    }));
    assert_eq!(e.path(), Some(format!("{ROUTE0}.match").as_str()), "{e}");
    assert!(e.to_string().contains("only one of"), "{e}");
    let mut v = fixture_json("seed.yaml");
    seed_hcm(&mut v)["route_config"]["virtual_hosts"][0]["routes"][0]["match"] =
        json!({"path_separated_prefix": "app"});
    assert!(parse_json(&v).is_ok());
    seed_hcm(&mut v)["route_config"]["virtual_hosts"][0]["routes"][0]["match"] =
        json!({"path_separated_prefix": "/App", "case_sensitive": false});
    let b = parse_json(&v).expect("parses");
    let r = &b.listeners[0].filter_chains[0]
        .http()
        .expect("hcm")
        .virtual_hosts()[0]
        .routes[0];
    assert_eq!(r.matcher, RouteMatch::PathSeparatedPrefix("/App".into()));
    assert!(!r.case_sensitive);
}

/// A route configuration (as RDS delivers it: clusters not checked) with one route to `c`
/// carrying `upgrade_configs`.
fn upgrade_routes(upgrades: Value) -> Result<RouteConfig, ConfigError> {
    route_configuration(
        &json!({"virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{
            "match": {"prefix": "/"},
            "route": {"cluster": "c", "upgrade_configs": upgrades}
        }]}]}),
        "RouteConfiguration r",
    )
}

#[test]
fn route_upgrade_configs_are_validated_as_envoy_does() {
    let rc = upgrade_routes(json!([
        {"upgrade_type": "websocket", "enabled": false},
        {"upgrade_type": "spdy/3"}
    ]))
    .expect("parses");
    let r = &rc.virtual_hosts[0].routes[0];
    let RouteAction::Route(t) = &r.action else {
        panic!("{:?}", r.action)
    };
    assert_eq!(
        t.upgrades,
        [("websocket".to_owned(), false), ("spdy/3".to_owned(), true)]
    );

    let cases = [
        (
            json!([{"upgrade_type": "websocket"}, {"upgrade_type": "WebSocket"}]),
            "upgrade_configs[1].upgrade_type",
            "duplicate",
        ),
        (
            json!([{"enabled": true}]),
            "upgrade_configs[0].upgrade_type",
            "",
        ),
        (
            json!([{"upgrade_type": "websocket", "connect_config": {}}]),
            "upgrade_configs[0].connect_config",
            "non-CONNECT",
        ),
        (
            json!([{"upgrade_type": "CONNECT", "connect_config": {}}]),
            "upgrade_configs[0].connect_config",
            "not supported",
        ),
        (
            json!([{"upgrade_type": "websocket", "filters": []}]),
            "upgrade_configs[0].filters",
            "",
        ),
    ];
    for (upgrades, field, words) in cases {
        let e = upgrade_routes(upgrades.clone()).unwrap_err().to_string();
        let want = format!("RouteConfiguration r: virtual_hosts[0].routes[0].route.{field}: ");
        assert!(e.starts_with(&want), "{upgrades}: {e}");
        assert!(e.contains(words), "{upgrades}: {e}");
    }
}
