//! Filter chains as TCP and QUIC listeners both run them: what one holds (its TLS context,
//! handshake timeout, rate limits and network filter: the HTTP connection manager or
//! `tcp_proxy`), how one is built from the configuration, and which one serves an SNI.

use std::sync::Arc;
use std::time::Duration;

use quickshake_config::{FilterChain, NetworkFilter};
use quickshake_http::{open_access_logs, HttpRuntime};
use quickshake_keyprovider::Providers;
use quickshake_stats::Store;
use quickshake_tls::client_hello::match_rank;
use quickshake_tls::{build_chain_tls, ChainTls, OcspStats};
use quickshake_upstream::ClusterManager;

use crate::admission::ChainRateLimits;
use crate::error::ServerError;
use crate::tcp_proxy::TcpProxyRuntime;
use quickshake_http::BucketRegistry;

/// Handshake timeout used when `transport_socket_connect_timeout` is not set. Envoy has none by
/// default; a gateway on the internet edge should not hold a socket forever for a silent client.
pub(crate) const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a filter chain does with the bytes after the handshake.
pub enum Network {
    Http(Arc<HttpRuntime>),
    TcpProxy(Arc<TcpProxyRuntime>),
}

/// One filter chain as the data path uses it.
pub struct ChainRuntime {
    pub server_names: Vec<String>,
    pub tls: Option<Arc<ChainTls>>,
    pub handshake_timeout: Duration,
    /// `envoy.filters.network.local_ratelimit` filters before the terminal one.
    pub rate_limits: ChainRateLimits,
    pub network: Network,
    /// The listener's `default_filter_chain`: chosen only when no other chain matches.
    pub default: bool,
}

/// The chain for an SNI: a chain naming it, else the chain without names, else the listener's
/// `default_filter_chain` (Envoy's order); `None` when nothing matches (the connection closes).
pub fn select_chain(chains: &[Arc<ChainRuntime>], sni: Option<&str>) -> Option<Arc<ChainRuntime>> {
    pick(chains, sni).cloned()
}

/// What chain selection reads of a chain.
trait ChainMatch {
    /// Lower-cased server names (empty: any SNI, or none).
    fn names(&self) -> &[String];
    /// The listener's `default_filter_chain`.
    fn is_default(&self) -> bool;
}

impl ChainMatch for Arc<ChainRuntime> {
    fn names(&self) -> &[String] {
        &self.server_names
    }
    fn is_default(&self) -> bool {
        self.default
    }
}

fn pick<'c, C: ChainMatch>(chains: &'c [C], sni: Option<&str>) -> Option<&'c C> {
    // The most specific name wins (exact, then the longest wildcard suffix), as in Envoy.
    let by_name = sni.and_then(|name| {
        chains
            .iter()
            .filter(|c| !c.is_default())
            .filter_map(|c| {
                c.names()
                    .iter()
                    .filter_map(|p| match_rank(p, name))
                    .max()
                    .map(|r| (r, c))
            })
            .max_by_key(|(r, _)| *r)
            .map(|(_, c)| c)
    });
    by_name
        .or_else(|| {
            chains
                .iter()
                .find(|c| !c.is_default() && c.names().is_empty())
        })
        .or_else(|| chains.iter().find(|c| c.is_default()))
}

/// One filter chain of the listener whose stats scope is `scope` and whose rate limit filters'
/// buckets are `buckets`; certificates are loaded here.
pub(crate) fn build_chain(
    fc: &FilterChain,
    store: &Store,
    providers: &Providers,
    clusters: &ClusterManager,
    scope: &str,
    buckets: &BucketRegistry,
) -> Result<ChainRuntime, ServerError> {
    let tls = match &fc.tls {
        Some(t) => Some(Arc::new(build_chain_tls(
            t,
            &fc.server_names,
            providers,
            scope,
            &OcspStats::new(store, scope),
        )?)),
        None => None,
    };
    Ok(ChainRuntime {
        server_names: fc
            .server_names
            .iter()
            .map(|s| s.to_ascii_lowercase())
            .collect(),
        tls,
        handshake_timeout: fc
            .transport_socket_connect_timeout
            .unwrap_or(DEFAULT_HANDSHAKE_TIMEOUT),
        rate_limits: ChainRateLimits::build(&fc.rate_limits, store, buckets),
        default: fc.default,
        network: match &fc.network {
            NetworkFilter::Http(hcm) => {
                Network::Http(Arc::new(HttpRuntime::build(hcm, store, clusters)?))
            }
            NetworkFilter::TcpProxy(tp) => {
                let cluster =
                    clusters
                        .cluster(&tp.cluster)
                        .ok_or_else(|| ServerError::Invalid {
                            field: format!("{}.cluster", tp.path),
                            reason: format!("unknown cluster '{}'", tp.cluster),
                        })?;
                Network::TcpProxy(Arc::new(TcpProxyRuntime::new(
                    &tp.stat_prefix,
                    cluster,
                    tp.idle_timeout,
                    open_access_logs(&tp.access_logs, &tp.path)?,
                    store,
                )))
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain as selection sees it: its names, whether it is the default, and a tag.
    struct Fake(&'static [&'static str], bool, &'static str);

    impl ChainMatch for (Vec<String>, bool, &'static str) {
        fn names(&self) -> &[String] {
            &self.0
        }
        fn is_default(&self) -> bool {
            self.1
        }
    }

    fn chains(fakes: &[Fake]) -> Vec<(Vec<String>, bool, &'static str)> {
        fakes
            .iter()
            .map(|f| (f.0.iter().map(|s| s.to_string()).collect(), f.1, f.2))
            .collect()
    }

    fn tag(
        chains: &[(Vec<String>, bool, &'static str)],
        sni: Option<&str>,
    ) -> Option<&'static str> {
        pick(chains, sni).map(|c| c.2)
    }

    #[test]
    fn the_default_chain_serves_only_what_no_other_chain_matches() {
        let named_and_default = chains(&[
            Fake(&["a.example"], false, "a"),
            Fake(&["*.example"], false, "wild"),
            Fake(&[], true, "default"),
        ]);
        assert_eq!(tag(&named_and_default, Some("a.example")), Some("a"));
        assert_eq!(tag(&named_and_default, Some("b.example")), Some("wild"));
        assert_eq!(tag(&named_and_default, Some("other.test")), Some("default"));
        assert_eq!(tag(&named_and_default, None), Some("default"));
        // A chain without names matches before the default.
        let with_catch_all = chains(&[
            Fake(&["a.example"], false, "a"),
            Fake(&[], false, "any"),
            Fake(&[], true, "default"),
        ]);
        assert_eq!(tag(&with_catch_all, Some("other.test")), Some("any"));
        assert_eq!(tag(&with_catch_all, None), Some("any"));
        // The default alone (Envoy Gateway's plain HTTP listener).
        let alone = chains(&[Fake(&[], true, "default")]);
        assert_eq!(tag(&alone, Some("x.test")), Some("default"));
        assert_eq!(tag(&alone, None), Some("default"));
        // No default: nothing matches, the connection closes.
        let named = chains(&[Fake(&["a.example"], false, "a")]);
        assert_eq!(tag(&named, Some("other.test")), None);
        assert_eq!(tag(&named, None), None);
    }
}
