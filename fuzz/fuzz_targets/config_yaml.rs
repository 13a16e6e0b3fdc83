//! `quickshake_config::parse_str` on arbitrary UTF-8 text (YAML, and JSON since JSON is YAML).
//!
//! Property: parsing and validating never panics (nor overflows: fuzz builds keep debug
//! assertions on). A rejected configuration is an `Err` whose message and field path render; an
//! accepted one must also render its admin `/config_dump` view (which walks and redacts the raw
//! document) without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match quickshake_config::parse_str(text) {
        Ok(bootstrap) => {
            let _ = bootstrap.config_dump().to_string();
        }
        Err(e) => {
            let _ = e.to_string();
            let _ = e.path();
        }
    }
});
