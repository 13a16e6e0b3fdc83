//! The I/O edge: connect to the xDS cluster (TCP or a unix socket, HTTP/2 cleartext), run one
//! ADS stream (state of the world or incremental) through [`crate::state::Stream`], and come
//! back with jittered exponential backoff when it breaks. Accepted resources stay in place while
//! the control plane is away.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use hyper_util::rt::TokioIo;
use quickshake_tls::ClientTls;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};

use std::collections::BTreeSet;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::envoy::service::secret::v3::secret_discovery_service_client::SecretDiscoveryServiceClient;

use crate::kind::Kind;
use crate::options::{Sink, XdsEndpoint, XdsOptions};
use crate::state::{self, Incoming, Outgoing, Resources, Source, Stream, Verdict};
use crate::stats::XdsStats;
use crate::wire;

/// Envoy's reconnect backoff: 500 ms doubling to 30 s, each wait drawn uniformly below the
/// current ceiling ("full jitter").
pub(crate) struct Backoff {
    ceiling: Duration,
    seed: u64,
}

impl Backoff {
    const BASE: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(30);

    pub(crate) fn new() -> Self {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9)
            | 1;
        Backoff {
            ceiling: Self::BASE,
            seed,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.ceiling = Self::BASE;
    }

    pub(crate) fn next(&mut self) -> Duration {
        // xorshift64: jitter needs no cryptographic quality.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let ms = self.ceiling.as_millis() as u64;
        let wait = Duration::from_millis(ms / 4 + self.seed % (ms - ms / 4 + 1));
        self.ceiling = (self.ceiling * 2).min(Self::MAX);
        wait
    }
}

/// A connected stream to the xDS cluster: plaintext, or TLS (h2 by ALPN) over TCP or a unix
/// socket.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

async fn wrap<S>(s: S, tls: Option<Arc<ClientTls>>) -> std::io::Result<TokioIo<Box<dyn Io>>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let io: Box<dyn Io> = match tls {
        Some(t) => Box::new(t.connect(s).await.map_err(std::io::Error::other)?),
        None => Box::new(s),
    };
    Ok(TokioIo::new(io))
}

async fn channel(
    endpoint: &XdsEndpoint,
    tls: Option<Arc<ClientTls>>,
) -> Result<Channel, tonic::transport::Error> {
    let ep = Endpoint::from_static("http://xds.quickshake")
        .connect_timeout(Duration::from_secs(5))
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(5));
    match endpoint.clone() {
        XdsEndpoint::Tcp(host, port) => {
            ep.connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                let host = host.trim_matches(['[', ']']).to_owned();
                let tls = tls.clone();
                async move {
                    let s = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
                    s.set_nodelay(true)?;
                    wrap(s, tls).await
                }
            }))
            .await
        }
        XdsEndpoint::Unix(path) => {
            ep.connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                let path = path.clone();
                let tls = tls.clone();
                async move {
                    let s = tokio::net::UnixStream::connect(path).await?;
                    wrap(s, tls).await
                }
            }))
            .await
        }
    }
}

/// What every stream of the client shares. Streams run on one current-thread event loop and
/// handle a response without awaiting, so updates from two streams never interleave.
pub(crate) struct Shared {
    pub(crate) opts: XdsOptions,
    pub(crate) resources: Arc<Mutex<Resources>>,
    pub(crate) sink: Mutex<Box<dyn Sink>>,
    pub(crate) stats: XdsStats,
    /// Whether a listener is warming (the sink's word after its last apply), for readiness.
    pub(crate) warming: Arc<std::sync::atomic::AtomicBool>,
    /// The last accepted `version_info` of each type, for `/config_dump`.
    pub(crate) versions: Arc<Mutex<std::collections::BTreeMap<Kind, String>>>,
    /// The types answered once, taken or NACKed, for readiness.
    pub(crate) answered: Arc<Mutex<std::collections::BTreeSet<Kind>>>,
    /// SDS streams of their own already started, by cluster.
    pub(crate) sds: Mutex<BTreeSet<String>>,
}

/// Which gRPC service a stream calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    /// `AggregatedDiscoveryService`: every kind.
    Ads,
    /// `SecretDiscoveryService`: secrets only.
    Sds,
}

/// One stream to run: its service, protocol flavour and cluster.
#[derive(Debug, Clone)]
struct Spec {
    service: Service,
    delta: bool,
    cluster: String,
    endpoint: XdsEndpoint,
    tls: Option<Arc<ClientTls>>,
    /// `grpc_services[0].initial_metadata`, sent when the stream opens.
    initial_metadata: Vec<(String, String)>,
}

/// Run the ADS stream for ever (and, as listeners name them, the SDS streams of their own).
pub(crate) async fn run(shared: Arc<Shared>) {
    // Static listeners' secrets from SDS streams of their own are asked for from the start.
    start_sds_streams(&shared);
    let ads = &shared.opts.ads;
    let spec = Spec {
        service: Service::Ads,
        delta: ads.api_type == quickshake_config::XdsApiType::DeltaGrpc,
        cluster: ads.cluster_name.clone(),
        endpoint: shared.opts.endpoint.clone(),
        tls: shared.opts.tls.clone(),
        initial_metadata: ads.initial_metadata.clone(),
    };
    run_stream(spec, shared).await;
}

async fn run_stream(spec: Spec, shared: Arc<Shared>) {
    let mut backoff = Backoff::new();
    let (kinds, source): (&[Kind], Source) = match spec.service {
        Service::Ads => (&Kind::ALL, Source::Ads),
        Service::Sds => (&[Kind::Secret], Source::Cluster(spec.cluster.clone())),
    };
    let mut stream =
        Stream::new(spec.delta, kinds, source).with_statics(&shared.opts.static_secrets);
    loop {
        match session(&spec, &mut stream, &shared, &mut backoff).await {
            Ok(()) => {
                tracing::warn!(cluster = %spec.cluster, "xDS stream closed by the control plane")
            }
            Err(e) => {
                tracing::warn!(cluster = %spec.cluster, error = %e, "xDS stream failed")
            }
        }
        if spec.service == Service::Ads {
            shared.stats.connected_state.set(0);
        }
        let wait = backoff.next();
        tracing::info!(
            cluster = %spec.cluster,
            wait_ms = wait.as_millis() as u64,
            "reconnecting to the control plane"
        );
        tokio::time::sleep(wait).await;
    }
}

/// Start the SDS streams of their own that the accepted resources name and that do not run yet.
fn start_sds_streams(shared: &Arc<Shared>) {
    let wanted = {
        let r = shared
            .resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state::sds_streams(&r, &shared.opts.static_secrets)
    };
    for (
        cluster,
        state::SdsStream {
            delta,
            initial_metadata,
        },
    ) in wanted
    {
        if !shared
            .sds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(cluster.clone())
        {
            continue;
        }
        match (shared.opts.resolve)(&cluster) {
            Ok((endpoint, tls)) => {
                tracing::info!(%cluster, delta, "starting an SDS stream");
                let spec = Spec {
                    service: Service::Sds,
                    delta,
                    cluster,
                    endpoint,
                    tls,
                    initial_metadata,
                };
                tokio::spawn(run_stream(spec, shared.clone()));
            }
            Err(e) => {
                tracing::error!(%cluster, error = %e, "cannot start an SDS stream; secrets from it stay missing");
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("connect: {0}")]
    Connect(#[from] tonic::transport::Error),
    #[error("stream: {0}")]
    Status(#[from] tonic::Status),
}

/// The requests of one flavour, converted and sent in order.
enum Outbound {
    Sotw(mpsc::Sender<DiscoveryRequest>),
    Delta(mpsc::Sender<DeltaDiscoveryRequest>),
}

async fn session(
    spec: &Spec,
    stream: &mut Stream,
    shared: &Arc<Shared>,
    backoff: &mut Backoff,
) -> Result<(), SessionError> {
    let ch = channel(&spec.endpoint, spec.tls.clone()).await?;
    let node = wire::node(&shared.opts.node);
    let only_first = shared.opts.ads.set_node_on_first_message_only;
    let first = {
        let r = shared
            .resources
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        stream.connected(&r)
    };
    let mut sent_node = false;
    let mut stamp = move || {
        let n = (!only_first || !sent_node).then(|| node.clone());
        sent_node = true;
        n
    };
    const MAX: usize = 64 << 20;
    let (out, mut inbound): (Outbound, Inbound) = if spec.delta {
        let (tx, rx) = mpsc::channel(64);
        for o in first {
            let _ = tx.send(wire::delta_request(o, stamp())).await;
        }
        let rx = with_metadata(ReceiverStream::new(rx), &spec.initial_metadata);
        let inbound = match spec.service {
            Service::Ads => AggregatedDiscoveryServiceClient::new(ch)
                .max_decoding_message_size(MAX)
                .delta_aggregated_resources(rx)
                .await?
                .into_inner(),
            Service::Sds => SecretDiscoveryServiceClient::new(ch)
                .max_decoding_message_size(MAX)
                .delta_secrets(rx)
                .await?
                .into_inner(),
        };
        (Outbound::Delta(tx), Inbound::Delta(inbound))
    } else {
        let (tx, rx) = mpsc::channel(64);
        for o in first {
            let _ = tx.send(wire::sotw_request(o, stamp())).await;
        }
        let rx = with_metadata(ReceiverStream::new(rx), &spec.initial_metadata);
        let inbound = match spec.service {
            Service::Ads => AggregatedDiscoveryServiceClient::new(ch)
                .max_decoding_message_size(MAX)
                .stream_aggregated_resources(rx)
                .await?
                .into_inner(),
            Service::Sds => SecretDiscoveryServiceClient::new(ch)
                .max_decoding_message_size(MAX)
                .stream_secrets(rx)
                .await?
                .into_inner(),
        };
        (Outbound::Sotw(tx), Inbound::Sotw(inbound))
    };
    if spec.service == Service::Ads {
        shared.stats.connected_state.set(1);
    }
    backoff.reset();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let next = async {
            match &mut inbound {
                Inbound::Sotw(s) => s.message().await.map(|m| m.map(wire::sotw_response)),
                Inbound::Delta(s) => s.message().await.map(|m| m.map(wire::delta_response)),
            }
        };
        let resp = tokio::select! {
            r = next => r?,
            _ = tick.tick() => {
                // Listeners still warming may have passed their initial_fetch_timeout.
                if spec.service == Service::Ads {
                    rewarm(shared);
                }
                continue;
            }
        };
        let Some(resp) = resp else { return Ok(()) };
        for o in handle(resp, stream, shared) {
            let sent = match &out {
                Outbound::Sotw(tx) => tx.send(wire::sotw_request(o, stamp())).await.is_ok(),
                Outbound::Delta(tx) => tx.send(wire::delta_request(o, stamp())).await.is_ok(),
            };
            if !sent {
                return Ok(());
            }
        }
        start_sds_streams(shared);
    }
}

/// The stream's request with its `initial_metadata` as request headers, as Envoy's gRPC client
/// sends them (keys lower case, values as written; the configuration parser checked both, an
/// entry that still is not a header is left out with a warning).
fn with_metadata<T>(requests: T, metadata: &[(String, String)]) -> tonic::Request<T> {
    let mut headers = http::HeaderMap::new();
    for (key, value) in metadata {
        match (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            (Ok(k), Ok(v)) => {
                headers.append(k, v);
            }
            _ => tracing::warn!(%key, "initial_metadata entry is not a valid header; not sent"),
        }
    }
    let mut request = tonic::Request::new(requests);
    *request.metadata_mut() = tonic::metadata::MetadataMap::from_headers(headers);
    request
}

enum Inbound {
    Sotw(tonic::Streaming<DiscoveryResponse>),
    Delta(tonic::Streaming<DeltaDiscoveryResponse>),
}

/// Apply the accepted resources again when a listener is warming: one whose route
/// configuration has not come within its `initial_fetch_timeout` is then served without it.
fn rewarm(shared: &Shared) {
    let mut sink = shared.sink.lock().unwrap_or_else(PoisonError::into_inner);
    if !sink.warming() {
        return;
    }
    let current = shared
        .resources
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Err(e) = sink.apply(&current) {
        tracing::warn!(error = %e, "re-applying warming listeners failed");
    }
    shared
        .warming
        .store(sink.warming(), std::sync::atomic::Ordering::Release);
}

fn handle(resp: Incoming, stream: &mut Stream, shared: &Shared) -> Vec<Outgoing> {
    let stats = &shared.stats;
    if let Some(kind) = Kind::from_type_url(&resp.type_url) {
        stats.kind(kind).update_attempt.inc();
    }
    // Sink, then resources: the order `rewarm` takes them in. `respond` builds the candidate
    // set from the accepted one and replaces it only when the sink took it.
    let mut sink = shared.sink.lock().unwrap_or_else(PoisonError::into_inner);
    let mut resources = shared
        .resources
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let (out, verdict) = stream.respond(resp, &mut resources, &mut |c| sink.apply(c));
    drop(resources);
    shared
        .warming
        .store(sink.warming(), std::sync::atomic::Ordering::Release);
    let answered = match &verdict {
        Verdict::Accepted { kind, .. } | Verdict::Partial { kind, .. } => Some(*kind),
        Verdict::Rejected { kind, .. } => *kind,
    };
    if let Some(kind) = answered {
        shared
            .answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(kind);
    }
    match verdict {
        Verdict::Accepted { kind, version } => {
            let s = stats.kind(kind);
            s.update_success.inc();
            s.version.set(version_hash(&version));
            shared
                .versions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(kind, version.clone());
            tracing::info!(kind = kind.noun(), %version, "xDS update accepted");
        }
        Verdict::Partial {
            kind,
            version,
            message,
            applied,
        } => {
            stats.kind(kind).update_rejected.inc();
            if applied {
                // Envoy's LDS and CDS take the update's version once a resource of it applied.
                shared
                    .versions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(kind, version.clone());
            }
            tracing::warn!(kind = kind.noun(), %version, error = %message, "xDS update applied in part (NACK); each refused resource keeps its previous version");
        }
        Verdict::Rejected { kind, message } => {
            if let Some(kind) = kind {
                stats.kind(kind).update_rejected.inc();
            }
            tracing::warn!(error = %message, "xDS update rejected (NACK); the previous configuration keeps serving");
        }
    }
    out
}

/// Envoy's `version` gauge: a hash of the version string (FNV-1a, 63 bits so it stays positive).
fn version_hash(v: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h >> 1) as i64
}

#[cfg(test)]
mod tests {
    use super::{with_metadata, Backoff};
    use std::time::Duration;

    #[test]
    fn initial_metadata_becomes_request_headers() {
        let entries = [
            ("x-token".to_owned(), "a b".to_owned()),
            ("x-token".to_owned(), "second".to_owned()),
            ("bad key".to_owned(), "left out".to_owned()),
        ];
        let r = with_metadata((), &entries);
        let values: Vec<_> = r
            .metadata()
            .get_all("x-token")
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(values, ["a b", "second"]);
        assert_eq!(r.metadata().len(), 2);
    }

    #[test]
    fn backoff_grows_jittered_and_caps() {
        let mut b = Backoff::new();
        let first = b.next();
        assert!(first <= Duration::from_millis(500) && first >= Duration::from_millis(125));
        for _ in 0..20 {
            assert!(b.next() <= Duration::from_secs(30));
        }
        b.reset();
        assert!(b.next() <= Duration::from_millis(500));
    }
}
