//! Which sockets become connections, after the global connection limit: a listener's
//! `envoy.filters.listener.local_ratelimit` and `quickshake.filters.listener.handshake_limit`
//! filters ([`ListenerAdmission`]), then a filter chain's `envoy.filters.network.local_ratelimit`
//! filters ([`ChainRateLimits`]). Every refusal is counted here and happens before any TLS work:
//! a refused socket costs an accept and a close, never a private-key operation.
//!
//! Listener filters act in their configured order at one of two moments ([`Stage`]): as the
//! socket is accepted, or once its PROXY protocol header is read (those listed after
//! `proxy_protocol`, and the handshake limit, which counts the address the header carries).
//! Stats, Envoy's names: `listener_local_ratelimit.<stat_prefix>.rate_limited`,
//! `local_rate_limit.<stat_prefix>.rate_limited`; quickshake's
//! `listener.<address>.downstream_cx_handshake_limited`.

use std::net::IpAddr;
use std::sync::Arc;

use quickshake_config::{ListenerLimit, LocalRateLimit, SocketLimit};
use quickshake_stats::{Counter, Store};

use crate::handshake_limit::{HandshakeSlot, HandshakeTable};
use quickshake_http::{BucketRegistry, TokenBucket};

/// When a listener filter acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// As the socket is accepted, before any byte is read.
    Accept,
    /// Once the PROXY protocol header is read.
    AfterProxyHeader,
}

/// A socket a filter refused (and counted).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused;

/// One `local_ratelimit` filter: its bucket (none when `runtime_enabled` turns it off) and its
/// `rate_limited` counter.
struct RateLimit {
    bucket: Option<Arc<TokenBucket>>,
    rate_limited: Counter,
}

impl RateLimit {
    fn build(cfg: &LocalRateLimit, stat: String, store: &Store, own: &BucketRegistry) -> Self {
        let bucket = cfg.enabled.then(|| {
            if cfg.share_key.is_empty() {
                own.bucket(&cfg.path, &cfg.token_bucket)
            } else {
                BucketRegistry::shared().bucket(&cfg.share_key, &cfg.token_bucket)
            }
        });
        RateLimit {
            bucket,
            rate_limited: store.counter(&stat),
        }
    }

    fn admit(&self) -> Result<(), Refused> {
        match &self.bucket {
            Some(b) if !b.try_take() => {
                self.rate_limited.inc();
                Err(Refused)
            }
            _ => Ok(()),
        }
    }
}

enum Check {
    RateLimit(RateLimit),
    Handshakes { max: u32 },
}

struct Filter {
    check: Check,
    stage: Stage,
}

/// A listener's admission filters, in order.
pub struct ListenerAdmission {
    filters: Vec<Filter>,
    handshakes: Arc<HandshakeTable>,
    handshake_limited: Option<Counter>,
}

impl ListenerAdmission {
    /// `limits` of the listener whose stat scope is `scope` (`listener.<address>.`); a filter's
    /// bucket comes from `buckets` (the listener's, by filter path) or, with a `share_key`, the
    /// process's; handshakes are counted in `handshakes` (the listener's table).
    pub fn build(
        limits: &[ListenerLimit],
        store: &Store,
        scope: &str,
        buckets: &BucketRegistry,
        handshakes: Arc<HandshakeTable>,
    ) -> Self {
        let mut handshake_limited = None;
        let filters = limits
            .iter()
            .map(|l| {
                let check = match &l.limit {
                    SocketLimit::LocalRateLimit(r) => Check::RateLimit(RateLimit::build(
                        r,
                        format!("listener_local_ratelimit.{}.rate_limited", r.stat_prefix),
                        store,
                        buckets,
                    )),
                    SocketLimit::HandshakeLimit(h) => {
                        handshake_limited =
                            Some(store.counter(&format!("{scope}downstream_cx_handshake_limited")));
                        Check::Handshakes {
                            max: h.max_handshakes_per_source,
                        }
                    }
                };
                let stage = if l.after_proxy_protocol {
                    Stage::AfterProxyHeader
                } else {
                    Stage::Accept
                };
                Filter { check, stage }
            })
            .collect();
        ListenerAdmission {
            filters,
            handshakes,
            handshake_limited,
        }
    }

    /// No filter at all: every socket is admitted.
    pub fn none(handshakes: Arc<HandshakeTable>) -> Self {
        ListenerAdmission {
            filters: Vec::new(),
            handshakes,
            handshake_limited: None,
        }
    }

    /// Run `stage`'s filters for a socket from `source`, in order, until one refuses. `slot` is
    /// the handshake slot an earlier stage took; the result holds the one the connection keeps
    /// until its handshake ends (none without a handshake limit). A refusal drops the slot.
    pub fn admit(
        &self,
        stage: Stage,
        source: IpAddr,
        mut slot: Option<HandshakeSlot>,
    ) -> Result<Option<HandshakeSlot>, Refused> {
        for f in self.filters.iter().filter(|f| f.stage == stage) {
            match &f.check {
                Check::RateLimit(r) => r.admit()?,
                Check::Handshakes { max } => match self.handshakes.try_acquire(source, *max) {
                    Some(s) => slot = Some(s),
                    None => {
                        if let Some(c) = &self.handshake_limited {
                            c.inc();
                        }
                        return Err(Refused);
                    }
                },
            }
        }
        Ok(slot)
    }
}

/// A filter chain's `envoy.filters.network.local_ratelimit` filters, in order: they act when the
/// connection is created on the chain, before its TLS handshake, as Envoy's do.
#[derive(Default)]
pub struct ChainRateLimits(Vec<RateLimit>);

impl ChainRateLimits {
    /// `limits`' buckets come from `buckets` (the listener's, by filter path) or, with a
    /// `share_key`, the process's.
    pub fn build(limits: &[LocalRateLimit], store: &Store, buckets: &BucketRegistry) -> Self {
        ChainRateLimits(
            limits
                .iter()
                .map(|r| {
                    let stat = format!("local_rate_limit.{}.rate_limited", r.stat_prefix);
                    RateLimit::build(r, stat, store, buckets)
                })
                .collect(),
        )
    }

    /// Take a token from each filter's bucket in order; the first without one refuses.
    pub fn admit(&self) -> Result<(), Refused> {
        self.0.iter().try_for_each(RateLimit::admit)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use quickshake_config::{HandshakeLimit, TokenBucket as Settings};

    use super::*;

    const SCOPE: &str = "listener.127.0.0.1_443.";

    fn rate_limit(path: &str, prefix: &str, max_tokens: u32) -> LocalRateLimit {
        LocalRateLimit {
            path: path.into(),
            stat_prefix: prefix.into(),
            token_bucket: Settings {
                max_tokens,
                tokens_per_fill: 1,
                fill_interval: Duration::from_secs(3600),
            },
            enabled: true,
            share_key: String::new(),
        }
    }

    fn limit(limit: SocketLimit, after_proxy_protocol: bool) -> ListenerLimit {
        ListenerLimit {
            limit,
            after_proxy_protocol,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn listener_rate_limit_counts_refusals_under_envoys_name() {
        let store = Store::new();
        let a = ListenerAdmission::build(
            &[limit(
                SocketLimit::LocalRateLimit(rate_limit("l[0]", "lrl", 2)),
                false,
            )],
            &store,
            SCOPE,
            &BucketRegistry::default(),
            HandshakeTable::new(),
        );
        let src = ip("192.0.2.1");
        assert!(a.admit(Stage::Accept, src, None).is_ok());
        assert!(a.admit(Stage::Accept, src, None).is_ok());
        assert_eq!(a.admit(Stage::Accept, src, None).unwrap_err(), Refused);
        // The other stage has no filter here.
        assert!(a.admit(Stage::AfterProxyHeader, src, None).is_ok());
        assert_eq!(
            store.counter_value("listener_local_ratelimit.lrl.rate_limited"),
            Some(1)
        );
    }

    #[test]
    fn handshake_limit_holds_a_slot_until_dropped() {
        let store = Store::new();
        let table = HandshakeTable::new();
        let a = ListenerAdmission::build(
            &[limit(
                SocketLimit::HandshakeLimit(HandshakeLimit {
                    max_handshakes_per_source: 1,
                }),
                true,
            )],
            &store,
            SCOPE,
            &BucketRegistry::default(),
            table.clone(),
        );
        let (src, other) = (ip("203.0.113.9"), ip("203.0.113.10"));
        // After the PROXY header: nothing at accept.
        assert!(a.admit(Stage::Accept, src, None).unwrap().is_none());
        let slot = a.admit(Stage::AfterProxyHeader, src, None).unwrap();
        assert!(slot.is_some());
        assert_eq!(
            a.admit(Stage::AfterProxyHeader, src, None).unwrap_err(),
            Refused
        );
        assert!(a.admit(Stage::AfterProxyHeader, other, None).is_ok());
        assert_eq!(
            store.counter_value(&format!("{SCOPE}downstream_cx_handshake_limited")),
            Some(1)
        );
        drop(slot);
        assert_eq!(table.in_progress(src), 0);
        assert!(a.admit(Stage::AfterProxyHeader, src, None).is_ok());
    }

    /// Filters run in order: a socket the rate limit refuses never takes a handshake slot, and
    /// one the handshake limit refuses gives its slot back.
    #[test]
    fn filters_run_in_order() {
        let store = Store::new();
        let table = HandshakeTable::new();
        let hl = || {
            SocketLimit::HandshakeLimit(HandshakeLimit {
                max_handshakes_per_source: 1,
            })
        };
        let rl_first = ListenerAdmission::build(
            &[
                limit(
                    SocketLimit::LocalRateLimit(rate_limit("l[0]", "a", 1)),
                    false,
                ),
                limit(hl(), false),
            ],
            &store,
            SCOPE,
            &BucketRegistry::default(),
            table.clone(),
        );
        let src = ip("198.51.100.1");
        let held = rl_first.admit(Stage::Accept, src, None).unwrap();
        assert!(held.is_some());
        drop(held);
        assert!(rl_first.admit(Stage::Accept, src, None).is_err());
        assert_eq!(
            table.in_progress(src),
            0,
            "refused before the handshake limit"
        );
    }

    #[test]
    fn disabled_filter_admits_and_network_filters_share_by_key() {
        let store = Store::new();
        let own = BucketRegistry::default();
        let mut off = rate_limit("c[0].filters[0]", "off", 0);
        off.enabled = false;
        let chain = ChainRateLimits::build(&[off], &store, &own);
        assert!(chain.admit().is_ok());
        assert_eq!(
            store.counter_value("local_rate_limit.off.rate_limited"),
            Some(0)
        );

        // Two chains (of any listener) with the same share_key and bucket share its tokens.
        let mut shared = rate_limit("c[0].filters[0]", "s", 1);
        shared.share_key = "admission-tests-shared".into();
        let mut other = shared.clone();
        other.path = "c[1].filters[0]".into();
        let a = ChainRateLimits::build(&[shared], &store, &own);
        let b = ChainRateLimits::build(&[other], &store, &BucketRegistry::default());
        assert!(a.admit().is_ok());
        assert!(b.admit().is_err());
        assert_eq!(
            store.counter_value("local_rate_limit.s.rate_limited"),
            Some(1)
        );

        // Without a key, each chain has its own bucket.
        let c0 = ChainRateLimits::build(&[rate_limit("c[0].filters[0]", "o", 1)], &store, &own);
        let c1 = ChainRateLimits::build(&[rate_limit("c[1].filters[0]", "o", 1)], &store, &own);
        assert!(c0.admit().is_ok());
        assert!(c1.admit().is_ok());
        assert!(c0.admit().is_err());
    }
}
