//! HTTP/3 messages to and from `http` types: a request from a HEADERS frame's field list, the
//! request body a stream's DATA frames feed ([`H3Body`]), and a response's (and its
//! trailers') field lists.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, Uri, Version};
use hyper::body::{Frame, SizeHint};
use quiche::h3::{Header, NameValue};
use tokio::sync::mpsc;

/// A request body fed by the connection task as DATA frames arrive; it ends when the stream
/// does (the sender is dropped).
pub(crate) struct H3Body {
    rx: Option<mpsc::UnboundedReceiver<Bytes>>,
}

impl H3Body {
    /// A body fed through the returned sender.
    pub(crate) fn channel() -> (mpsc::UnboundedSender<Bytes>, H3Body) {
        let (tx, rx) = mpsc::unbounded_channel();
        (tx, H3Body { rx: Some(rx) })
    }

    /// A request without a body (its HEADERS frame ended the stream).
    pub(crate) fn empty() -> H3Body {
        H3Body { rx: None }
    }
}

impl hyper::body::Body for H3Body {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Ready(None);
        };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(b)) => Poll::Ready(Some(Ok(Frame::data(b)))),
            Poll::Ready(None) => {
                self.rx = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rx.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.rx {
            None => SizeHint::with_exact(0),
            Some(_) => SizeHint::default(),
        }
    }
}

/// Why a HEADERS frame is not a request (RFC 9114 section 4.3.1): answered 400.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Malformed(pub &'static str);

/// The request a HEADERS frame's fields describe: pseudo-header fields first, `:method`,
/// `:scheme` and `:path` required (`:authority` or `host`), the URI absolute as HTTP/2's are.
pub(crate) fn request<B>(fields: &[Header], body: B) -> Result<Request<B>, Malformed> {
    let (mut method, mut scheme, mut authority, mut path) = (None, None, None, None);
    let mut headers = HeaderMap::with_capacity(fields.len());
    let mut regular = false;
    for f in fields {
        let (name, value) = (f.name(), f.value());
        if let Some(pseudo) = name.strip_prefix(b":") {
            if regular {
                return Err(Malformed("pseudo-header after a regular field"));
            }
            let slot = match pseudo {
                b"method" => &mut method,
                b"scheme" => &mut scheme,
                b"authority" => &mut authority,
                b"path" => &mut path,
                _ => return Err(Malformed("unknown pseudo-header")),
            };
            if slot.replace(value).is_some() {
                return Err(Malformed("repeated pseudo-header"));
            }
            continue;
        }
        regular = true;
        if name.iter().any(u8::is_ascii_uppercase) {
            return Err(Malformed("uppercase field name"));
        }
        let name = HeaderName::from_bytes(name).map_err(|_| Malformed("invalid field name"))?;
        let value = HeaderValue::from_bytes(value).map_err(|_| Malformed("invalid field value"))?;
        headers.append(name, value);
    }
    let method = Method::from_bytes(method.ok_or(Malformed("no :method"))?)
        .map_err(|_| Malformed("invalid :method"))?;
    let scheme = scheme.ok_or(Malformed("no :scheme"))?;
    let path = path.ok_or(Malformed("no :path"))?;
    let authority = match authority {
        Some(a) => a,
        None => headers
            .get(http::header::HOST)
            .map(HeaderValue::as_bytes)
            .ok_or(Malformed("no :authority"))?,
    };
    let mut uri = Vec::with_capacity(scheme.len() + authority.len() + path.len() + 3);
    uri.extend_from_slice(scheme);
    uri.extend_from_slice(b"://");
    uri.extend_from_slice(authority);
    uri.extend_from_slice(path);
    let uri = Uri::try_from(uri).map_err(|_| Malformed("invalid URI"))?;
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.version_mut() = Version::HTTP_3;
    *req.headers_mut() = headers;
    Ok(req)
}

/// Connection-specific fields HTTP/3 forbids (RFC 9114 section 4.2).
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// A response's HEADERS fields: `:status` then its header fields, less connection-specific
/// ones.
pub(crate) fn response_fields<B>(resp: &Response<B>) -> Vec<Header> {
    let mut out = Vec::with_capacity(resp.headers().len() + 1);
    out.push(Header::new(b":status", resp.status().as_str().as_bytes()));
    push_fields(&mut out, resp.headers());
    out
}

/// A trailer section's fields (a response body's trailers, gRPC's status among them).
pub(crate) fn trailer_fields(trailers: &HeaderMap) -> Vec<Header> {
    let mut out = Vec::with_capacity(trailers.len());
    push_fields(&mut out, trailers);
    out
}

fn push_fields(out: &mut Vec<Header>, headers: &HeaderMap) {
    for (name, value) in headers {
        if CONNECTION_SPECIFIC.contains(&name.as_str()) {
            continue;
        }
        out.push(Header::new(name.as_str().as_bytes(), value.as_bytes()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: &str, v: &str) -> Header {
        Header::new(n.as_bytes(), v.as_bytes())
    }

    #[test]
    fn a_request_from_its_fields() {
        let req = request(
            &[
                h(":method", "POST"),
                h(":scheme", "https"),
                h(":authority", "example.com:8443"),
                h(":path", "/a?b=c"),
                h("x-one", "1"),
            ],
            (),
        )
        .unwrap();
        assert_eq!(req.method(), Method::POST);
        assert_eq!(req.uri().authority().unwrap().as_str(), "example.com:8443");
        assert_eq!(req.uri().path_and_query().unwrap().as_str(), "/a?b=c");
        assert_eq!(req.version(), Version::HTTP_3);
        assert_eq!(req.headers()["x-one"], "1");
    }

    #[test]
    fn malformed_requests_are_named() {
        let base = [h(":method", "GET"), h(":scheme", "https"), h(":path", "/")];
        assert_eq!(request(&base, ()).unwrap_err(), Malformed("no :authority"));
        let mut late = base.to_vec();
        late.insert(0, h("x", "y"));
        assert_eq!(
            request(&late, ()).unwrap_err(),
            Malformed("pseudo-header after a regular field")
        );
        let mut upper = base.to_vec();
        upper.push(h(":authority", "a"));
        upper.push(h("X-Up", "y"));
        assert_eq!(
            request(&upper, ()).unwrap_err(),
            Malformed("uppercase field name")
        );
    }

    #[test]
    fn connection_specific_fields_are_not_sent() {
        let mut resp = Response::new(());
        resp.headers_mut()
            .insert("connection", HeaderValue::from_static("close"));
        resp.headers_mut()
            .insert("alt-svc", HeaderValue::from_static("h3=\":443\""));
        let fields = response_fields(&resp);
        assert_eq!(fields.len(), 2);
        assert_eq!(fields[0].value(), b"200");
        assert_eq!(fields[1].name(), b"alt-svc");
    }
}
