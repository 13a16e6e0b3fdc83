//! Envoy's CORS filter (`envoy.filters.http.cors`): the policies of the matched route (its
//! `typed_per_filter_config` under the filter's name at route, virtual host and route
//! configuration level, else the route's and virtual host's `cors`), merged field by field
//! with the most specific first; preflight requests from an allowed origin are answered here,
//! and responses to other requests from an allowed origin get the `Access-Control-*` headers.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Response, StatusCode};
use quickshake_config::{CorsPolicy, PerFilterConfig, Route, RouteConfig, VirtualHost};
use quickshake_stats::{Counter, Store};

use crate::body::{full, Body};
use crate::per_filter;

/// `http.<stat_prefix>.cors.*`.
pub(crate) struct CorsStats {
    origin_valid: Counter,
    origin_invalid: Counter,
}

impl CorsStats {
    pub(crate) fn new(store: &Store, prefix: &str) -> Self {
        CorsStats {
            origin_valid: store.counter(&format!("http.{prefix}.cors.origin_valid")),
            origin_invalid: store.counter(&format!("http.{prefix}.cors.origin_invalid")),
        }
    }
}

/// What the filter decided for a request.
pub(crate) enum Cors {
    /// Answer this preflight now.
    Preflight(Response<Body>),
    /// Carry on; add the response headers for this allowed origin.
    Allowed(Allowed),
    /// Carry on, leave the response alone.
    Pass,
}

/// The response headers a CORS request from an allowed origin gets.
pub(crate) struct Allowed {
    origin: HeaderValue,
    credentials: bool,
    expose_headers: Option<String>,
}

/// The policies of a route, most specific first.
fn policies<'a>(
    name: &str,
    route: &'a Route,
    vh: &'a VirtualHost,
    rc: &'a RouteConfig,
) -> Vec<&'a CorsPolicy> {
    let typed: Vec<&CorsPolicy> = [&route.per_filter, &vh.per_filter, &rc.per_filter]
        .into_iter()
        .filter_map(|level| match per_filter::lookup(level, name) {
            Some(PerFilterConfig::Cors(p)) => Some(p),
            _ => None,
        })
        .collect();
    if !typed.is_empty() {
        return typed;
    }
    route.cors.iter().chain(vh.cors.iter()).collect()
}

/// The first policy that sets a field.
fn first<'a, T: ?Sized>(
    ps: &[&'a CorsPolicy],
    f: impl Fn(&'a CorsPolicy) -> Option<&'a T>,
) -> Option<&'a T> {
    ps.iter().find_map(|p| f(p))
}

/// The filter named `name` on a request whose route is `route` (in `vh` of `rc`).
pub(crate) fn decode(
    name: &str,
    (route, vh, rc): (&Route, &VirtualHost, &RouteConfig),
    method: &Method,
    headers: &HeaderMap,
    stats: Option<&CorsStats>,
) -> Cors {
    let ps = policies(name, route, vh, rc);
    let Some(top) = ps.first() else {
        return Cors::Pass;
    };
    let enabled = top
        .filter_enabled
        .hits(crate::fault::draw(top.filter_enabled));
    let shadow = top
        .shadow_enabled
        .is_some_and(|f| f.hits(crate::fault::draw(f)));
    if !enabled && !shadow {
        return Cors::Pass;
    }
    let Some(origin) = headers.get(header::ORIGIN).filter(|o| !o.is_empty()) else {
        return Cors::Pass;
    };
    let origin_str = origin.to_str().unwrap_or("");
    let allowed = ps
        .iter()
        .find(|p| !p.allow_origins.is_empty())
        .is_some_and(|p| {
            p.allow_origins
                .iter()
                .any(|m| m.matches("*") || m.matches(origin_str))
        });
    if let Some(s) = stats {
        if allowed {
            s.origin_valid.inc();
        } else {
            s.origin_invalid.inc();
        }
    }
    if !enabled {
        return Cors::Pass;
    }
    let credentials = first(&ps, |p| p.allow_credentials.as_ref()).copied() == Some(true);
    let latched = allowed.then(|| Allowed {
        origin: origin.clone(),
        credentials,
        expose_headers: first(&ps, |p| p.expose_headers.as_deref()).map(str::to_owned),
    });
    let request_method = headers
        .get(header::ACCESS_CONTROL_REQUEST_METHOD)
        .filter(|v| !v.is_empty());
    let (true, Some(request_method)) = (method == Method::OPTIONS, request_method) else {
        return latched.map_or(Cors::Pass, Cors::Allowed);
    };
    let forward_not_matching =
        first(&ps, |p| p.forward_not_matching_preflights.as_ref()).copied() != Some(false);
    if !allowed && forward_not_matching {
        return Cors::Pass;
    }
    let mut resp = Response::new(full(Bytes::new()));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    let mut set = |name: HeaderName, v: &str| {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(name, v);
        }
    };
    if allowed {
        set(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            origin.to_str().unwrap_or(""),
        );
    }
    if credentials {
        set(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, "true");
    }
    let echo = |configured: Option<&str>, requested: Option<&HeaderValue>| {
        configured.map(|c| match c {
            "*" => requested
                .and_then(|r| r.to_str().ok())
                .unwrap_or("")
                .to_owned(),
            c => c.to_owned(),
        })
    };
    if let Some(m) = echo(
        first(&ps, |p| p.allow_methods.as_deref()),
        Some(request_method),
    ) {
        set(header::ACCESS_CONTROL_ALLOW_METHODS, &m);
    }
    if let Some(hs) = echo(
        first(&ps, |p| p.allow_headers.as_deref()),
        headers.get(header::ACCESS_CONTROL_REQUEST_HEADERS),
    ) {
        set(header::ACCESS_CONTROL_ALLOW_HEADERS, &hs);
    }
    if let Some(age) = first(&ps, |p| p.max_age.as_deref()) {
        set(header::ACCESS_CONTROL_MAX_AGE, age);
    }
    let private = first(&ps, |p| p.allow_private_network_access.as_ref()).copied() == Some(true);
    if private
        && headers
            .get("access-control-request-private-network")
            .is_some_and(|v| v == "true")
    {
        set(
            HeaderName::from_static("access-control-allow-private-network"),
            "true",
        );
    }
    // The preflight answer goes through this filter's response side too, as in Envoy.
    if let Some(a) = &latched {
        encode(a, resp.headers_mut());
    }
    Cors::Preflight(resp)
}

/// The response headers of a CORS request from an allowed origin.
pub(crate) fn encode(a: &Allowed, h: &mut HeaderMap) {
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, a.origin.clone());
    if a.credentials {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
    }
    if let Some(v) = a
        .expose_headers
        .as_deref()
        .and_then(|e| HeaderValue::from_str(e).ok())
    {
        h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, v);
    }
}
