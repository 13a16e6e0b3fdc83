//! Envoy's HTTP local rate limit filter (`envoy.filters.http.local_ratelimit`): a request takes
//! a token from the filter's bucket, or from the route's when its `typed_per_filter_config`
//! has a `LocalRateLimit` of its own (a bucket per configuration, shared by every worker and
//! connection, as in Envoy). `filter_enabled` decides whether the filter looks at a request at
//! all, `filter_enforced` whether a request over the limit is refused (`status`, default 429,
//! body `local_rate_limited`, flag `RL`) or only counted. Counters
//! `<stat_prefix>.http_local_rate_limit.{enabled,enforced,rate_limited,ok,shadow_mode}`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use quickshake_config::{HeaderMutations, HttpLocalRateLimit};
use quickshake_stats::{Counter, Store};

use crate::body::{full, Body};
use crate::fault::draw;
use crate::header_mutation::{self, Side};
use crate::token_bucket::TokenBucket;

/// One configuration's bucket and counters.
pub(crate) struct Limiter {
    bucket: Option<TokenBucket>,
    enabled: Counter,
    enforced: Counter,
    rate_limited: Counter,
    ok: Counter,
    /// Envoy 1.39.3 keeps it and leaves it 0 (a limit not enforced included).
    _shadow_mode: Counter,
}

/// The limiters by configuration (its `Arc`'s address, checked against a `Weak` so a freed
/// configuration's address reused by another does not inherit its bucket). Process-wide, so a
/// filter chain rebuilt from the same configuration (certificate rotation) keeps its buckets;
/// a new configuration (an xDS update) starts with full ones, as in Envoy.
type Limiters = HashMap<usize, (Weak<HttpLocalRateLimit>, Arc<Limiter>)>;

/// The limiter of `config`: the one alive, else a new one (a full bucket, its counters made).
pub(crate) fn limiter(config: &Arc<HttpLocalRateLimit>, store: &Store) -> Arc<Limiter> {
    static LIVE: OnceLock<Mutex<Limiters>> = OnceLock::new();
    let mut live = LIVE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let key = Arc::as_ptr(config) as usize;
    if let Some((cfg, l)) = live.get(&key) {
        if cfg.upgrade().is_some_and(|c| Arc::ptr_eq(&c, config)) {
            return l.clone();
        }
    }
    live.retain(|_, (cfg, _)| cfg.strong_count() > 0);
    let c = |n: &str| store.counter(&format!("{}.http_local_rate_limit.{n}", config.stat_prefix));
    let l = Arc::new(Limiter {
        bucket: config.token_bucket.as_ref().map(TokenBucket::new),
        enabled: c("enabled"),
        enforced: c("enforced"),
        rate_limited: c("rate_limited"),
        ok: c("ok"),
        _shadow_mode: c("shadow_mode"),
    });
    live.insert(key, (Arc::downgrade(config), l.clone()));
    l
}

/// `x-ratelimit-limit`, `x-ratelimit-remaining`, `x-ratelimit-reset` (seconds until the
/// bucket is full again, rounded up), for `enable_x_ratelimit_headers: DRAFT_VERSION_03`.
pub(crate) struct XRateLimit {
    limit: u32,
    remaining: u32,
    reset_s: u64,
}

impl XRateLimit {
    pub(crate) fn encode(&self, headers: &mut HeaderMap) {
        headers.insert("x-ratelimit-limit", HeaderValue::from(self.limit));
        headers.insert("x-ratelimit-remaining", HeaderValue::from(self.remaining));
        headers.insert("x-ratelimit-reset", HeaderValue::from(self.reset_s));
    }
}

/// The filter's verdict on a request.
pub(crate) enum Decision {
    /// On to the next filter, with the `x-ratelimit-*` headers for the response if configured.
    Pass(Option<XRateLimit>),
    /// Refused: the answer.
    Limited(Response<Body>),
}

/// Run the filter with `config` (the filter's or the route's) on one request.
pub(crate) fn decide(config: &Arc<HttpLocalRateLimit>, store: &Store) -> Decision {
    if !config.filter_enabled.hits(draw(config.filter_enabled)) {
        return Decision::Pass(None);
    }
    let l = limiter(config, store);
    l.enabled.inc();
    let Some(bucket) = &l.bucket else {
        l.ok.inc();
        return Decision::Pass(None);
    };
    let allowed = bucket.try_take();
    let x = config.x_ratelimit_headers.then(|| {
        let (remaining, until_full) = bucket.remaining();
        XRateLimit {
            limit: config.token_bucket.map_or(0, |b| b.max_tokens),
            remaining,
            reset_s: until_full.as_secs() + u64::from(until_full.subsec_nanos() > 0),
        }
    });
    if allowed {
        l.ok.inc();
        return Decision::Pass(x);
    }
    l.rate_limited.inc();
    if !config.filter_enforced.hits(draw(config.filter_enforced)) {
        return Decision::Pass(x);
    }
    l.enforced.inc();
    let mut resp = Response::new(full(Bytes::from_static(b"local_rate_limited")));
    *resp.status_mut() =
        StatusCode::from_u16(config.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain"),
    );
    let adds = HeaderMutations {
        response_add: config.response_headers_to_add.clone(),
        ..HeaderMutations::default()
    };
    header_mutation::apply(resp.headers_mut(), &[&adds], Side::Response);
    if let Some(x) = &x {
        x.encode(resp.headers_mut());
    }
    Decision::Limited(resp)
}
