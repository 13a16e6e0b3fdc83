//! Where dynamic resources come from: `dynamic_resources` and Envoy's `ConfigSource` (ADS, a
//! gRPC `api_config_source`, or a file).

use std::path::PathBuf;
use std::time::Duration;

/// `dynamic_resources`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicResources {
    /// `dynamic_resources`, for errors.
    pub path: String,
    /// `ads_config`: the one aggregated stream every `ads: {}` source uses.
    pub ads: Option<ApiConfigSource>,
    pub lds: Option<ConfigSource>,
    pub cds: Option<ConfigSource>,
}

/// Envoy's `ConfigSource`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSource {
    pub path: String,
    pub kind: ConfigSourceKind,
    /// `initial_fetch_timeout`; `None` is Envoy's default (15 s), zero waits for ever.
    pub initial_fetch_timeout: Option<Duration>,
}

impl ConfigSource {
    /// Envoy's default `initial_fetch_timeout`.
    pub const DEFAULT_INITIAL_FETCH_TIMEOUT: Duration = Duration::from_secs(15);

    /// How long warming waits for this source's first answer; `None`: for ever.
    pub fn initial_fetch_deadline(&self) -> Option<Duration> {
        match self.initial_fetch_timeout {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None => Some(Self::DEFAULT_INITIAL_FETCH_TIMEOUT),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSourceKind {
    /// `ads: {}`: the bootstrap's `ads_config` stream.
    Ads,
    /// `api_config_source`: a stream of its own (Istio's SDS to pilot-agent).
    Api(ApiConfigSource),
    /// `path_config_source.path` (or `path`): a file.
    Path(PathBuf),
}

/// Envoy's `ApiConfigSource` with gRPC to one Envoy cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfigSource {
    pub path: String,
    pub api_type: XdsApiType,
    /// `grpc_services[0].envoy_grpc.cluster_name`: a static cluster.
    pub cluster_name: String,
    pub set_node_on_first_message_only: bool,
    /// `grpc_services[0].initial_metadata`: `(key, value)` pairs (keys lower case) sent as
    /// request metadata when the stream opens, as Envoy sends them.
    pub initial_metadata: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdsApiType {
    /// State of the world.
    Grpc,
    /// Incremental.
    DeltaGrpc,
}
