//! Envoy's fault filter (`envoy.filters.http.fault`): a delay, then an abort, each for a share
//! of the requests, from the filter's `HTTPFault` or the matched route's override
//! (`typed_per_filter_config` under the filter's name); the header-controlled variants
//! (`header_delay`, `header_abort`) read Envoy's `x-envoy-fault-*` request headers.

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};
use quickshake_config::{
    FaultAbortKind, FaultConfig, Fraction, PerFilterConfig, Route, RouteAction, RouteConfig,
    VirtualHost,
};
use quickshake_stats::{Counter, Gauge, Store};

use crate::body::{error_response, full, Body};
use crate::per_filter;
use crate::routing::RequestView;

const DELAY_REQUEST: &str = "x-envoy-fault-delay-request";
const DELAY_PERCENTAGE: &str = "x-envoy-fault-delay-request-percentage";
const ABORT_REQUEST: &str = "x-envoy-fault-abort-request";
const ABORT_GRPC_REQUEST: &str = "x-envoy-fault-abort-grpc-request";
const ABORT_PERCENTAGE: &str = "x-envoy-fault-abort-request-percentage";
const DOWNSTREAM_NODE: &str = "x-envoy-downstream-service-node";

/// `http.<stat_prefix>.fault.*`.
pub(crate) struct FaultStats {
    aborts_injected: Counter,
    delays_injected: Counter,
    faults_overflow: Counter,
    active_faults: Gauge,
}

impl FaultStats {
    pub(crate) fn new(store: &Store, prefix: &str) -> Self {
        let c = |n: &str| store.counter(&format!("http.{prefix}.fault.{n}"));
        // Envoy creates this one with the others.
        c("response_rl_injected");
        FaultStats {
            aborts_injected: c("aborts_injected"),
            delays_injected: c("delays_injected"),
            faults_overflow: c("faults_overflow"),
            active_faults: store.gauge(&format!("http.{prefix}.fault.active_faults")),
        }
    }
}

/// A fault being injected: counted in `active_faults` until dropped (the request ends).
pub(crate) struct ActiveFault<'a>(&'a Gauge);

impl Drop for ActiveFault<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// What the filter did to a request.
#[derive(Default)]
pub(crate) struct Injected<'a> {
    /// `DI`, `FI` or `DI,FI` (Envoy's `%RESPONSE_FLAGS%`).
    pub flags: Option<&'static str>,
    /// The abort's answer.
    pub response: Option<Response<Body>>,
    pub active: Option<ActiveFault<'a>>,
}

/// A uniform draw in `0..f.denominator` (BoringSSL's RNG).
pub(crate) fn draw(f: Fraction) -> u32 {
    if f.numerator >= f.denominator {
        return 0;
    }
    let mut b = [0u8; 4];
    if boring::rand::rand_bytes(&mut b).is_err() {
        return f.denominator;
    }
    u32::from_le_bytes(b) % f.denominator.max(1)
}

fn header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

/// The share a header-controlled fault applies to: the header's numerator, at most the
/// configured one, over the configured denominator.
fn header_share(h: &HeaderMap, name: &str, configured: Fraction) -> Fraction {
    match header(h, name).and_then(|v| v.parse::<u32>().ok()) {
        Some(n) => Fraction {
            numerator: n.min(configured.numerator),
            denominator: configured.denominator,
        },
        None => configured,
    }
}

/// The fault filter named `name` with its own `config`, for a request routed to `route`.
/// Sleeps the delay here.
pub(crate) async fn inject<'s>(
    name: &str,
    config: &FaultConfig,
    route: Option<(&Route, &VirtualHost, &RouteConfig)>,
    req: &RequestView<'_>,
    stats: &'s FaultStats,
) -> Injected<'s> {
    let config = match route.and_then(|r| per_filter::most_specific(name, r)) {
        Some(PerFilterConfig::Fault(c)) => c,
        _ => config,
    };
    let mut out = Injected::default();
    if config.delay.is_none() && config.abort.is_none() {
        return out;
    }
    if config
        .max_active_faults
        .is_some_and(|max| u64::try_from(stats.active_faults.value()).unwrap_or(0) >= max)
    {
        stats.faults_overflow.inc();
        return out;
    }
    if let Some(c) = &config.upstream_cluster {
        let target = route.and_then(|(r, _, _)| match &r.action {
            RouteAction::Route(t) => Some(t.cluster.as_str()),
            _ => None,
        });
        if target != Some(c.as_str()) {
            return out;
        }
    }
    let h = req.headers;
    if !config.downstream_nodes.is_empty()
        && !header(h, DOWNSTREAM_NODE)
            .is_some_and(|n| config.downstream_nodes.iter().any(|d| d == n))
    {
        return out;
    }
    if !req.matches_all(&config.headers) {
        return out;
    }
    let activate = |out: &mut Injected<'s>| {
        if out.active.is_none() {
            stats.active_faults.inc();
            out.active = Some(ActiveFault(&stats.active_faults));
        }
    };
    if let Some(d) = &config.delay {
        let share = match d.fixed {
            Some(_) => d.percentage,
            None => header_share(h, DELAY_PERCENTAGE, d.percentage),
        };
        let duration = match d.fixed {
            Some(f) => Some(f),
            None => header(h, DELAY_REQUEST)
                .and_then(|v| v.parse::<u64>().ok())
                .map(Duration::from_millis),
        };
        if let Some(duration) = duration.filter(|d| !d.is_zero()) {
            if share.hits(draw(share)) {
                activate(&mut out);
                stats.delays_injected.inc();
                out.flags = Some("DI");
                tokio::time::sleep(duration).await;
            }
        }
    }
    if let Some(a) = &config.abort {
        let share = match a.kind {
            FaultAbortKind::Header => header_share(h, ABORT_PERCENTAGE, a.percentage),
            _ => a.percentage,
        };
        let status = match a.kind {
            FaultAbortKind::Http(s) => Some(Abort::Http(s)),
            FaultAbortKind::Grpc(g) => Some(Abort::Grpc(g)),
            FaultAbortKind::Header => header(h, ABORT_REQUEST)
                .and_then(|v| v.parse::<u16>().ok())
                .filter(|s| (200..600).contains(s))
                .map(Abort::Http)
                .or_else(|| {
                    header(h, ABORT_GRPC_REQUEST)
                        .and_then(|v| v.parse::<u32>().ok())
                        .map(Abort::Grpc)
                }),
        };
        if let Some(status) = status {
            if share.hits(draw(share)) {
                activate(&mut out);
                stats.aborts_injected.inc();
                out.flags = Some(if out.flags.is_some() { "DI,FI" } else { "FI" });
                out.response = Some(abort_response(status, is_grpc(h)));
            }
        }
    }
    out
}

#[derive(Clone, Copy)]
enum Abort {
    Http(u16),
    Grpc(u32),
}

fn is_grpc(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// Envoy's local reply for an abort: `fault filter abort` with the status; to a gRPC request a
/// trailers-only 200 with `grpc-status` (the HTTP status mapped as Envoy maps it).
fn abort_response(abort: Abort, grpc_request: bool) -> Response<Body> {
    const TEXT: &str = "fault filter abort";
    let (http, grpc) = match abort {
        Abort::Http(s) => (s, http_to_grpc(s)),
        Abort::Grpc(g) => (200, g),
    };
    if !grpc_request {
        return error_response(http, TEXT);
    }
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    h.insert("grpc-status", HeaderValue::from(grpc));
    h.insert("grpc-message", HeaderValue::from_static(TEXT));
    r
}

/// Envoy's `Grpc::Utility::httpToGrpcStatus`.
fn http_to_grpc(status: u16) -> u32 {
    match status {
        400 => 13,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502 | 503 | 504 => 14,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares() {
        let none = Fraction {
            numerator: 0,
            denominator: 100,
        };
        assert!(!none.hits(draw(none)));
        assert!(Fraction::ALL.hits(draw(Fraction::ALL)));
        let mut h = HeaderMap::new();
        h.insert(DELAY_PERCENTAGE, HeaderValue::from_static("50"));
        let half = header_share(&h, DELAY_PERCENTAGE, Fraction::ALL);
        assert_eq!(half.numerator, 50);
        let capped = header_share(
            &h,
            DELAY_PERCENTAGE,
            Fraction {
                numerator: 10,
                denominator: 100,
            },
        );
        assert_eq!(capped.numerator, 10);
    }

    #[test]
    fn grpc_aborts() {
        let r = abort_response(Abort::Http(503), true);
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["grpc-status"], "14");
        let r = abort_response(Abort::Grpc(4), false);
        assert_eq!(r.status(), 200);
        let r = abort_response(Abort::Http(418), false);
        assert_eq!(r.status(), 418);
    }
}
