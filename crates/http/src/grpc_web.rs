//! Envoy's `envoy.filters.http.grpc_web`: a gRPC-Web request (`POST`, `content-type:
//! application/grpc-web` or `application/grpc-web+proto`) goes upstream as gRPC
//! (`content-type: application/grpc`, no `content-length`), and its answer comes back as
//! gRPC-Web: `content-type: application/grpc-web+proto` and the trailers as a last body frame
//! (flag `0x80`, then the length and `name:value\r\n` lines). Other requests pass untouched.
//! The text form (`application/grpc-web-text`, base64 bodies) is not implemented: such a
//! request is answered 415 rather than forwarded half-translated.

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response};
use http_body_util::BodyExt;
use hyper::body::Frame;

use crate::body::{error_response, Body};

/// What the filter made of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GrpcWeb {
    /// Not gRPC-Web: nothing to do.
    Pass,
    /// Binary gRPC-Web, now a gRPC request: its response is to be translated back.
    Translated,
    /// `application/grpc-web-text`: refused.
    Text,
}

/// Turn a gRPC-Web request's headers into gRPC's.
pub(crate) fn decode(method: &Method, headers: &mut HeaderMap) -> GrpcWeb {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase());
    let Some(ct) = ct.filter(|_| method == Method::POST) else {
        return GrpcWeb::Pass;
    };
    match ct.as_str() {
        "application/grpc-web" | "application/grpc-web+proto" => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/grpc"),
            );
            headers.remove(header::CONTENT_LENGTH);
            GrpcWeb::Translated
        }
        "application/grpc-web-text" | "application/grpc-web-text+proto" => GrpcWeb::Text,
        _ => GrpcWeb::Pass,
    }
}

/// The answer to a gRPC-Web text request.
pub(crate) fn text_refused() -> Response<Body> {
    error_response(415, "grpc-web-text is not supported")
}

/// Turn a gRPC response into gRPC-Web's.
pub(crate) fn encode(mut resp: Response<Body>) -> Response<Body> {
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc-web+proto"),
    );
    resp.headers_mut().remove(header::CONTENT_LENGTH);
    resp.map(|body| {
        body.map_frame(|f| match f.into_trailers() {
            Ok(trailers) => Frame::data(trailer_frame(&trailers)),
            Err(f) => f,
        })
        .boxed()
    })
}

/// The trailers as gRPC-Web's last frame: `0x80`, the length (big-endian u32), then
/// `name:value\r\n` for each.
fn trailer_frame(trailers: &HeaderMap) -> Bytes {
    let mut payload = BytesMut::new();
    for (name, value) in trailers {
        payload.put_slice(name.as_str().as_bytes());
        payload.put_u8(b':');
        payload.put_slice(value.as_bytes());
        payload.put_slice(b"\r\n");
    }
    let mut out = BytesMut::with_capacity(5 + payload.len());
    out.put_u8(0x80);
    out.put_u32(u32::try_from(payload.len()).unwrap_or(u32::MAX));
    out.put_slice(&payload);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_trailers() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc-web+proto"),
        );
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("5"));
        assert_eq!(decode(&Method::POST, &mut h), GrpcWeb::Translated);
        assert_eq!(h[header::CONTENT_TYPE], "application/grpc");
        assert!(!h.contains_key(header::CONTENT_LENGTH));
        let mut get = HeaderMap::new();
        get.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc-web"),
        );
        assert_eq!(decode(&Method::GET, &mut get), GrpcWeb::Pass);
        let mut t = HeaderMap::new();
        t.insert("grpc-status", HeaderValue::from_static("0"));
        t.insert("grpc-message", HeaderValue::from_static("ok"));
        let f = trailer_frame(&t);
        assert_eq!(&f[..5], &[0x80, 0, 0, 0, 32]);
        assert_eq!(&f[5..], b"grpc-status:0\r\ngrpc-message:ok\r\n");
    }
}
