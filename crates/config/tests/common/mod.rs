//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use quickshake_config::*;
use serde_json::Value;

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn fixture_json(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

pub fn parse_json(v: &Value) -> Result<Bootstrap, ConfigError> {
    parse_str(&serde_json::to_string(v).unwrap())
}

pub fn err(v: &Value) -> ConfigError {
    match parse_json(v) {
        Ok(_) => panic!("expected an error for {v:#}"),
        Err(e) => e,
    }
}

pub const TLS: &str =
    "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config";

pub fn seed_tls(v: &mut Value) -> &mut Value {
    &mut v["static_resources"]["listeners"][0]["filter_chains"]["transport_socket"]["typed_config"]
}

pub fn seed_hcm(v: &mut Value) -> &mut Value {
    &mut v["static_resources"]["listeners"][0]["filter_chains"]["filters"][0]["typed_config"]
}

/// A change applied to a fixture.
pub type Mutate = Box<dyn Fn(&mut Value)>;
