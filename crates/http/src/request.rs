//! The HTTP connection manager: hyper serving HTTP/1.1 and HTTP/2 on a (TLS) stream, path
//! normalization, the HTTP filters (health check, compressor), Envoy's route table (direct
//! responses, redirects, forwarding to a cluster through `proxy`), `http.<stat_prefix>.*` stats
//! and access logs.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use quickshake_config::{HeaderMutations, HttpFilter, Redirect, RouteAction, RouteTarget};

use crate::access_log::LogRecord;
use crate::body::{error_response, full, Body, RequestBody};
use crate::cors;
use crate::decode::{decode_filters, require_tls};
use crate::filters::{
    choose_compressor, compress, health_check, health_check_failing, health_check_response,
    HealthCheck,
};
use crate::grpc_stats::{self, Counted, Direction};
use crate::grpc_web::{self, GrpcWeb};
use crate::header_mutation::{self, Side};
use crate::header_policy;
use crate::mirror::Mirrors;
use crate::path_normalize::{normalize, Normalized};
use crate::proxy::{forward, AttemptCount, Forwarded};
use crate::rewrite::rewritten;
use crate::routing::{matched_prefix, select_route, select_virtual_host, RequestView};
use crate::runtime::{ConnInfo, HttpRuntime};
use crate::xfcc;

/// Serve one request: route it, answer (direct response, redirect, or forwarded to a cluster),
/// count it and log it.
/// `draining`: the server is draining (the health-check filter answers 503).
pub async fn handle_request<B: RequestBody>(
    mut req: Request<B>,
    rt: Arc<HttpRuntime>,
    conn: Arc<ConnInfo>,
    draining: bool,
) -> Result<Response<Body>, Infallible> {
    let start = Instant::now();
    conn.active_requests.fetch_add(1, Ordering::Relaxed);
    conn.touch();
    let stats = &rt.stats;
    stats.downstream_rq_total.inc();
    let protocol = match req.version() {
        http::Version::HTTP_3 => {
            stats.downstream_rq_http3_total.inc();
            "HTTP/3"
        }
        http::Version::HTTP_2 => {
            stats.downstream_rq_http2_total.inc();
            "HTTP/2"
        }
        http::Version::HTTP_10 => {
            stats.downstream_rq_http1_total.inc();
            "HTTP/1.0"
        }
        _ => {
            stats.downstream_rq_http1_total.inc();
            "HTTP/1.1"
        }
    };
    // Envoy's codecs apply `headers_with_underscores_action` before anything else sees the
    // request.
    let version = req.version();
    if version == http::Version::HTTP_10 && !req.headers().contains_key(header::HOST) {
        if let Some(h) = &rt.default_host_for_http_10 {
            req.headers_mut().insert(header::HOST, h.clone());
        }
    }
    let refused = header_policy::underscores(
        req.headers_mut(),
        rt.headers_with_underscores_action,
        version,
    );
    let authority = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| header_str(&req, header::HOST.as_str()))
        .unwrap_or_default();
    let mut record =
        (!rt.loggers.is_empty()).then(|| log_record(&req, &authority, protocol, &conn));
    let (mut resp, fwd) = match refused {
        Some(resp) => (
            resp,
            Outcome {
                details: Some(match version {
                    http::Version::HTTP_2 => "http2.unexpected_underscore",
                    http::Version::HTTP_3 => "http3.unexpected_underscore",
                    _ => "http1.unexpected_underscore",
                }),
                ..Outcome::default()
            },
        ),
        None => route_request(req, &rt, &conn, &authority, draining).await,
    };
    if let Some(r) = record.as_mut() {
        r.response_flags = fwd.response_flags;
        r.response_code_details = fwd.details;
        r.upstream_cluster = fwd.upstream_cluster;
        r.route_name = fwd.route_name;
    }
    let fwd = fwd.forwarded;
    header_policy::server_header(
        resp.headers_mut(),
        rt.server_header_transformation,
        &rt.server_name,
    );
    if rt.health_check_failed.value() != 0 {
        health_check_failing(&rt.http_filters, protocol, &mut resp);
    }
    let status = resp.status().as_u16();
    let class = usize::from(status / 100).clamp(1, 5) - 1;
    stats.downstream_rq_xx[class].inc();
    stats.downstream_rq_completed.inc();
    let elapsed = start.elapsed();
    stats
        .downstream_rq_time
        .record(elapsed.as_secs_f64() * 1000.0);
    if let Some(r) = record.as_mut() {
        r.response_code = status;
        r.bytes_sent = hyper::body::Body::size_hint(resp.body())
            .exact()
            .unwrap_or(0);
        r.duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        if let Some(f) = fwd {
            if f.upstream_host.is_some() && r.response_code_details.is_none() {
                r.response_code_details = Some("via_upstream");
            }
            r.upstream_host = f.upstream_host;
            r.upstream_local_address = f.upstream_local_address;
            // The access log shows these as they were sent upstream.
            for (name, value) in [
                ("x-forwarded-for", f.x_forwarded_for),
                ("x-request-id", f.request_id),
            ] {
                if let Some(v) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
                    r.request_headers.insert(name, v);
                }
            }
        }
        r.response_headers = resp.headers().clone();
        for l in &rt.loggers {
            l.log(r);
        }
    }
    conn.touch();
    conn.active_requests.fetch_sub(1, Ordering::Relaxed);
    Ok(resp)
}

/// How a request was answered, for the access log.
#[derive(Default)]
struct Outcome {
    forwarded: Option<Forwarded>,
    /// Envoy's `%RESPONSE_FLAGS%` (`NR`, `NC`).
    response_flags: Option<&'static str>,
    /// Envoy's `%RESPONSE_CODE_DETAILS%` where quickshake sets one.
    details: Option<&'static str>,
    /// `%UPSTREAM_CLUSTER%`: the cluster the route names, when it exists.
    upstream_cluster: Option<String>,
    /// `%ROUTE_NAME%`: the matched route's name, when it has one.
    route_name: Option<String>,
}

/// Path normalization, the HTTP filters before the router, then the route.
async fn route_request<B: RequestBody>(
    mut req: Request<B>,
    rt: &Arc<HttpRuntime>,
    conn: &Arc<ConnInfo>,
    authority: &str,
    draining: bool,
) -> (Response<Body>, Outcome) {
    let stats = &rt.stats;
    let pq = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string());
    match normalize(&pq, &rt.path_normalization) {
        Normalized::Continue(p) if p != pq => {
            let mut parts = req.uri().clone().into_parts();
            if let Ok(new) = p.parse() {
                parts.path_and_query = Some(new);
                if let Ok(uri) = Uri::from_parts(parts) {
                    *req.uri_mut() = uri;
                }
            }
        }
        Normalized::Continue(_) => {}
        Normalized::Redirect(p) => {
            stats.downstream_rq_redirected_with_normalized_path.inc();
            let mut resp = direct(307, None);
            if let Ok(v) = HeaderValue::from_str(&p) {
                resp.headers_mut().insert(header::LOCATION, v);
            }
            return (resp, Outcome::default());
        }
        Normalized::Reject => {
            stats.downstream_rq_failed_path_normalization.inc();
            return (
                error_response(400, "Bad Request"),
                Outcome {
                    details: Some("path_normalization_failed"),
                    ..Outcome::default()
                },
            );
        }
    }
    // Envoy's connection manager sets these before filters and routing.
    header_policy::external_request(req.headers_mut(), rt.use_remote_address, &conn.client_ip());
    xfcc::apply(
        req.headers_mut(),
        rt.forward_client_cert,
        conn.tls_peer.as_ref(),
    );
    let table = rt.routes.load_full();
    let failing = draining || rt.health_check_failed.value() != 0;
    let (hc, vh, route) = {
        let view = RequestView::of(&req, authority, conn.tls_version.is_some());
        let hc = health_check(&rt.http_filters, &view, failing);
        let vh = select_virtual_host(&table.config, authority);
        let route = vh.and_then(|vh| select_route(vh, &view).map(|r| (vh, r)));
        (hc, vh, route)
    };
    // Header mutations: route, virtual host, route configuration.
    let levels: Vec<&HeaderMutations> = match route {
        Some((vh, r)) => [&r.mutations, &vh.mutations, &table.config.mutations]
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect(),
        None => Vec::new(),
    };
    header_mutation::apply(req.headers_mut(), &levels, Side::Request);
    if let HealthCheck::Answer(status) = hc {
        return (health_check_response(status), Outcome::default());
    }
    // Envoy checks the virtual host's `require_tls` before its routes.
    if let Some(vh) = vh {
        if let Some(resp) = require_tls(vh, &req, authority, conn) {
            stats.rq_redirect.inc();
            return (resp, Outcome::default());
        }
    }
    let full_route = route.map(|(vh, r)| (r, vh, &table.config));
    let filtered = match decode_filters(&req, rt, full_route, authority, conn).await {
        Ok(f) => f,
        Err(a) => {
            // As in Envoy, the route's cluster is known (`%UPSTREAM_CLUSTER%`) once routed.
            let upstream_cluster = route.and_then(|(_, r)| match &r.action {
                RouteAction::Route(t) if table.clusters.contains_key(&t.cluster) => {
                    Some(t.cluster.clone())
                }
                _ => None,
            });
            let outcome = Outcome {
                response_flags: a.flags,
                details: Some(a.details),
                upstream_cluster,
                route_name: route.map(|(_, r)| r.name.clone()).filter(|n| !n.is_empty()),
                ..Outcome::default()
            };
            return (a.response, outcome);
        }
    };
    let route = route.map(|(_, r)| r);
    let method = req.method().clone();
    let compressor = choose_compressor(&rt.http_filters, full_route, &method, req.headers_mut());
    let grpc_web = if rt
        .http_filters
        .iter()
        .any(|f| matches!(f, HttpFilter::GrpcWeb))
    {
        grpc_web::decode(&method, req.headers_mut())
    } else {
        GrpcWeb::Pass
    };
    if grpc_web == GrpcWeb::Text {
        return (grpc_web::text_refused(), Outcome::default());
    }
    let mut outcome = Outcome {
        route_name: route.map(|r| r.name.clone()).filter(|n| !n.is_empty()),
        response_flags: filtered.flags,
        ..Outcome::default()
    };
    let resp = match route.map(|r| (r, &r.action)) {
        Some((_, RouteAction::DirectResponse { status, body })) => {
            stats.rq_direct_response.inc();
            outcome.details = Some("direct_response");
            direct(*status, body.clone())
        }
        Some((route, RouteAction::Redirect(r))) => {
            stats.rq_redirect.inc();
            redirect(r, &req, authority, conn, matched_prefix(route))
        }
        Some((route, RouteAction::Route(target))) => {
            match pick_cluster(target, &mut req, conn) {
                name if table.clusters.contains_key(name) => {
                    let cluster = &table.clusters[name];
                    outcome.upstream_cluster = Some(name.to_owned());
                    let attempts = full_route.map(|(_, vh, _)| AttemptCount {
                        request: vh.include_request_attempt_count,
                        response: vh.include_attempt_count_in_response,
                    });
                    let mirrors: Mirrors<'_> = target
                        .mirrors
                        .iter()
                        .filter_map(|m| Some((m, table.clusters.get(&m.cluster)?.clone())))
                        .collect();
                    let call = grpc_stats::start(
                        &rt.http_filters,
                        req.headers(),
                        req.uri().path(),
                        cluster.stats().scope(),
                    );
                    let req = req.map(|b| Counted::new(b, call.clone(), Direction::Request));
                    let (resp, fwd) = forward(
                        req,
                        target,
                        matched_prefix(route),
                        (cluster, &mirrors),
                        (rt, conn),
                        attempts.unwrap_or_default(),
                    )
                    .await;
                    // An upstream failure's flag wins over a filter's (`DI`).
                    if fwd.response_flags.is_some() {
                        outcome.response_flags = fwd.response_flags;
                    }
                    outcome.details = outcome.details.or(fwd.details);
                    outcome.forwarded = Some(fwd);
                    // A response that ends with its headers (trailers-only) ends the call there.
                    let ended = hyper::body::Body::is_end_stream(resp.body());
                    match call.filter(|c| !(ended && c.trailers_only(resp.headers()))) {
                        Some(c) => resp
                            .map(|b| BodyExt::boxed(Counted::new(b, Some(c), Direction::Response))),
                        None => resp,
                    }
                }
                _ => {
                    // A route naming a cluster that does not exist (RDS may deliver it before
                    // CDS does): Envoy's 503 with `NC`, or the route's
                    // `cluster_not_found_response_code`.
                    stats.no_cluster.inc();
                    outcome.response_flags = Some("NC");
                    outcome.details = Some("cluster_not_found");
                    direct(target.cluster_not_found_status, None)
                }
            }
        }
        None => {
            stats.no_route.inc();
            outcome.response_flags = Some("NR");
            outcome.details = Some("route_not_found");
            direct(404, None)
        }
    };
    let mut resp = resp;
    header_mutation::apply(resp.headers_mut(), &levels, Side::Response);
    if let Some(a) = &filtered.cors {
        cors::encode(a, resp.headers_mut());
    }
    if let Some(x) = &filtered.rate_limit_headers {
        x.encode(resp.headers_mut());
    }
    drop(filtered);
    if grpc_web == GrpcWeb::Translated {
        resp = grpc_web::encode(resp);
    }
    let resp = match compressor {
        Some((c, accepted)) => compress(c, accepted, resp),
        None => resp,
    };
    (resp, outcome)
}

fn direct(status: u16, body: Option<String>) -> Response<Body> {
    let body = body.unwrap_or_default();
    let has_body = !body.is_empty();
    let mut resp = Response::new(full(Bytes::from(body)));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if has_body {
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    }
    resp
}

/// The route's cluster, or one of its `weighted_clusters` drawn by weight (whose request
/// header mutations are applied to `req`); with `use_hash_policy`, the request's hash (when
/// it has one) stands in for the draw, as in Envoy.
fn pick_cluster<'t, B>(target: &'t RouteTarget, req: &mut Request<B>, conn: &ConnInfo) -> &'t str {
    let total: u64 = target.weighted.iter().map(|w| u64::from(w.weight)).sum();
    if total == 0 {
        return &target.cluster;
    }
    let hash = match target.weighted_use_hash_policy {
        true => {
            crate::hash_policy::request_hash(
                &target.hash_policy,
                &crate::hash_policy::HashInput {
                    method: req.method(),
                    uri: req.uri(),
                    headers: req.headers(),
                    peer: &conn.peer,
                    local: &conn.local,
                },
            )
            .0
        }
        false => None,
    };
    let mut draw = hash.unwrap_or_else(|| {
        let mut b = [0u8; 8];
        let _ = boring::rand::rand_bytes(&mut b);
        u64::from_le_bytes(b)
    }) % total;
    for w in &target.weighted {
        if draw < u64::from(w.weight) {
            header_mutation::apply(req.headers_mut(), &[&w.mutations], Side::Request);
            return &w.name;
        }
        draw -= u64::from(w.weight);
    }
    &target.cluster
}

/// Envoy's `redirect` (`Http::Utility::newUri`): the scheme (`scheme_redirect`,
/// `https_redirect`, else the request's), the host (`host_redirect`, else the request's, its
/// port dropped when `port_redirect` is set or when it is the default port of a scheme that
/// changes), `port_redirect`, the path (`path_redirect`, keeping the request's query unless it
/// has its own, or the request's path after `prefix_rewrite`/`regex_rewrite`), `strip_query`;
/// `response_code` (301 default).
fn redirect<B>(
    r: &Redirect,
    req: &Request<B>,
    authority: &str,
    conn: &ConnInfo,
    matched_prefix: Option<&str>,
) -> Response<Body> {
    let request_scheme = if conn.tls_version.is_some() {
        "https"
    } else {
        "http"
    };
    let scheme = match &r.scheme_redirect {
        Some(s) => s.as_str(),
        None if r.https_redirect => "https",
        None => request_scheme,
    };
    let port = r.port_redirect.map(|p| format!(":{p}")).unwrap_or_default();
    let host = match &r.host_redirect {
        Some(h) => h.as_str(),
        None => redirect_host(authority, scheme, request_scheme, !port.is_empty()),
    };
    let pq = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let own_query = r.path_redirect.as_ref().is_some_and(|p| p.contains('?'));
    let mut path = match &r.path_redirect {
        Some(p) if own_query => p.clone(),
        Some(p) => format!("{p}{}", pq.find('?').map_or("", |i| &pq[i..])),
        None => rewritten(
            pq,
            r.prefix_rewrite.as_deref(),
            r.regex_rewrite.as_ref(),
            matched_prefix,
        )
        .unwrap_or_else(|| pq.to_owned()),
    };
    if !path.starts_with('/') {
        path.insert(0, '/');
    }
    if r.strip_query && !own_query {
        if let Some(i) = path.find('?') {
            path.truncate(i);
        }
    }
    let mut resp = Response::new(full(Bytes::new()));
    *resp.status_mut() =
        StatusCode::from_u16(r.response_code).unwrap_or(StatusCode::MOVED_PERMANENTLY);
    if let Ok(v) = HeaderValue::from_str(&format!("{scheme}://{host}{port}{path}")) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

/// Envoy's `processRequestHost`: the request's authority, without its port when a new port
/// is set, or when the scheme changes and the port is the old scheme's default.
fn redirect_host<'a>(
    authority: &'a str,
    scheme: &str,
    request_scheme: &str,
    new_port: bool,
) -> &'a str {
    let colon = match authority.rfind(':') {
        Some(c) if authority.rfind(']').is_none_or(|end| end < c) => c,
        _ => return authority,
    };
    let old_port = &authority[colon..];
    let default_port = match request_scheme {
        "https" => ":443",
        _ => ":80",
    };
    if new_port || (scheme != request_scheme && old_port == default_port) {
        &authority[..colon]
    } else {
        authority
    }
}

fn log_record<B>(req: &Request<B>, authority: &str, protocol: &str, conn: &ConnInfo) -> LogRecord {
    LogRecord {
        start: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default(),
        method: req.method().as_str().to_string(),
        path: req
            .uri()
            .path_and_query()
            .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string()),
        authority: authority.to_string(),
        protocol: protocol.to_string(),
        bytes_received: header_str(req, "content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        request_headers: req.headers().clone(),
        downstream_remote_address: conn.peer.clone(),
        downstream_local_address: conn.local.clone(),
        requested_server_name: conn.sni.clone(),
        tls_version: conn.tls_version.clone(),
        ..Default::default()
    }
}

fn header_str<B>(req: &Request<B>, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
