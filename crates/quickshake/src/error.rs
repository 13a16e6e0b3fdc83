//! Why `quickshake` could not serve: each error names the config field or flag it comes from.

use std::net::SocketAddr;

use quickshake_xds::ResolveError;

/// Why serving stopped before it started (the process prints it and exits non-zero).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("admin.address: cannot listen on {addr}: {source}")]
    AdminBind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("admin.address: {0}")]
    AdminListener(#[source] std::io::Error),
    #[error("cannot start the main event loop: {0}")]
    EventLoop(#[source] std::io::Error),
    /// The gateway did not start (the server crates' error); `context` says which
    /// configuration.
    #[error("{context}: {source}")]
    Gateway {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(
        "{0}: only ads_config sources are supported yet (lds_config/cds_config: {{ads: {{}}}})"
    )]
    NoAdsConfig(String),
    #[error("{0}: not supported yet (only ads: {{}}, over dynamic_resources.ads_config)")]
    SourceNotAds(String),
    /// A static listener's secret comes from a control plane, and the bootstrap has no
    /// `dynamic_resources.ads_config` to reach one; the field is the secret reference's path.
    #[error("{0}.sds_config: a secret from a control plane needs dynamic_resources.ads_config")]
    StaticSdsWithoutXds(String),
    /// `ads_config`'s cluster cannot carry the stream; `field` is the `ads_config` path.
    #[error("{field}: {source}")]
    XdsCluster {
        field: String,
        #[source]
        source: ResolveError,
    },
    #[error("xDS client: {0}")]
    XdsClient(#[source] std::io::Error),
}
