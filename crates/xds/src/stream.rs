//! The I/O edge: connect to the xDS cluster (TCP or a unix socket, HTTP/2 cleartext), run one
//! ADS stream (state of the world or incremental) through [`crate::state::Stream`], and come
//! back with jittered exponential backoff when it breaks. Accepted resources stay in place while
//! the control plane is away.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use hyper_util::rt::TokioIo;
use quickshake_tls::ClientTls;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};

use crate::state::{Incoming, Outgoing, Resources, Stream, Verdict};
use crate::wire;
use crate::{Sink, XdsOptions, XdsStats};

/// Where the xDS cluster's one endpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XdsEndpoint {
    /// A host (IP literal or DNS name, resolved at each connect) and port.
    Tcp(String, u16),
    /// `pipe.path`.
    Unix(PathBuf),
}

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

/// Run the ADS stream for ever.
pub(crate) async fn run(
    opts: XdsOptions,
    resources: Arc<Mutex<Resources>>,
    mut sink: Box<dyn Sink>,
    stats: XdsStats,
) {
    let mut backoff = Backoff::new();
    let delta = opts.ads.api_type == quickshake_config::XdsApiType::DeltaGrpc;
    let mut stream = Stream::new(delta, &crate::Kind::ALL);
    loop {
        match session(
            &opts,
            &mut stream,
            &resources,
            sink.as_mut(),
            &stats,
            &mut backoff,
        )
        .await
        {
            Ok(()) => {
                tracing::warn!(cluster = %opts.ads.cluster_name, "xDS stream closed by the control plane")
            }
            Err(e) => {
                tracing::warn!(cluster = %opts.ads.cluster_name, error = %e, "xDS stream failed")
            }
        }
        stats.connected_state.set(0);
        let wait = backoff.next();
        tracing::info!(
            wait_ms = wait.as_millis() as u64,
            "reconnecting to the control plane"
        );
        tokio::time::sleep(wait).await;
    }
}

#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("connect: {0}")]
    Connect(#[from] tonic::transport::Error),
    #[error("stream: {0}")]
    Status(#[from] tonic::Status),
}

async fn session(
    opts: &XdsOptions,
    stream: &mut Stream,
    resources: &Mutex<Resources>,
    sink: &mut dyn Sink,
    stats: &XdsStats,
    backoff: &mut Backoff,
) -> Result<(), SessionError> {
    let ch = channel(&opts.endpoint, opts.tls.clone()).await?;
    let mut client = AggregatedDiscoveryServiceClient::new(ch).max_decoding_message_size(64 << 20);
    let node = wire::node(&opts.node);
    let only_first = opts.ads.set_node_on_first_message_only;
    let delta = opts.ads.api_type == quickshake_config::XdsApiType::DeltaGrpc;
    let first = {
        let r = resources.lock().unwrap_or_else(PoisonError::into_inner);
        stream.connected(&r)
    };
    let mut sent_node = false;
    let mut stamp = move || {
        let n = (!only_first || !sent_node).then(|| node.clone());
        sent_node = true;
        n
    };
    if delta {
        let (tx, rx) = mpsc::channel(64);
        for o in first {
            let _ = tx.send(wire::delta_request(o, stamp())).await;
        }
        let mut inbound = client
            .delta_aggregated_resources(ReceiverStream::new(rx))
            .await?
            .into_inner();
        stats.connected_state.set(1);
        backoff.reset();
        while let Some(resp) = inbound.message().await? {
            for o in handle(wire::delta_response(resp), stream, resources, sink, stats) {
                if tx.send(wire::delta_request(o, stamp())).await.is_err() {
                    return Ok(());
                }
            }
        }
    } else {
        let (tx, rx) = mpsc::channel(64);
        for o in first {
            let _ = tx.send(wire::sotw_request(o, stamp())).await;
        }
        let mut inbound = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await?
            .into_inner();
        stats.connected_state.set(1);
        backoff.reset();
        while let Some(resp) = inbound.message().await? {
            for o in handle(wire::sotw_response(resp), stream, resources, sink, stats) {
                if tx.send(wire::sotw_request(o, stamp())).await.is_err() {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

fn handle(
    resp: Incoming,
    stream: &mut Stream,
    resources: &Mutex<Resources>,
    sink: &mut dyn Sink,
    stats: &XdsStats,
) -> Vec<Outgoing> {
    let mut current = resources
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Some(kind) = crate::Kind::from_type_url(&resp.type_url) {
        stats.kind(kind).update_attempt.inc();
    }
    let (out, verdict) = stream.respond(resp, &mut current, &mut |c| sink.apply(c));
    match verdict {
        Verdict::Accepted { kind, version } => {
            *resources.lock().unwrap_or_else(PoisonError::into_inner) = current;
            let s = stats.kind(kind);
            s.update_success.inc();
            s.version.set(version_hash(&version));
            tracing::info!(kind = kind.noun(), %version, "xDS update accepted");
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
    use super::Backoff;
    use std::time::Duration;

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
