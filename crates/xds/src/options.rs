//! What the client is given: the node, the ADS source and how to reach static clusters, and the
//! [`Sink`] that applies accepted resources.

use std::path::PathBuf;
use std::sync::Arc;

use quickshake_config::{ApiConfigSource, Node};

use crate::accept::Refused;
use crate::state::Resources;

/// Where an xDS cluster's one endpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XdsEndpoint {
    /// A host (IP literal or DNS name, resolved at each connect) and port.
    Tcp(String, u16),
    /// `pipe.path`.
    Unix(PathBuf),
}

/// Where the data path takes a new set of resources. `apply` gets every accepted resource with
/// the update in, and serves it, or names every resource it cannot serve (with a reason that
/// names the field path) and changes nothing it would not also do for the set without them:
/// the client then puts those resources back to their accepted versions and calls `apply`
/// again ([`crate::accept::settle`]); the reasons go back to the control plane in the NACK.
pub trait Sink: Send {
    fn apply(&mut self, resources: &Resources) -> Result<(), Refused>;

    /// Whether a listener is waiting for a route configuration or secret (the client then
    /// applies the same resources again each second, so a listener whose wait passed its
    /// `initial_fetch_timeout` starts serving).
    fn warming(&self) -> bool {
        false
    }
}

/// What the client needs: who it is, the ADS source, and the xDS cluster's endpoint and TLS
/// context (the cluster's `UpstreamTlsContext`; ALPN offers `h2`).
#[derive(Clone)]
pub struct XdsOptions {
    pub node: Node,
    pub ads: ApiConfigSource,
    pub endpoint: XdsEndpoint,
    pub tls: Option<Arc<quickshake_tls::ClientTls>>,
    /// How long initialization waits for the first listeners and clusters (the longest of
    /// `lds_config` and `cds_config`'s `initial_fetch_timeout`; `None`: for ever).
    pub initial_fetch: Option<std::time::Duration>,
    /// A static cluster's endpoint and TLS context, for the SDS streams of their own that
    /// listeners name (`sds_config.api_config_source`).
    pub resolve: Resolver,
    /// The secrets static listeners take from a control plane
    /// ([`crate::state::static_secret_refs`]): asked for from the start, as Envoy does.
    pub static_secrets: Vec<crate::state::SecretRef>,
}

/// How a stream to a named static cluster connects.
pub type Resolver = Arc<
    dyn Fn(&str) -> Result<(XdsEndpoint, Option<Arc<quickshake_tls::ClientTls>>), ResolveError>
        + Send
        + Sync,
>;

/// Why a named cluster cannot carry an xDS stream.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("unknown cluster '{0}' (xDS clusters must be static)")]
    UnknownCluster(String),
    #[error("cluster '{0}' has no endpoint")]
    NoEndpoint(String),
    /// The cluster's `UpstreamTlsContext` does not resolve (its files, its SDS secret).
    #[error("{0}")]
    TlsSpec(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The TLS client context does not build; `field` is the cluster's `transport_socket`.
    #[error("{field}: {source}")]
    ClientTls {
        field: String,
        #[source]
        source: quickshake_tls::ClientTlsError,
    },
}

impl std::fmt::Debug for XdsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdsOptions")
            .field("node", &self.node)
            .field("ads", &self.ads)
            .field("endpoint", &self.endpoint)
            .field("initial_fetch", &self.initial_fetch)
            .finish_non_exhaustive()
    }
}
