//! The connection manager's own header rules, as Envoy's codecs and connection manager apply
//! them: request header names with underscores (`common_http_protocol_options`
//! `headers_with_underscores_action`) and the response's `Server` header
//! (`server_header_transformation` with `server_name`); the `x-envoy-*` request headers a client
//! may not set, and `x-envoy-external-address` (Envoy's `mutateRequestHeaders`).

use http::{header, HeaderMap, Response};
use quickshake_config::{HeadersWithUnderscoresAction, ServerHeaderTransformation};

use crate::body::{error_response, Body};

/// The `x-envoy-*` request headers Envoy's connection manager removes from every request that is
/// not internal (`cleanInternalHeaders`).
const INTERNAL_ONLY: [&str; 14] = [
    "x-envoy-retriable-status-codes",
    "x-envoy-retriable-header-names",
    "x-envoy-retry-on",
    "x-envoy-retry-grpc-on",
    "x-envoy-max-retries",
    "x-envoy-upstream-alt-stat-name",
    "x-envoy-upstream-rq-timeout-ms",
    "x-envoy-upstream-rq-per-try-timeout-ms",
    "x-envoy-upstream-rq-timeout-alt-response",
    "x-envoy-expected-rq-timeout-ms",
    "x-envoy-force-trace",
    "x-envoy-ip-tags",
    "x-envoy-original-url",
    "x-envoy-hedge-on-per-try-timeout",
];
/// Removed as well from an edge request (`use_remote_address`).
const EDGE_ONLY: [&str; 3] = [
    "x-envoy-decorator-operation",
    "x-envoy-downstream-service-cluster",
    "x-envoy-downstream-service-node",
];

/// Envoy's request header rules for where the request comes from, before routing. quickshake
/// takes no client address as internal (Envoy's default `internal_address_config` since it
/// became explicit), so every request is external: the internal-only `x-envoy-*` headers are
/// removed; with `use_remote_address` (an edge request) the edge-only ones too, and
/// `x-envoy-external-address` is set to the client's address.
pub(crate) fn external_request(h: &mut HeaderMap, use_remote_address: bool, client_ip: &str) {
    for name in INTERNAL_ONLY {
        h.remove(name);
    }
    if use_remote_address {
        for name in EDGE_ONLY {
            h.remove(name);
        }
        if let Ok(v) = http::HeaderValue::from_str(client_ip) {
            h.insert("x-envoy-external-address", v);
        }
    }
}

/// Set in a response's extensions when the request's stream must be reset instead of answered
/// (an HTTP/2 request refused for a header name with an underscore, as Envoy's HTTP/2 codec
/// resets it). `serve_http` turns it into a reset; the response itself (a 400) is what the
/// stats and the access log see.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ResetStream;

/// Applies `headers_with_underscores_action` to a request's headers: ALLOW leaves them,
/// DROP_HEADER removes every header whose name has `_`, REJECT_REQUEST answers: for HTTP/1
/// a 400 `Bad Request` that closes the connection (Envoy's codec error), for HTTP/2 a reset
/// of the stream. Returns the answer when the request is refused.
pub(crate) fn underscores(
    headers: &mut HeaderMap,
    action: HeadersWithUnderscoresAction,
    version: http::Version,
) -> Option<Response<Body>> {
    if action == HeadersWithUnderscoresAction::Allow
        || !headers.keys().any(|k| k.as_str().contains('_'))
    {
        return None;
    }
    match action {
        HeadersWithUnderscoresAction::Allow => None,
        HeadersWithUnderscoresAction::DropHeader => {
            let names: Vec<header::HeaderName> = headers
                .keys()
                .filter(|k| k.as_str().contains('_'))
                .cloned()
                .collect();
            for n in names {
                headers.remove(n);
            }
            None
        }
        HeadersWithUnderscoresAction::RejectRequest => {
            let mut resp = error_response(400, "Bad Request");
            if version == http::Version::HTTP_2 {
                resp.extensions_mut().insert(ResetStream);
            } else if version != http::Version::HTTP_3 {
                resp.headers_mut().insert(
                    header::CONNECTION,
                    header::HeaderValue::from_static("close"),
                );
            }
            Some(resp)
        }
    }
}

/// The response's `Server` header: OVERWRITE sets `server_name` whatever the upstream sent,
/// APPEND_IF_ABSENT only where there is none, PASS_THROUGH leaves it (none on local replies).
pub(crate) fn server_header(
    headers: &mut HeaderMap,
    transformation: ServerHeaderTransformation,
    server_name: &header::HeaderValue,
) {
    let set = match transformation {
        ServerHeaderTransformation::Overwrite => true,
        ServerHeaderTransformation::AppendIfAbsent => !headers.contains_key(header::SERVER),
        ServerHeaderTransformation::PassThrough => false,
    };
    if set {
        headers.insert(header::SERVER, server_name.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, Version};

    fn headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x_under", HeaderValue::from_static("1"));
        h.insert("x-dash", HeaderValue::from_static("2"));
        h
    }

    #[test]
    fn underscore_actions() {
        let mut h = headers();
        assert!(underscores(
            &mut h,
            HeadersWithUnderscoresAction::Allow,
            Version::HTTP_11
        )
        .is_none());
        assert_eq!(h.len(), 2);
        assert!(underscores(
            &mut h,
            HeadersWithUnderscoresAction::DropHeader,
            Version::HTTP_11
        )
        .is_none());
        assert!(h.get("x_under").is_none() && h.get("x-dash").is_some());
        let r = underscores(
            &mut headers(),
            HeadersWithUnderscoresAction::RejectRequest,
            Version::HTTP_11,
        )
        .expect("refused");
        assert_eq!(r.status(), 400);
        assert_eq!(r.headers()[header::CONNECTION], "close");
        let r = underscores(
            &mut headers(),
            HeadersWithUnderscoresAction::RejectRequest,
            Version::HTTP_2,
        )
        .expect("refused");
        assert!(r.extensions().get::<ResetStream>().is_some());
        let mut clean = HeaderMap::new();
        clean.insert("x-dash", HeaderValue::from_static("2"));
        assert!(underscores(
            &mut clean,
            HeadersWithUnderscoresAction::RejectRequest,
            Version::HTTP_2
        )
        .is_none());
    }

    #[test]
    fn server_header_transformations() {
        let name = HeaderValue::from_static("gw");
        let upstream = || {
            let mut h = HeaderMap::new();
            h.insert(header::SERVER, HeaderValue::from_static("origin"));
            h
        };
        let cases = [
            (
                ServerHeaderTransformation::Overwrite,
                Some("gw"),
                Some("gw"),
            ),
            (
                ServerHeaderTransformation::AppendIfAbsent,
                Some("origin"),
                Some("gw"),
            ),
            (
                ServerHeaderTransformation::PassThrough,
                Some("origin"),
                None,
            ),
        ];
        for (t, with_upstream, local) in cases {
            let mut h = upstream();
            server_header(&mut h, t, &name);
            assert_eq!(
                h.get(header::SERVER).map(|v| v.to_str().unwrap()),
                with_upstream,
                "{t:?}"
            );
            let mut h = HeaderMap::new();
            server_header(&mut h, t, &name);
            assert_eq!(
                h.get(header::SERVER).map(|v| v.to_str().unwrap()),
                local,
                "{t:?}"
            );
        }
    }
}
