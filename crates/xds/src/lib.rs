//! `quickshake-xds` is the xDS client: one ADS stream to the control plane named by the
//! bootstrap's `dynamic_resources.ads_config` (state of the world `GRPC` or incremental
//! `DELTA_GRPC`), subscribing to listeners and clusters and to the routes, endpoints and
//! secrets they use.
//!
//! Contract:
//! - Resources are decoded by reflection over Envoy's descriptors into their JSON form
//!   ([`bridge`]) and validated by the configuration crate's own parser, so an xDS resource
//!   and a static one end in the same model with errors in the same words.
//! - The protocol state ([`state`]) is pure; [`stream`] is the only I/O. An update is applied
//!   through the caller's [`Sink`]; if the sink refuses it (a certificate that does not load,
//!   a listener that cannot be built), the update is NACKed with the sink's reason and nothing
//!   changes.
//! - It never holds the data path: the last accepted resources keep serving while the stream
//!   is down, and it reconnects with jittered backoff.
//! - Key material in resources is never logged; [`dump`] redacts it as `/config_dump` does.

pub mod assemble;
pub mod bridge;
pub mod descriptors;
pub mod dump;
pub mod kind;
pub mod state;
pub mod stream;
mod wire;

use std::sync::{Arc, Mutex, PoisonError};

use quickshake_config::{ApiConfigSource, Node};
use quickshake_stats::{Counter, Gauge, Store};

pub use kind::Kind;
pub use state::{Entry, Resources};
pub use stream::XdsEndpoint;

/// Where the data path takes a new set of resources. `apply` gets every accepted resource with
/// the update in, and says whether it serves; an `Err` is sent back to the control plane as
/// the NACK's message, so it names the resource and the field path.
pub trait Sink: Send {
    fn apply(&mut self, resources: &Resources) -> Result<(), String>;
}

/// What the client needs: who it is, the ADS source, and the xDS cluster's endpoint and TLS
/// context (the cluster's `UpstreamTlsContext`; ALPN offers `h2`).
#[derive(Clone)]
pub struct XdsOptions {
    pub node: Node,
    pub ads: ApiConfigSource,
    pub endpoint: XdsEndpoint,
    pub tls: Option<Arc<quickshake_tls::ClientTls>>,
    /// A static cluster's endpoint and TLS context, for the SDS streams of their own that
    /// listeners name (`sds_config.api_config_source`).
    pub resolve: Resolver,
}

/// How a stream to a named static cluster connects.
pub type Resolver = Arc<
    dyn Fn(&str) -> Result<(XdsEndpoint, Option<Arc<quickshake_tls::ClientTls>>), String>
        + Send
        + Sync,
>;

impl std::fmt::Debug for XdsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdsOptions")
            .field("node", &self.node)
            .field("ads", &self.ads)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// Envoy's update counters for one resource type.
#[derive(Clone)]
pub struct KindStats {
    pub update_attempt: Counter,
    pub update_success: Counter,
    pub update_rejected: Counter,
    pub version: Gauge,
}

/// `control_plane.connected_state` and the per-type update counters.
#[derive(Clone)]
pub struct XdsStats {
    pub connected_state: Gauge,
    kinds: Vec<(Kind, KindStats)>,
}

impl XdsStats {
    pub fn new(store: &Store) -> Self {
        let kinds = Kind::ALL
            .into_iter()
            .map(|k| {
                let scope = k.stat_scope();
                let c = |n: &str| store.counter(&format!("{scope}{n}"));
                let s = KindStats {
                    update_attempt: c("update_attempt"),
                    update_success: c("update_success"),
                    update_rejected: c("update_rejected"),
                    version: store.gauge(&format!("{scope}version")),
                };
                (k, s)
            })
            .collect();
        XdsStats {
            connected_state: store.gauge("control_plane.connected_state"),
            kinds,
        }
    }

    pub fn kind(&self, k: Kind) -> &KindStats {
        match self.kinds.iter().find(|(kk, _)| *kk == k) {
            Some((_, s)) => s,
            None => &self.kinds[0].1,
        }
    }
}

/// A running client: the accepted resources, for `/config_dump`.
#[derive(Clone)]
pub struct XdsHandle {
    resources: Arc<Mutex<Resources>>,
}

impl XdsHandle {
    /// A copy of every accepted resource.
    pub fn resources(&self) -> Resources {
        self.resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Start the client on a thread of its own (its own event loop); it runs for the life of the
/// process.
pub fn spawn(opts: XdsOptions, sink: Box<dyn Sink>, store: &Store) -> std::io::Result<XdsHandle> {
    let resources = Arc::new(Mutex::new(Resources::new()));
    let handle = XdsHandle {
        resources: resources.clone(),
    };
    let stats = XdsStats::new(store);
    // Decode the descriptors now: a broken descriptor set is a start-up error, not a NACK.
    descriptors::pool().map_err(std::io::Error::other)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let shared = Arc::new(stream::Shared {
        opts,
        resources,
        sink: Mutex::new(sink),
        stats,
        sds: Mutex::new(std::collections::BTreeSet::new()),
    });
    std::thread::Builder::new()
        .name("qs-xds".into())
        .spawn(move || rt.block_on(stream::run(shared)))?;
    Ok(handle)
}
