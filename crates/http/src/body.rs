//! Request bodies as the codecs deliver them ([`RequestBody`]), response bodies as the
//! connection manager sends them, and Envoy's plain-text error
//! responses: a leaf shared by the request handler, the forwarder and the upgrade path.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};

/// A response body as the connection manager sends it.
pub type Body = BoxBody<Bytes, hyper::Error>;

/// A body with fixed bytes.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A plain-text response with `status` (503 if the code is not a valid status).
pub(crate) fn error_response(status: u16, text: &'static str) -> Response<Body> {
    let mut r = Response::new(full(text));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}

/// A request body as the codecs deliver it: hyper's `Incoming` (HTTP/1.1, HTTP/2) or the
/// HTTP/3 stream's body (`quickshake-quic`). Every request, whatever its protocol, goes
/// through [`crate::handle_request`].
pub trait RequestBody:
    hyper::body::Body<Data = Bytes, Error = hyper::Error> + Send + Sync + Unpin + 'static
{
}

impl<B> RequestBody for B where
    B: hyper::body::Body<Data = Bytes, Error = hyper::Error> + Send + Sync + Unpin + 'static
{
}
