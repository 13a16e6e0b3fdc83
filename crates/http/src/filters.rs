//! The HTTP filters before the router: `health_check` (answers health checks itself, 503 while
//! the server fails health checks or drains; marks every response while health checks fail)
//! and `compressor` (gzip, brotli, zstd, chosen by the client's `Accept-Encoding`, streaming).

use async_compression::tokio::bufread::{BrotliEncoder, GzipEncoder, ZstdEncoder};
use async_compression::Level;
use bytes::Bytes;
use futures_util::TryStreamExt;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use quickshake_config::{
    CompressionLibrary, CompressorFilter, HttpFilter, Route, RouteConfig, VirtualHost,
};
use tokio_util::io::{ReaderStream, StreamReader};

use crate::body::{full, Body};
use crate::routing::RequestView;

/// What the health-check filter decided for a request.
pub(crate) enum HealthCheck {
    /// Not a health check (or a pass-through one that may go on): route it.
    Route,
    /// Answer this status now.
    Answer(u16),
}

/// The `health_check` filters' decision. `failing`: the server fails health checks (admin
/// `/healthcheck/fail`) or drains.
pub(crate) fn health_check(
    filters: &[HttpFilter],
    req: &RequestView<'_>,
    failing: bool,
) -> HealthCheck {
    for f in filters {
        let HttpFilter::HealthCheck(hc) = f else {
            continue;
        };
        if !req.matches_all(&hc.headers) {
            continue;
        }
        if failing {
            return HealthCheck::Answer(503);
        }
        if !hc.pass_through_mode {
            return HealthCheck::Answer(200);
        }
    }
    HealthCheck::Route
}

/// A health check's answer (empty body), with Envoy's `x-envoy-immediate-health-check-fail`
/// when failing.
pub(crate) fn health_check_response(status: u16) -> Response<Body> {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    if status == 503 {
        r.headers_mut().insert(
            "x-envoy-immediate-health-check-fail",
            HeaderValue::from_static("true"),
        );
    }
    r
}

/// Every response while the server fails health checks (admin `/healthcheck/fail`), as
/// Envoy's: `x-envoy-immediate-health-check-fail: true` where a `health_check` filter runs, and
/// the connection drain-closed (`Connection: close` on HTTP/1, upgrades aside).
pub(crate) fn health_check_failing(
    filters: &[HttpFilter],
    protocol: &str,
    resp: &mut Response<Body>,
) {
    if filters
        .iter()
        .any(|f| matches!(f, HttpFilter::HealthCheck(_)))
    {
        resp.headers_mut().insert(
            "x-envoy-immediate-health-check-fail",
            HeaderValue::from_static("true"),
        );
    }
    if protocol.starts_with("HTTP/1") && resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
}

/// The compressor chosen for a request: the compressor filter whose encoding the client's
/// `Accept-Encoding` ranks highest (q > 0; ties go to the earlier filter; `*` stands for any
/// encoding not listed). `None` also when the client wants none of them, or the request is a
/// HEAD. Removes `Accept-Encoding` when a compressor says `remove_accept_encoding_header`.
/// A compressor the route turns off (or does not turn on, when installed `disabled`) is left
/// out.
pub(crate) fn choose_compressor<'a>(
    filters: &'a [HttpFilter],
    route: Option<(&Route, &VirtualHost, &RouteConfig)>,
    method: &Method,
    headers: &mut HeaderMap,
) -> Option<(&'a CompressorFilter, bool)> {
    let compressors: Vec<&CompressorFilter> = filters
        .iter()
        .filter_map(|f| match f {
            HttpFilter::Compressor(c) => Some(c),
            _ => None,
        })
        .filter(|c| !crate::per_filter::skipped(&c.name, c.disabled, route))
        .collect();
    let first = *compressors.first()?;
    let accept = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    if compressors.iter().any(|c| c.remove_accept_encoding_header) {
        headers.remove(header::ACCEPT_ENCODING);
    }
    let mut best: Option<(&CompressorFilter, f32)> = None;
    for c in &compressors {
        let q = quality(&accept, c.library.encoding());
        if q > 0.0 && best.is_none_or(|(_, bq)| q > bq) {
            best = Some((c, q));
        }
    }
    let chosen = best
        .filter(|(_, q)| *q >= quality(&accept, "identity") || accept.is_empty())
        .map(|(c, _)| c)
        .filter(|_| method != Method::HEAD);
    // `Vary` is added for any compressible response, chosen or not (the first filter decides
    // what is compressible then).
    Some(match chosen {
        Some(c) => (c, true),
        None => (first, false),
    })
}

/// The q-value `accept` gives `coding` (0 when not acceptable).
fn quality(accept: &str, coding: &str) -> f32 {
    let mut star = None;
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim();
        if name.is_empty() {
            continue;
        }
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|v| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if name.eq_ignore_ascii_case(coding) {
            return q;
        }
        if name == "*" {
            star = Some(q);
        }
    }
    match (star, coding) {
        (Some(q), _) => q,
        // Identity is acceptable unless refused (RFC 9110 12.5.3).
        (None, "identity") => 0.001,
        (None, _) => 0.0,
    }
}

/// Compress `resp` with `c` when Envoy would: a 2xx/3xx other than 204/304, not already
/// encoded, no `Cache-Control: no-transform`, an allowed content type, at least
/// `min_content_length` bytes when the length is known, no `ETag` with
/// `disable_on_etag_header`. Adds `Vary: Accept-Encoding` to such responses; compresses only
/// when `accepted`.
pub(crate) fn compress(
    c: &CompressorFilter,
    accepted: bool,
    resp: Response<Body>,
) -> Response<Body> {
    if !compressible(c, &resp) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let vary = parts
        .headers
        .get_all(header::VARY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("accept-encoding") || t.trim() == "*")
        });
    if !vary {
        parts
            .headers
            .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    if !accepted {
        return Response::from_parts(parts, body);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static(c.library.encoding()),
    );
    // A strong ETag becomes weak: the bytes differ now.
    if let Some(etag) = parts.headers.get(header::ETAG).cloned() {
        if !etag.as_bytes().starts_with(b"W/") {
            let mut weak = b"W/".to_vec();
            weak.extend_from_slice(etag.as_bytes());
            if let Ok(v) = HeaderValue::from_bytes(&weak) {
                parts.headers.insert(header::ETAG, v);
            }
        }
    }
    Response::from_parts(parts, encode(c.library, body))
}

fn compressible(c: &CompressorFilter, resp: &Response<Body>) -> bool {
    let status = resp.status();
    if !(status.is_success() || status.is_redirection())
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return false;
    }
    let h = resp.headers();
    let encoded = h
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| !v.trim().eq_ignore_ascii_case("identity") && !v.trim().is_empty());
    let no_transform = h
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("no-transform"));
    if encoded || no_transform || (c.disable_on_etag_header && h.contains_key(header::ETAG)) {
        return false;
    }
    if let Some(ct) = h.get(header::CONTENT_TYPE) {
        let media = ct
            .to_str()
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if !c.content_types.contains(&media) {
            return false;
        }
    }
    let known_len = h
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .or_else(|| hyper::body::Body::size_hint(resp.body()).exact());
    known_len.is_none_or(|n| n >= c.min_content_length)
}

/// The body, encoded as it streams.
fn encode(library: CompressionLibrary, body: Body) -> Body {
    let stream = body.into_data_stream().map_err(std::io::Error::other);
    let reader = StreamReader::new(stream);
    let out: Body = match library {
        CompressionLibrary::Gzip { level } => wrap(GzipEncoder::with_quality(
            reader,
            Level::Precise(i32::try_from(level).unwrap_or(6)),
        )),
        CompressionLibrary::Brotli { quality } => wrap(BrotliEncoder::with_quality(
            reader,
            Level::Precise(i32::try_from(quality).unwrap_or(3)),
        )),
        CompressionLibrary::Zstd { level } => {
            wrap(ZstdEncoder::with_quality(reader, Level::Precise(level)))
        }
    };
    out
}

fn wrap<R>(encoder: R) -> Body
where
    R: tokio::io::AsyncRead + Send + Sync + 'static,
{
    // The body's error type is hyper's, which cannot be made here: a failed upstream body
    // ends the encoded stream early, which the client's decoder sees as a truncated stream.
    let frames = futures_util::StreamExt::take_while(ReaderStream::new(encoder), |r| {
        std::future::ready(r.is_ok())
    });
    let frames = futures_util::StreamExt::filter_map(frames, |r| {
        std::future::ready(r.ok().map(|b| Ok::<_, hyper::Error>(Frame::data(b))))
    });
    BodyExt::boxed(StreamBody::new(frames))
}
