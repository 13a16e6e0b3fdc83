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
use quickshake_config::{HeaderMutations, Redirect, RouteAction};

use crate::access_log::LogRecord;
use crate::body::{error_response, full, Body, RequestBody};
use crate::filters::{
    choose_compressor, compress, health_check, health_check_failing, health_check_response,
    HealthCheck,
};
use crate::header_mutation::{self, Side};
use crate::header_policy;
use crate::path_normalize::{normalize, Normalized};
use crate::proxy::{forward, Forwarded};
use crate::routing::{matched_prefix, select_route, select_virtual_host, RequestView};
use crate::runtime::{ConnInfo, HttpRuntime};

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
    let table = rt.routes.load_full();
    let failing = draining || rt.health_check_failed.value() != 0;
    let (hc, route) = {
        let pq = req.uri().path_and_query().map_or("/", |p| p.as_str());
        let view = RequestView {
            path: req.uri().path(),
            path_and_query: pq,
            method: req.method().as_str(),
            authority,
            scheme: if conn.tls_version.is_some() {
                "https"
            } else {
                "http"
            },
            headers: req.headers(),
        };
        let hc = health_check(&rt.http_filters, &view, failing);
        let vh = select_virtual_host(&table.config, authority);
        let route = vh.and_then(|vh| select_route(vh, &view).map(|r| (vh, r)));
        (hc, route)
    };
    // Header mutations: route, virtual host, route configuration.
    let levels: Vec<&HeaderMutations> = match route {
        Some((vh, r)) => [&r.mutations, &vh.mutations, &table.config.mutations]
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect(),
        None => Vec::new(),
    };
    let route = route.map(|(_, r)| r);
    header_mutation::apply(req.headers_mut(), &levels, Side::Request);
    if let HealthCheck::Answer(status) = hc {
        return (health_check_response(status), Outcome::default());
    }
    let method = req.method().clone();
    let compressor = choose_compressor(&rt.http_filters, &method, req.headers_mut());
    let mut outcome = Outcome {
        route_name: route.map(|r| r.name.clone()).filter(|n| !n.is_empty()),
        ..Outcome::default()
    };
    let resp = match route.map(|r| (r, &r.action)) {
        Some((_, RouteAction::DirectResponse { status, body })) => {
            stats.rq_direct_response.inc();
            outcome.details = Some("direct_response");
            direct(*status, body.clone())
        }
        Some((_, RouteAction::Redirect(r))) => {
            stats.rq_redirect.inc();
            redirect(r, &req, authority, conn)
        }
        Some((route, RouteAction::Route(target))) => match table.clusters.get(&target.cluster) {
            Some(cluster) => {
                outcome.upstream_cluster = Some(target.cluster.clone());
                let (resp, fwd) =
                    forward(req, target, matched_prefix(route), cluster, rt, conn).await;
                outcome.forwarded = Some(fwd);
                resp
            }
            None => {
                // A route naming a cluster that does not exist (RDS may deliver it before
                // CDS does): Envoy's 503 with `NC`.
                stats.no_cluster.inc();
                outcome.response_flags = Some("NC");
                outcome.details = Some("cluster_not_found");
                direct(503, None)
            }
        },
        None => {
            stats.no_route.inc();
            outcome.response_flags = Some("NR");
            outcome.details = Some("route_not_found");
            direct(404, None)
        }
    };
    let mut resp = resp;
    header_mutation::apply(resp.headers_mut(), &levels, Side::Response);
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

/// Envoy's `redirect`: scheme (`https_redirect`), host, path; `response_code` (301 default).
fn redirect<B>(r: &Redirect, req: &Request<B>, authority: &str, conn: &ConnInfo) -> Response<Body> {
    let https = r.https_redirect || conn.tls_version.is_some();
    let scheme = if https { "https" } else { "http" };
    let host = match &r.host_redirect {
        Some(h) => h.clone(),
        // Changing the scheme drops the port, as Envoy does.
        None if r.https_redirect => authority
            .rsplit_once(':')
            .map_or(authority, |(h, p)| {
                if p.chars().all(|c| c.is_ascii_digit()) && !h.ends_with(':') {
                    h
                } else {
                    authority
                }
            })
            .to_string(),
        None => authority.to_string(),
    };
    let path = match &r.path_redirect {
        Some(p) => p.clone(),
        None => req
            .uri()
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string()),
    };
    let mut resp = Response::new(full(Bytes::new()));
    *resp.status_mut() =
        StatusCode::from_u16(r.response_code).unwrap_or(StatusCode::MOVED_PERMANENTLY);
    if let Ok(v) = HeaderValue::from_str(&format!("{scheme}://{host}{path}")) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
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
