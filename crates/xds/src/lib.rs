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
//!   through the caller's [`Sink`] resource by resource, as Envoy's LDS and CDS take it
//!   ([`accept`]): each resource the sink refuses (a certificate that does not load, a listener
//!   that cannot be built) keeps its previously accepted version, or stays absent, and the NACK
//!   names it with the sink's reason; the rest of the update serves.
//! - It never holds the data path: the last accepted resources keep serving while the stream
//!   is down, and it reconnects with jittered backoff.
//! - Key material in resources is never logged; [`dump`] redacts it as `/config_dump` does.

pub mod accept;
pub mod assemble;
pub mod bridge;
pub mod descriptors;
pub mod dump;
pub mod kind;
pub mod options;
pub mod resources;
pub mod state;
pub mod stats;
pub mod stream;
mod wire;

use std::sync::{Arc, Mutex, PoisonError};

use quickshake_stats::Store;

pub use accept::{Fault, Refused};
pub use kind::Kind;
pub use options::{ResolveError, Resolver, Sink, XdsEndpoint, XdsOptions};
pub use state::{Entry, Resources, SinkError};
pub use stats::{KindStats, XdsStats};

/// A running client: the accepted resources, for `/config_dump`.
#[derive(Clone)]
pub struct XdsHandle {
    started: std::time::Instant,
    /// Envoy's initialization: done when LDS and CDS have each been accepted once, or when
    /// this much time has passed (`None`: wait for them).
    initial_fetch: Option<std::time::Duration>,
    resources: Arc<Mutex<Resources>>,
    versions: Arc<Mutex<std::collections::BTreeMap<Kind, String>>>,
    /// The types the control plane has answered once (ACKed or NACKed).
    answered: Arc<Mutex<std::collections::BTreeSet<Kind>>>,
    warming: Arc<std::sync::atomic::AtomicBool>,
}

impl XdsHandle {
    /// A copy of every accepted resource.
    pub fn resources(&self) -> Resources {
        self.resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether initialization is done, as Envoy's init manager decides it: listeners and
    /// clusters have each been answered once, taken or NACKed (Envoy's LDS and CDS init targets
    /// are ready after a refused update too: startup goes on with what serves), and no listener
    /// is warming (waiting for its routes or secrets), or the initial fetch timeout has passed.
    pub fn initialized(&self) -> bool {
        let answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        let warm = !self.warming.load(std::sync::atomic::Ordering::Acquire);
        (answered.contains(&Kind::Listener) && answered.contains(&Kind::Cluster) && warm)
            || self
                .initial_fetch
                .is_some_and(|d| self.started.elapsed() >= d)
    }

    /// The `/config_dump` sections of the accepted resources.
    pub fn config_dump(&self) -> Vec<serde_json::Value> {
        let versions = self
            .versions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        dump::config_dump(&self.resources(), &versions)
    }
}

/// Start the client on a thread of its own (its own event loop); it runs for the life of the
/// process.
pub fn spawn(opts: XdsOptions, sink: Box<dyn Sink>, store: &Store) -> std::io::Result<XdsHandle> {
    let resources = Arc::new(Mutex::new(Resources::new()));
    let versions = Arc::new(Mutex::new(std::collections::BTreeMap::new()));
    let answered = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let warming = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handle = XdsHandle {
        started: std::time::Instant::now(),
        initial_fetch: opts.initial_fetch,
        resources: resources.clone(),
        versions: versions.clone(),
        answered: answered.clone(),
        warming: warming.clone(),
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
        versions,
        answered,
        warming,
        sds: Mutex::new(std::collections::BTreeSet::new()),
    });
    std::thread::Builder::new()
        .name("qs-xds".into())
        .spawn(move || rt.block_on(stream::run(shared)))?;
    Ok(handle)
}
