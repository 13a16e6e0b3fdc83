//! The connection manager's decisions between routing and the router: the virtual host's
//! `require_tls` redirect, then the CORS, fault and local rate limit filters in their
//! `http_filters` order (a preflight, an abort or a rate limit answers the request here; a
//! delay waits here).

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use quickshake_config::{
    HttpFilter, PerFilterConfig, RequireTls, Route, RouteAction, RouteConfig, VirtualHost,
};

use crate::body::{full, Body};
use crate::cors::{self, Cors};
use crate::fault::{self, ActiveFault};
use crate::local_ratelimit::{self, Decision};
use crate::routing::RequestView;
use crate::runtime::{ConnInfo, HttpRuntime};

/// What the CORS and fault filters left for the rest of the request.
#[derive(Default)]
pub(crate) struct Filtered<'a> {
    /// `DI` when a delay was injected.
    pub flags: Option<&'static str>,
    /// The CORS response headers to add.
    pub cors: Option<cors::Allowed>,
    /// The local rate limit's `x-ratelimit-*` headers for the response.
    pub rate_limit_headers: Option<local_ratelimit::XRateLimit>,
    _fault: Option<ActiveFault<'a>>,
}

/// A request answered by a filter: the answer, `%RESPONSE_FLAGS%` and
/// `%RESPONSE_CODE_DETAILS%`.
pub(crate) struct Answered {
    pub response: Response<Body>,
    pub flags: Option<&'static str>,
    pub details: &'static str,
}

/// The CORS and fault filters, in their `http_filters` order: `Err` with the answer when one
/// of them answers the request (a CORS preflight, a fault abort).
pub(crate) async fn decode_filters<'a, B>(
    req: &Request<B>,
    rt: &'a HttpRuntime,
    route: Option<(&Route, &VirtualHost, &RouteConfig)>,
    authority: &str,
    conn: &ConnInfo,
) -> Result<Filtered<'a>, Box<Answered>> {
    let mut out = Filtered::default();
    for f in &rt.http_filters {
        match f {
            HttpFilter::Cors { name, disabled } => {
                // Envoy's CORS filter acts on routes that forward (not on direct responses or
                // redirects).
                let Some(r) = route.filter(|(r, _, _)| matches!(r.action, RouteAction::Route(_)))
                else {
                    continue;
                };
                if crate::per_filter::skipped(name, *disabled, Some(r)) {
                    continue;
                }
                match cors::decode(name, r, req.method(), req.headers(), rt.cors_stats.as_ref()) {
                    Cors::Preflight(response) => {
                        return Err(Box::new(Answered {
                            response,
                            flags: None,
                            details: "cors_response",
                        }));
                    }
                    Cors::Allowed(a) => out.cors = Some(a),
                    Cors::Pass => {}
                }
            }
            HttpFilter::Fault {
                name,
                disabled,
                config,
            } => {
                let Some(stats) = rt.fault_stats.as_ref() else {
                    continue;
                };
                if crate::per_filter::skipped(name, *disabled, route) {
                    continue;
                }
                let view = RequestView::of(req, authority, conn.tls_version.is_some());
                let injected = fault::inject(name, config, route, &view, stats).await;
                if injected.flags.is_some() {
                    out.flags = injected.flags;
                }
                if injected.active.is_some() {
                    out._fault = injected.active;
                }
                if let Some(response) = injected.response {
                    return Err(Box::new(Answered {
                        response,
                        flags: out.flags,
                        details: "fault_filter_abort",
                    }));
                }
            }
            HttpFilter::LocalRateLimit {
                name,
                disabled,
                config,
            } => {
                if crate::per_filter::skipped(name, *disabled, route) {
                    continue;
                }
                let config = match route.and_then(|r| crate::per_filter::most_specific(name, r)) {
                    Some(PerFilterConfig::LocalRateLimit(c)) => c,
                    _ => config,
                };
                let Some(store) = rt.local_rate_limit_store.as_ref() else {
                    continue;
                };
                match local_ratelimit::decide(config, store) {
                    Decision::Pass(headers) => out.rate_limit_headers = headers,
                    Decision::Limited(response) => {
                        return Err(Box::new(Answered {
                            response,
                            flags: Some("RL"),
                            details: "local_rate_limited",
                        }));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// A virtual host's `require_tls`: Envoy's 301 to `https://<host><path>` for a plaintext
/// request (with `EXTERNAL_ONLY`, one not marked `x-envoy-internal: true`).
pub(crate) fn require_tls<B>(
    vh: &VirtualHost,
    req: &Request<B>,
    authority: &str,
    conn: &ConnInfo,
) -> Option<Response<Body>> {
    let internal = || {
        req.headers()
            .get("x-envoy-internal")
            .is_some_and(|v| v == "true")
    };
    let redirect = match vh.require_tls {
        RequireTls::None => false,
        RequireTls::All => conn.tls_version.is_none(),
        RequireTls::ExternalOnly => conn.tls_version.is_none() && !internal(),
    };
    if !redirect {
        return None;
    }
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let mut resp = Response::new(full(Bytes::new()));
    *resp.status_mut() = StatusCode::MOVED_PERMANENTLY;
    if let Ok(v) = HeaderValue::from_str(&format!("https://{authority}{path}")) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Some(resp)
}
