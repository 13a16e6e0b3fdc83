//! Where xDS resources come from: Envoy's `ConfigSource` (ADS or a gRPC `api_config_source`).

use std::time::Duration;

/// Envoy's `ConfigSource` for xDS resources (RDS, EDS): ADS or a gRPC `api_config_source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSource {
    /// Where it was written, e.g. `...typed_config.rds.config_source`.
    pub path: String,
    pub kind: ConfigSourceKind,
    /// `initial_fetch_timeout` (Envoy's default 15s; `0s` = wait forever: `None`).
    pub initial_fetch_timeout: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSourceKind {
    /// `ads: {}`: the bootstrap's `dynamic_resources.ads_config` stream.
    Ads,
    /// `api_config_source` with `api_type` GRPC or DELTA_GRPC.
    Api(ApiConfigSource),
}

/// `api_config_source` (gRPC forms only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfigSource {
    /// `api_type` DELTA_GRPC (true) or GRPC (false).
    pub delta: bool,
    /// `grpc_services[].envoy_grpc.cluster_name`, in order (at least one).
    pub clusters: Vec<String>,
    /// `set_node_on_first_message_only` (default false).
    pub set_node_on_first_message_only: bool,
}
