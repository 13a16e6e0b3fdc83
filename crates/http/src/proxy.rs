//! Forwarding a request to an upstream cluster (Envoy's `route` action): path rewrite, the
//! `x-forwarded-*` and `x-request-id` headers, per-try and whole-request timeouts, retries on
//! Envoy's `retry_on` conditions, WebSocket upgrades, and Envoy's error responses (503 when no
//! upstream is reachable, 504 on timeout).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, Uri};
use http_body_util::BodyExt;
use quickshake_config::{RetryPolicy, RouteTarget};
use quickshake_upstream::{Cluster, PreviousHosts, RequestHash, UpstreamBody, UpstreamError};

use crate::body::{error_response, Body, RequestBody};
use crate::mirror::{self, Mirrors};
use crate::rewrite::{rewritten, set_authority};
use crate::runtime::{ConnInfo, HttpRuntime};
use crate::stream_idle::{self, Activity, Expired};
use crate::upgrade::{upgrade_refused, websocket_upgrade, Upgrade};

/// Hop-by-hop headers (RFC 9110 section 7.6.1) never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authenticate",
];

/// What the access log learns from forwarding.
#[derive(Default)]
pub(crate) struct Forwarded {
    pub upstream_host: Option<String>,
    /// The local address of the upstream connection.
    pub upstream_local_address: Option<String>,
    /// `x-forwarded-for` and `x-request-id` as sent upstream (the access log shows these).
    pub x_forwarded_for: Option<String>,
    pub request_id: Option<String>,
    /// Envoy's `%RESPONSE_FLAGS%` for a request that failed upstream (`UT`, `SI`, `UF`, ...).
    pub response_flags: Option<&'static str>,
    /// Envoy's `%RESPONSE_CODE_DETAILS%` where quickshake sets one for such a failure.
    pub details: Option<&'static str>,
}

/// The virtual host's `include_request_attempt_count` and `include_attempt_count_in_response`:
/// `x-envoy-attempt-count` on each upstream attempt and on the response.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AttemptCount {
    pub request: bool,
    pub response: bool,
}

const ATTEMPT_COUNT: HeaderName = HeaderName::from_static("x-envoy-attempt-count");

/// Forward one request. `matched_prefix` is the route's prefix (for `prefix_rewrite`);
/// `mirrors` the clusters of the route's `request_mirror_policies`.
pub(crate) async fn forward<B: RequestBody>(
    req: Request<B>,
    target: &RouteTarget,
    matched_prefix: Option<&str>,
    (cluster, mirrors): (&Cluster, &Mirrors<'_>),
    (rt, conn): (&Arc<HttpRuntime>, &Arc<ConnInfo>),
    attempts: AttemptCount,
) -> (Response<Body>, Forwarded) {
    let started = Instant::now();
    let (mut parts, body) = req.into_parts();
    // The upstream connection's protocol is the cluster's: hyper's HTTP/1.1 client takes an
    // HTTP/2 request's version as HTTP/1.1 but refuses HTTP/3's.
    if parts.version == http::Version::HTTP_3 {
        parts.version = http::Version::HTTP_11;
    }
    // Envoy's upgrade decision: the route's `upgrade_configs` entry for the type, else the
    // connection manager's; an upgrade neither enables is refused with 403.
    let upgrade = match websocket_upgrade(&parts.headers, &rt.upgrade_types, &target.upgrades) {
        Upgrade::None => false,
        Upgrade::Allowed => true,
        Upgrade::Refused => return (upgrade_refused(), Forwarded::default()),
    };
    rewrite_path(&mut parts.uri, target, matched_prefix);
    if let Some(host) = &target.host_rewrite_literal {
        set_authority(&mut parts, host, target.append_x_forwarded_host);
    }
    prepare_headers(&mut parts.headers, rt, conn, upgrade);
    let mut set_cookies = Vec::new();
    if !target.hash_policy.is_empty() {
        let input = crate::hash_policy::HashInput {
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
            peer: &conn.peer,
            local: &conn.local,
        };
        let (hash, cookies) = crate::hash_policy::request_hash(&target.hash_policy, &input);
        if let Some(h) = hash {
            parts.extensions.insert(RequestHash(h));
        }
        set_cookies = cookies;
    }
    let header = |n: &str| {
        parts
            .headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let mut fwd = Forwarded {
        upstream_host: None,
        upstream_local_address: None,
        x_forwarded_for: header("x-forwarded-for"),
        request_id: header("x-request-id"),
        ..Forwarded::default()
    };
    if upgrade {
        return (
            crate::upgrade::forward_upgrade(parts, body, cluster).await,
            fwd,
        );
    }
    // Buffer a small body so it can be sent again; a larger one is forwarded once, as Envoy
    // does (its retries are then off).
    let policy = target.retry_policy.as_ref();
    let activity = Activity::new(started);
    let (buffered, mut streaming) = match policy.is_some() || !mirrors.is_empty() {
        true => match buffer_for_retry(body, rt.retry_buffer_limit).await {
            Ok(replay) => (Some(replay), None),
            Err(Ok(once)) => (None, Some(activity.watch(once))),
            Err(Err(())) => return (error_response(400, "request body could not be read"), fwd),
        },
        false => (None, Some(activity.watch(body.boxed()))),
    };
    let copy = buffered.as_ref().map(|b| move || b.body());
    mirror::send(
        &parts,
        copy.as_ref().map(|f| f as &dyn Fn() -> Body),
        mirrors,
    );
    // A fully buffered body was the stream's last activity, and all of the request.
    if buffered.is_some() {
        activity.touch();
        activity.complete();
    }
    let tries = if buffered.is_none() {
        1
    } else {
        1 + policy.map_or(0, |p| p.num_retries)
    };
    let timeout = route_timeout(target, &parts.headers);
    // The route's `idle_timeout` stands in for the connection manager's (`0s`: none).
    let idle_timeout = match target.idle_timeout {
        Some(d) => Some(d).filter(|d| !d.is_zero()),
        None => rt.stream_idle_timeout,
    };
    let deadline = timeout.map(|t| started + t);
    let previous_hosts = policy.filter(|p| p.previous_hosts).map(|p| PreviousHosts {
        avoid: true,
        max_attempts: p.host_selection_retry_max_attempts,
        ..PreviousHosts::default()
    });
    let mut last = error_response(503, "no healthy upstream");
    for attempt in 0..tries {
        if attempt > 0 {
            if let Some(wait) = policy.and_then(|p| back_off(p, attempt)) {
                tokio::time::sleep(wait).await;
            }
            cluster.stats().rq_retry.inc();
        }
        let body = match (&buffered, streaming.take()) {
            (Some(b), _) => b.body(),
            (None, Some(s)) => s,
            (None, None) => break,
        };
        let per_try = policy.and_then(|p| p.per_try_timeout);
        let mut try_parts = parts.clone();
        if !rt.suppress_envoy_headers {
            set_expected_timeout(&mut try_parts.headers, timeout, per_try, started);
        }
        if attempts.request {
            try_parts
                .headers
                .insert(ATTEMPT_COUNT, HeaderValue::from(attempt + 1));
        }
        if let Some(p) = &previous_hosts {
            try_parts.extensions.insert(p.clone());
        }
        let req = Request::from_parts(try_parts, body);
        let budget = match (
            deadline.map(|d| d.saturating_duration_since(Instant::now())),
            per_try,
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let outcome = match stream_idle::wait(cluster.send(req), budget, idle_timeout, &activity)
            .await
        {
            Ok(o) => o,
            Err(Expired::Idle) => {
                rt.stats.downstream_rq_idle_timeout.inc();
                fwd.response_flags = Some("SI");
                fwd.details = Some("stream_idle_timeout");
                return (
                    error_response(activity.idle_status(), "stream timeout"),
                    fwd,
                );
            }
            Err(Expired::Budget) => {
                cluster.stats().rq_timeout.inc();
                last = error_response(504, "upstream request timeout");
                let whole_expired = deadline.is_some_and(|d| Instant::now() >= d);
                if whole_expired || !retries_on(policy, "reset") || retry_permit(cluster).is_none()
                {
                    fwd.response_flags = Some("UT");
                    fwd.details = Some(if whole_expired {
                        "response_timeout"
                    } else {
                        "upstream_per_try_timeout"
                    });
                    return (last, fwd);
                }
                continue;
            }
        };
        match outcome {
            Ok(resp) if retriable_status(policy, &resp) && attempt + 1 < tries => {
                last = finish(resp, started, rt);
            }
            Ok(resp) => {
                fwd.upstream_host = resp
                    .extensions()
                    .get::<quickshake_upstream::UpstreamHost>()
                    .map(|h| h.0.to_string());
                fwd.upstream_local_address = resp
                    .extensions()
                    .get::<quickshake_upstream::UpstreamLocalAddress>()
                    .map(|l| l.0.to_string());
                let mut resp = finish(resp, started, rt);
                // A cookie the hash policy generated goes back to the client (Envoy adds it
                // to the upstream's response headers).
                for c in &set_cookies {
                    if let Ok(v) = HeaderValue::from_str(c) {
                        resp.headers_mut().append(header::SET_COOKIE, v);
                    }
                }
                if attempts.response {
                    resp.headers_mut()
                        .insert(ATTEMPT_COUNT, HeaderValue::from(attempt + 1));
                }
                return (resp, fwd);
            }
            Err(e) => {
                last = upstream_error_response(&e, rt.suppress_envoy_headers);
                if !retriable_error(policy, &e)
                    || attempt + 1 >= tries
                    || retry_permit(cluster).is_none()
                {
                    fwd.response_flags = Some(e.response_flag());
                    if matches!(e, UpstreamError::NoHealthyEndpoint) {
                        fwd.details = Some("no_healthy_upstream");
                    }
                    return (last, fwd);
                }
            }
        }
    }
    (last, fwd)
}

/// A `max_retries` circuit-breaker slot for one retry (Envoy counts overflows and stops).
fn retry_permit(cluster: &Cluster) -> Option<quickshake_upstream::Permit> {
    cluster.try_retry().ok()
}

fn retries_on(policy: Option<&RetryPolicy>, cond: &str) -> bool {
    policy.is_some_and(|p| p.retry_on.iter().any(|r| r == cond))
}

/// Whether the response is one `retry_on` retries: by its status, or (the gRPC conditions) by
/// the `grpc-status` of a trailers-only response, as Envoy reads it.
fn retriable_status<T>(policy: Option<&RetryPolicy>, resp: &Response<T>) -> bool {
    let Some(p) = policy else { return false };
    let status = resp.status().as_u16();
    let grpc = resp
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u32>().ok());
    p.retry_on.iter().any(|r| match r.as_str() {
        "5xx" => status >= 500,
        "gateway-error" => matches!(status, 502..=504),
        "retriable-status-codes" => p.retriable_status_codes.contains(&status),
        "cancelled" => grpc == Some(1),
        "deadline-exceeded" => grpc == Some(4),
        "resource-exhausted" => grpc == Some(8),
        "internal" => grpc == Some(13),
        "unavailable" => grpc == Some(14),
        _ => false,
    })
}

/// The request's timeout: the route's `timeout`, or for a gRPC request on a route with
/// `max_grpc_timeout` its `grpc-timeout` (less `grpc_timeout_offset` when larger; none when
/// absent) capped by `max_grpc_timeout` unless that is zero, as Envoy's router computes it.
fn route_timeout(target: &RouteTarget, h: &HeaderMap) -> Option<Duration> {
    let Some(max) = target.max_grpc_timeout else {
        return target.timeout;
    };
    let grpc_request = h
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if !grpc_request {
        return target.timeout;
    }
    let mut t = h
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(grpc_timeout)
        .unwrap_or_default();
    if let Some(off) = target.grpc_timeout_offset {
        if off < t {
            t -= off;
        }
    }
    if !max.is_zero() && (t.is_zero() || t > max) {
        t = max;
    }
    Some(t).filter(|t| !t.is_zero())
}

/// A `grpc-timeout` value: up to 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`).
fn grpc_timeout(v: &str) -> Option<Duration> {
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

fn retriable_error(policy: Option<&RetryPolicy>, e: &UpstreamError) -> bool {
    let Some(p) = policy else { return false };
    p.retry_on.iter().any(|r| match r.as_str() {
        "5xx" | "gateway-error" | "connect-failure" => e.is_retriable_connect_failure(),
        "reset" => e.is_reset(),
        _ => false,
    })
}

/// Envoy's error responses, with its body texts; `x-envoy-overloaded` on an overflow unless
/// the router's `suppress_envoy_headers`.
fn upstream_error_response(e: &UpstreamError, suppress_envoy_headers: bool) -> Response<Body> {
    match e {
        UpstreamError::Overflow(_) => {
            let mut r = error_response(503, "upstream connect error or disconnect/reset before headers. reset reason: overflow");
            if !suppress_envoy_headers {
                r.headers_mut()
                    .insert("x-envoy-overloaded", HeaderValue::from_static("true"));
            }
            r
        }
        UpstreamError::NoHealthyEndpoint => error_response(503, "no healthy upstream"),
        e if e.is_retriable_connect_failure() => error_response(
            503,
            "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
        ),
        _ => error_response(503, "upstream connect error or disconnect/reset before headers. reset reason: connection termination"),
    }
}

/// The upstream's response as it goes downstream: hop-by-hop headers dropped, and Envoy's
/// `x-envoy-upstream-service-time` unless the router's `suppress_envoy_headers`.
fn finish(resp: Response<UpstreamBody>, started: Instant, rt: &HttpRuntime) -> Response<Body> {
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    if !rt.suppress_envoy_headers {
        let ms = started.elapsed().as_millis().to_string();
        if let Ok(v) = HeaderValue::from_str(&ms) {
            parts
                .headers
                .insert(HeaderName::from_static("x-envoy-upstream-service-time"), v);
        }
    }
    Response::from_parts(parts, body.boxed())
}

/// Envoy's `x-envoy-expected-rq-timeout-ms` on an upstream attempt: the per-try timeout, else
/// the route's, capped by what is left of the route's (1 once it is spent); none when neither
/// is set (Envoy's `FilterUtility::setTimeoutHeaders`).
fn set_expected_timeout(
    h: &mut HeaderMap,
    global: Option<Duration>,
    per_try: Option<Duration>,
    started: Instant,
) {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let Some(mut expected) = per_try.or(global).map(ms).filter(|t| *t > 0) else {
        return;
    };
    if let Some(g) = global.map(ms).filter(|g| *g > 0) {
        let elapsed = ms(started.elapsed());
        expected = if elapsed >= g {
            1
        } else {
            expected.min(g - elapsed)
        };
    }
    h.insert(
        HeaderName::from_static("x-envoy-expected-rq-timeout-ms"),
        HeaderValue::from(expected),
    );
}

/// Envoy's jittered exponential back-off before retry `n` (from 1).
fn back_off(p: &RetryPolicy, n: u32) -> Option<Duration> {
    let (base, max) = p.back_off?;
    let ceiling = base
        .saturating_mul(1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX))
        .min(max);
    let ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
    let mut b = [0u8; 8];
    boring::rand::rand_bytes(&mut b).ok()?;
    Some(Duration::from_millis(
        u64::from_le_bytes(b) % ms.saturating_add(1),
    ))
}

fn rewrite_path(uri: &mut Uri, target: &RouteTarget, matched_prefix: Option<&str>) {
    let pq = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let Some(new) = rewritten(
        pq,
        target.prefix_rewrite.as_deref(),
        target.regex_rewrite.as_deref(),
        matched_prefix,
    ) else {
        return;
    };
    if let Ok(p) = new.parse::<http::uri::PathAndQuery>() {
        let mut parts = std::mem::take(uri).into_parts();
        parts.path_and_query = Some(p);
        if let Ok(u) = Uri::from_parts(parts) {
            *uri = u;
        }
    }
}

fn strip_hop_by_hop(h: &mut HeaderMap) {
    // `te: trailers` is the one TE value that crosses a proxy (gRPC servers require it).
    let te_trailers = h
        .get(header::TE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("trailers"))
        });
    let listed: Vec<String> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .collect();
    for name in HOP_BY_HOP.iter().map(|s| s.to_string()).chain(listed) {
        h.remove(name.as_str());
    }
    if te_trailers {
        h.insert(header::TE, HeaderValue::from_static("trailers"));
    }
}

/// A request body kept to be sent again on a retry: its data and trailers.
struct Replay {
    data: Bytes,
    trailers: Option<HeaderMap>,
}

impl Replay {
    fn body(&self) -> Body {
        let mut frames = vec![hyper::body::Frame::data(self.data.clone())];
        if let Some(t) = &self.trailers {
            frames.push(hyper::body::Frame::trailers(t.clone()));
        }
        let stream = futures_util::stream::iter(frames.into_iter().map(Ok::<_, hyper::Error>));
        http_body_util::StreamBody::new(stream).boxed()
    }
}

/// Read the body up to `limit` bytes: `Ok` when it fits (replayable); `Err(Ok(body))`
/// with the bytes read so far chained in front of the rest when it does not; `Err(Err(()))`
/// when reading failed.
async fn buffer_for_retry<B: RequestBody>(
    mut body: B,
    limit: usize,
) -> Result<Replay, Result<Body, ()>> {
    let mut data = bytes::BytesMut::new();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Err(()))?;
        match frame.into_data() {
            Ok(d) => {
                data.extend_from_slice(&d);
                if data.len() > limit {
                    let head = futures_util::stream::iter([Ok::<_, hyper::Error>(
                        hyper::body::Frame::data(data.freeze()),
                    )]);
                    let rest = http_body_util::BodyStream::new(body);
                    let chained = futures_util::StreamExt::chain(head, rest);
                    return Err(Ok(http_body_util::StreamBody::new(chained).boxed()));
                }
            }
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    Ok(Replay {
        data: data.freeze(),
        trailers,
    })
}

/// Envoy's request headers: `x-forwarded-proto`, `x-forwarded-for` (appended with the peer when
/// `use_remote_address`), `x-request-id` (generated when absent).
fn prepare_headers(h: &mut HeaderMap, rt: &HttpRuntime, conn: &ConnInfo, upgrade: bool) {
    let (upgrade_hdr, conn_hdr) = (
        h.get(header::UPGRADE).cloned(),
        h.get(header::CONNECTION).cloned(),
    );
    strip_hop_by_hop(h);
    // Without `proxy_100_continue` the client's `100 Continue` comes from here (hyper sends it
    // as the body is first read) and, as in Envoy, `Expect` does not go upstream.
    if !rt.proxy_100_continue
        && h.get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
    {
        h.remove(header::EXPECT);
    }
    if upgrade {
        if let (Some(u), Some(c)) = (upgrade_hdr, conn_hdr) {
            h.insert(header::UPGRADE, u);
            h.insert(header::CONNECTION, c);
        }
    }
    let proto = if conn.tls_version.is_some() {
        "https"
    } else {
        "http"
    };
    h.insert(
        HeaderName::from_static("x-forwarded-proto"),
        HeaderValue::from_static(proto),
    );
    if rt.use_remote_address {
        let client = conn.client_ip();
        let xff = match h.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            Some(prev) if !prev.is_empty() => format!("{prev}, {client}"),
            _ => client,
        };
        if let Ok(v) = HeaderValue::from_str(&xff) {
            h.insert(HeaderName::from_static("x-forwarded-for"), v);
        }
    }
    if rt.generate_request_id && !h.contains_key("x-request-id") {
        if let Ok(v) = HeaderValue::from_str(&request_id()) {
            h.insert(HeaderName::from_static("x-request-id"), v);
        }
    }
}

/// A random UUID v4 string (BoringSSL's RNG).
fn request_id() -> String {
    let mut b = [0u8; 16];
    if boring::rand::rand_bytes(&mut b).is_err() {
        let t =
            Instant::now().elapsed().as_nanos() as u64 ^ Duration::from_secs(1).as_nanos() as u64;
        b[..8].copy_from_slice(&t.to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}
