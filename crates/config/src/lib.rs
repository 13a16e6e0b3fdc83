//! `quickshake-config` owns the configuration: it parses and validates the subset of the Envoy v3
//! bootstrap (YAML or JSON) that quickshake supports and resolves it into the [`model`] types the
//! rest of the workspace consumes. It is strict the way Envoy is: any field outside the supported
//! subset is an error ("unknown field", or "not supported yet" for Envoy fields quickshake does not
//! implement), and every error names the full field path, e.g.
//! `static_resources.listeners[0].filter_chains[0].transport_socket.typed_config.@type`.
//! It also renders the admin `/config_dump` view with secrets redacted.
//!
//! It must not do I/O beyond reading the configuration file, the environment variables a
//! `DataSource` names, and (on request, via [`read_data_source`]) data-source files; it does no
//! TLS and does not interpret certificates or keys — that is the TLS crate's job, which reads
//! them with [`read_data_source`] so that their errors still carry the config path.

#![forbid(unsafe_code)]

mod address;
mod bootstrap;
mod certificate;
mod cluster;
mod dump;
mod duration;
mod error;
mod http;
mod listener;
pub mod model;
mod sds;
pub use sds::load_sds_tls_certificate;
mod source;
mod tls;
mod walk;

use std::path::Path;

pub use duration::parse_duration;
pub use error::ConfigError;
pub use model::*;
pub use source::{key_file_permission_warning, read_data_source};

/// Load a configuration file: JSON when the extension is `.json`, YAML otherwise (JSON is also
/// valid YAML, so a JSON document in a `.yaml` file works too).
pub fn load_file(path: &Path) -> Result<Bootstrap, ConfigError> {
    let text = source::read_config_text(path)?;
    let origin = path.display().to_string();
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let raw = if is_json {
        source::json_text_to_json(&text, &origin)?
    } else {
        source::yaml_text_to_json(&text, &origin)?
    };
    bootstrap::bootstrap(raw)
}

/// Parse configuration text (YAML, or JSON which is YAML too).
pub fn parse_str(text: &str) -> Result<Bootstrap, ConfigError> {
    bootstrap::bootstrap(source::yaml_text_to_json(text, "config")?)
}

/// Decode an Envoy `DataSource` given as JSON (e.g. inside a provider's `typed_config`), with
/// errors naming `field_path`.
pub fn data_source_from_json(
    v: &serde_json::Value,
    field_path: &str,
) -> Result<DataSource, ConfigError> {
    source::data_source(&walk::Node::new(v, field_path))
}
