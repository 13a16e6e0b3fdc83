//! WebSocket (and other HTTP/1.1 `Upgrade`) forwarding, enabled by Envoy's `upgrade_configs`
//! (the connection manager's, overridden per type by the route's; [`websocket_upgrade`]
//! decides, as Envoy's `createUpgradeFilterChain`): the upgrade request goes to the upstream
//! over its own connection;
//! on `101 Switching Protocols` both sides are upgraded and bytes are copied both ways. The
//! upgrade request goes out in origin-form with `Host` from the authority, like every HTTP/1.1
//! upstream request (`quickshake_upstream::to_h1_form`).

use http::request::Parts;
use http::{header, HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use quickshake_upstream::{to_h1_form, Cluster};

use crate::body::{error_response, full, Body};

/// What a request's `Upgrade` asks for, and whether the configuration lets it through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Upgrade {
    /// Not a WebSocket upgrade: an ordinary request (its hop-by-hop headers go).
    None,
    /// A WebSocket upgrade this route enables.
    Allowed,
    /// A WebSocket upgrade this route does not enable: Envoy answers 403.
    Refused,
}

/// Envoy's precedence for the `websocket` upgrade type: the route's `upgrade_configs` entry
/// for it (`enabled` true or false) wins; without one, the connection manager's
/// `upgrade_configs` (`hcm_types`, its enabled types) decide. Types compare case-insensitively.
pub(crate) fn websocket_upgrade(
    h: &HeaderMap,
    hcm_types: &[String],
    route: &[(String, bool)],
) -> Upgrade {
    const WEBSOCKET: &str = "websocket";
    let asked = h
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(WEBSOCKET));
    if !asked {
        return Upgrade::None;
    }
    let enabled = match route
        .iter()
        .find(|(t, _)| t.eq_ignore_ascii_case(WEBSOCKET))
    {
        Some((_, on)) => *on,
        None => hcm_types.iter().any(|t| t.eq_ignore_ascii_case(WEBSOCKET)),
    };
    if enabled {
        Upgrade::Allowed
    } else {
        Upgrade::Refused
    }
}

/// Envoy's local reply to a refused upgrade (`upgrade_failed`): 403 with no body.
pub(crate) fn upgrade_refused() -> Response<Body> {
    let mut r = Response::new(full(bytes::Bytes::new()));
    *r.status_mut() = StatusCode::FORBIDDEN;
    r
}

pub(crate) async fn forward_upgrade(
    mut parts: Parts,
    _body: impl crate::body::RequestBody,
    cluster: &Cluster,
) -> Response<Body> {
    let Some(downstream) = parts.extensions.remove::<OnUpgrade>() else {
        return error_response(400, "upgrade not possible on this connection");
    };
    let stream = match cluster.connect().await {
        Ok(s) => s,
        Err(_) => return error_response(503, "upstream connect error or disconnect/reset before headers. reset reason: connection failure"),
    };
    let endpoint = stream.peer_addr();
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
        Ok(x) => x,
        Err(_) => return error_response(503, "upstream connect error or disconnect/reset before headers. reset reason: connection failure"),
    };
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    let mut req = Request::from_parts(parts, Empty::<bytes::Bytes>::new());
    if to_h1_form(&mut req, endpoint).is_err() {
        return error_response(400, "invalid authority");
    }
    let mut resp = match sender.send_request(req).await {
        Ok(r) => r,
        Err(_) => return error_response(503, "upstream connect error or disconnect/reset before headers. reset reason: connection termination"),
    };
    if resp.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        let (parts, body) = resp.into_parts();
        return Response::from_parts(parts, body.boxed());
    }
    let upstream = hyper::upgrade::on(&mut resp);
    tokio::spawn(async move {
        if let (Ok(down), Ok(up)) = (downstream.await, upstream.await) {
            let mut down = TokioIo::new(down);
            let mut up = TokioIo::new(up);
            let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
        }
    });
    let (parts, _) = resp.into_parts();
    Response::from_parts(parts, full(bytes::Bytes::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn ws() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        h
    }

    #[test]
    fn the_route_entry_wins_else_the_connection_manager_decides() {
        let hcm = vec!["websocket".to_owned()];
        let on = vec![("WEBSOCKET".to_owned(), true)];
        let off = vec![("websocket".to_owned(), false)];
        let other = vec![("spdy/3".to_owned(), false)];
        assert_eq!(websocket_upgrade(&ws(), &hcm, &[]), Upgrade::Allowed);
        assert_eq!(websocket_upgrade(&ws(), &hcm, &off), Upgrade::Refused);
        assert_eq!(websocket_upgrade(&ws(), &hcm, &other), Upgrade::Allowed);
        assert_eq!(websocket_upgrade(&ws(), &[], &on), Upgrade::Allowed);
        assert_eq!(websocket_upgrade(&ws(), &[], &[]), Upgrade::Refused);
        assert_eq!(websocket_upgrade(&ws(), &[], &other), Upgrade::Refused);
        assert_eq!(
            websocket_upgrade(&HeaderMap::new(), &hcm, &off),
            Upgrade::None
        );
        let mut h2c = HeaderMap::new();
        h2c.insert(header::UPGRADE, HeaderValue::from_static("h2c"));
        assert_eq!(websocket_upgrade(&h2c, &[], &[]), Upgrade::None);
    }
}
