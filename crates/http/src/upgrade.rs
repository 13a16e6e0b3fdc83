//! WebSocket (and other HTTP/1.1 `Upgrade`) forwarding, enabled per connection manager by
//! Envoy's `upgrade_configs`: the upgrade request goes to the upstream over its own connection;
//! on `101 Switching Protocols` both sides are upgraded and bytes are copied both ways. The
//! upgrade request goes out in origin-form with `Host` from the authority, like every HTTP/1.1
//! upstream request (`quickshake_upstream::to_h1_form`).

use http::request::Parts;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use quickshake_upstream::{to_h1_form, Cluster};

use crate::body::{error_response, full, Body};

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
