//! The closed list of fields accepted with no effect (docs/configuration.md, "Accepted with no
//! effect"): each loads, and the model is the same as without it.

use serde_json::{json, Value};

mod common;
use common::*;

/// `v` without every `metadata`, `decorator` and `tracing` key, wherever it sits.
fn stripped(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !["metadata", "decorator", "tracing"].contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), stripped(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(stripped).collect()),
        other => other.clone(),
    }
}

#[test]
fn every_no_effect_field_loads_and_changes_nothing() {
    let v = fixture_json("no_effect.yaml");
    let with = parse_json(&v).unwrap_or_else(|e| panic!("{e}"));
    let without = parse_json(&stripped(&v)).unwrap();
    assert_ne!(v, stripped(&v), "the fixture carries the fields");
    assert_eq!(
        format!("{:?}", with.listeners),
        format!("{:?}", without.listeners)
    );
    assert_eq!(
        format!("{:?}", with.clusters),
        format!("{:?}", without.clusters)
    );
}

/// Their shapes are still checked, with the field path, as Envoy's proto validation does.
#[test]
fn no_effect_fields_are_checked() {
    let base = fixture_json("no_effect.yaml");
    let route = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config\
                 .route_config.virtual_hosts[0].routes[0]";
    let cases: Vec<(Mutate, String)> = vec![
        (
            Box::new(|v: &mut Value| {
                v["static_resources"]["listeners"][0]["metadata"]["bogus"] = json!(1);
            }),
            "static_resources.listeners[0].metadata.bogus: unknown field".into(),
        ),
        (
            Box::new(|v: &mut Value| {
                v["static_resources"]["clusters"][0]["metadata"]["filter_metadata"]["x"] =
                    json!("not a struct");
            }),
            "static_resources.clusters[0].metadata.filter_metadata.x".into(),
        ),
        (
            Box::new(|v: &mut Value| {
                let hcm = &mut v["static_resources"]["listeners"][0]["filter_chains"][0]["filters"]
                    [0]["typed_config"];
                hcm["route_config"]["virtual_hosts"][0]["routes"][0]["decorator"] =
                    json!({"propagate": true});
            }),
            format!("{route}.decorator.operation"),
        ),
        (
            Box::new(|v: &mut Value| {
                let hcm = &mut v["static_resources"]["listeners"][0]["filter_chains"][0]["filters"]
                    [0]["typed_config"];
                hcm["route_config"]["virtual_hosts"][0]["routes"][0]["metadata"]
                    ["typed_filter_metadata"]["x"] = json!({"value": 1});
            }),
            format!("{route}.metadata.typed_filter_metadata.x.@type"),
        ),
        (
            Box::new(|v: &mut Value| {
                v["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
                    ["typed_config"]["tracing"]["sampling"] = json!(1);
            }),
            "typed_config.tracing.sampling: unknown field".into(),
        ),
    ];
    for (mutate, want) in cases {
        let mut v = base.clone();
        mutate(&mut v);
        let e = err(&v).to_string();
        assert!(e.contains(&want), "{e}\nwanted: {want}");
    }
}
