//! The request target each upstream protocol needs, built from whatever form the downstream
//! codec produced (HTTP/1.1: origin-form plus `Host`, or absolute-form; HTTP/2 and HTTP/3:
//! absolute URI from `:scheme` and `:authority`):
//!
//! - HTTP/1.1 ([`to_h1_form`]): origin-form (`GET /path?query HTTP/1.1`) with `Host` from the
//!   authority, as Envoy sends and as RFC 9113 section 8.3.1 asks of an HTTP/2-to-HTTP/1.1
//!   intermediary (origins such as Python's `http.server` take nothing else);
//! - HTTP/2 ([`to_h2_form`]): `:scheme` and `:authority`, from the URI or, for an origin-form
//!   request, from the cluster's transport and `Host`.

use std::net::SocketAddr;

use http::header::{HeaderValue, HOST};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Method, Request, Uri};

use crate::error::UpstreamError;

/// HTTP/1.1 needs origin-form with `Host`: a URI with an authority (HTTP/2 or HTTP/3
/// downstream, or an HTTP/1.1 client's absolute-form) becomes its path and query, and its
/// authority replaces `Host` (RFC 9112 section 3.2.2: the target's authority wins); a request
/// with neither gets the endpoint address. CONNECT keeps its authority-form.
pub fn to_h1_form<B>(req: &mut Request<B>, endpoint: SocketAddr) -> Result<(), UpstreamError> {
    if let Some(authority) = req.uri().authority() {
        let host = HeaderValue::from_str(authority.as_str())
            .map_err(|e| UpstreamError::InvalidRequest(format!("authority as Host: {e}")))?;
        req.headers_mut().insert(HOST, host);
        if req.method() == Method::CONNECT {
            return Ok(());
        }
        let pq = req
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        *req.uri_mut() = Uri::from(pq);
    } else if !req.headers().contains_key(HOST) {
        let host = HeaderValue::from_str(&endpoint.to_string())
            .map_err(|e| UpstreamError::InvalidRequest(e.to_string()))?;
        req.headers_mut().insert(HOST, host);
    }
    Ok(())
}

/// HTTP/2 needs `:scheme` and `:authority`: an origin-form URI gets the cluster's scheme and
/// the `Host` header (which is then dropped) or the endpoint address as authority.
pub(crate) fn to_h2_form<B>(
    req: &mut Request<B>,
    tls: bool,
    addr: SocketAddr,
) -> Result<(), UpstreamError> {
    let uri = req.uri();
    if uri.authority().is_some() && (uri.scheme().is_some() || req.method() == Method::CONNECT) {
        return Ok(());
    }
    let authority = match req.headers().get(HOST) {
        Some(h) => Authority::try_from(h.as_bytes())
            .map_err(|e| UpstreamError::InvalidRequest(format!("Host header: {e}")))?,
        None => Authority::try_from(addr.to_string().as_str())
            .map_err(|e| UpstreamError::InvalidRequest(e.to_string()))?,
    };
    let mut parts = uri.clone().into_parts();
    parts.scheme = Some(if tls { Scheme::HTTPS } else { Scheme::HTTP });
    parts.authority = Some(authority);
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(PathAndQuery::from_static("/"));
    }
    *req.uri_mut() =
        Uri::from_parts(parts).map_err(|e| UpstreamError::InvalidRequest(e.to_string()))?;
    req.headers_mut().remove(HOST);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        "127.0.0.1:8080".parse().expect("addr")
    }

    #[test]
    fn h2_form_uses_host() {
        let mut r = Request::builder()
            .uri("/a?b=c")
            .header("host", "example.com:81")
            .body(())
            .expect("req");
        to_h2_form(&mut r, true, addr()).expect("ok");
        assert_eq!(r.uri().to_string(), "https://example.com:81/a?b=c");
        assert!(r.headers().get("host").is_none());
        let mut r = Request::builder().uri("/").body(()).expect("req");
        to_h2_form(&mut r, false, addr()).expect("ok");
        assert_eq!(r.uri().to_string(), "http://127.0.0.1:8080/");
    }

    #[test]
    fn h1_form_moves_the_authority_into_host() {
        // An HTTP/2 or HTTP/3 request (`:authority`, no Host).
        let mut r = Request::builder()
            .uri("https://127.0.0.1:9443/index.html?x=1&y")
            .body(())
            .expect("req");
        to_h1_form(&mut r, addr()).expect("ok");
        assert_eq!(r.uri().to_string(), "/index.html?x=1&y");
        assert_eq!(r.headers()["host"], "127.0.0.1:9443");
        // An HTTP/1.1 absolute-form target: its authority replaces Host.
        let mut r = Request::builder()
            .uri("http://example.com")
            .header("host", "other.example")
            .body(())
            .expect("req");
        to_h1_form(&mut r, addr()).expect("ok");
        assert_eq!(r.uri().to_string(), "/");
        assert_eq!(r.headers().get_all("host").iter().count(), 1);
        assert_eq!(r.headers()["host"], "example.com");
    }

    #[test]
    fn h1_form_keeps_origin_form_connect_and_fills_a_missing_host() {
        let mut r = Request::builder()
            .uri("/a?b")
            .header("host", "example.com:81")
            .body(())
            .expect("req");
        to_h1_form(&mut r, addr()).expect("ok");
        assert_eq!(r.uri().to_string(), "/a?b");
        assert_eq!(r.headers()["host"], "example.com:81");
        let mut r = Request::builder()
            .method(Method::CONNECT)
            .uri("example.com:443")
            .body(())
            .expect("req");
        to_h1_form(&mut r, addr()).expect("ok");
        assert_eq!(r.uri().to_string(), "example.com:443");
        assert_eq!(r.headers()["host"], "example.com:443");
        let mut r = Request::builder().uri("/").body(()).expect("req");
        to_h1_form(&mut r, addr()).expect("ok");
        assert_eq!(r.headers()["host"], "127.0.0.1:8080");
    }
}
