//! Envoy's gRPC statistics filter (`envoy.filters.http.grpc_stats`): for a gRPC request
//! (`content-type: application/grpc...`) routed to a cluster, counters in the cluster's
//! `grpc.` namespace, per `<service>.<method>` when `stats_for_all_methods` or the allowlist
//! says so: `success`, `failure`, `total` and one per `grpc-status` value when the call ends
//! (from a trailers-only response's headers or the trailers), and `request_message_count` /
//! `response_message_count` as gRPC messages cross in each direction.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use quickshake_config::{GrpcStatsFilter, HttpFilter};
use quickshake_stats::Scope;

/// One gRPC call's counters: `cluster.<c>.grpc.` plus `<service>.<method>.` where named.
pub(crate) struct GrpcCall {
    scope: Scope,
    prefix: String,
}

impl GrpcCall {
    fn count(&self, name: &str, n: u64) {
        let c = self.scope.counter(&format!("{}{name}", self.prefix));
        for _ in 0..n {
            c.inc();
        }
    }

    /// The call ended with `grpc-status` `status`.
    pub(crate) fn finish(&self, status: &str) {
        self.count(status, 1);
        self.count(if status == "0" { "success" } else { "failure" }, 1);
        self.count("total", 1);
    }

    /// Whether headers that end the response carry a `grpc-status` (a trailers-only
    /// response): the call ends there, counted.
    pub(crate) fn trailers_only(&self, headers: &HeaderMap) -> bool {
        match grpc_status(headers) {
            Some(s) => {
                self.finish(s);
                true
            }
            None => false,
        }
    }
}

fn grpc_status(h: &HeaderMap) -> Option<&str> {
    h.get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// The counters of a request to the cluster whose stats scope is `cluster` (`cluster.<c>.`),
/// when a `grpc_stats` filter is configured and the request is gRPC.
pub(crate) fn start(
    filters: &[HttpFilter],
    headers: &HeaderMap,
    path: &str,
    cluster: &Scope,
) -> Option<Arc<GrpcCall>> {
    let cfg = filters.iter().find_map(|f| match f {
        HttpFilter::GrpcStats(g) => Some(g),
        _ => None,
    })?;
    let grpc = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if !grpc {
        return None;
    }
    let prefix = match names(cfg, path) {
        Some((service, method)) => format!("grpc.{service}.{method}."),
        None => "grpc.".to_owned(),
    };
    Some(Arc::new(GrpcCall {
        scope: cluster.clone(),
        prefix,
    }))
}

/// The `(service, method)` a call's stats are named by: from `/<service>/<method>`, when
/// `stats_for_all_methods` or the allowlist names it (dots in the service replaced by `_`
/// with `replace_dots_in_grpc_service_name`).
fn names(cfg: &GrpcStatsFilter, path: &str) -> Option<(String, String)> {
    let path = path.split('?').next().unwrap_or(path);
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    if service.is_empty() || method.is_empty() || method.contains('/') {
        return None;
    }
    let listed = match &cfg.allowlist {
        Some(services) => services
            .iter()
            .any(|(s, methods)| s == service && methods.iter().any(|m| m == method)),
        None => cfg.stats_for_all_methods,
    };
    if !listed {
        return None;
    }
    let service = if cfg.replace_dots_in_grpc_service_name {
        service.replace('.', "_")
    } else {
        service.to_owned()
    };
    Some((service, method.to_owned()))
}

/// Counts the gRPC messages that start in a byte stream (5-byte prefix: flag, length).
#[derive(Default)]
struct Frames {
    /// Bytes of the current prefix seen (0..5), or of the current message left to skip.
    header: [u8; 5],
    have: usize,
    skip: u64,
}

impl Frames {
    /// How many messages start in `data`.
    fn inspect(&mut self, mut data: &[u8]) -> u64 {
        let mut started = 0;
        while !data.is_empty() {
            if self.skip > 0 {
                let n = usize::try_from(self.skip)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                self.skip -= n as u64;
                data = &data[n..];
                continue;
            }
            if self.have == 0 {
                started += 1;
            }
            let n = (5 - self.have).min(data.len());
            self.header[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == 5 {
                let len = u32::from_be_bytes([
                    self.header[1],
                    self.header[2],
                    self.header[3],
                    self.header[4],
                ]);
                self.skip = u64::from(len);
                self.have = 0;
            }
        }
        started
    }
}

/// Which way a counted body goes.
#[derive(Clone, Copy)]
pub(crate) enum Direction {
    Request,
    Response,
}

/// A body whose gRPC messages are counted (and, for a response, whose trailers end the call);
/// without a call it is the body as it is.
pub(crate) struct Counted<B> {
    inner: B,
    call: Option<Arc<GrpcCall>>,
    direction: Direction,
    frames: Frames,
}

impl<B> Counted<B> {
    pub(crate) fn new(inner: B, call: Option<Arc<GrpcCall>>, direction: Direction) -> Self {
        Counted {
            inner,
            call,
            direction,
            frames: Frames::default(),
        }
    }
}

impl<B> HttpBody for Counted<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let Some(call) = &this.call else {
            return polled;
        };
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(d) = frame.data_ref() {
                let n = this.frames.inspect(d);
                if n > 0 {
                    call.count(
                        match this.direction {
                            Direction::Request => "request_message_count",
                            Direction::Response => "response_message_count",
                        },
                        n,
                    );
                }
            } else if let (Some(t), Direction::Response) = (frame.trailers_ref(), this.direction) {
                if let Some(s) = grpc_status(t) {
                    call.finish(s);
                }
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_counted_across_chunks() {
        let mut f = Frames::default();
        // Two messages (3 and 0 bytes) then the start of a third, split oddly.
        let bytes = [0u8, 0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(f.inspect(&bytes[..2]), 1);
        assert_eq!(f.inspect(&bytes[2..7]), 0);
        assert_eq!(f.inspect(&bytes[7..]), 2);
        assert_eq!(f.inspect(&[0, 2, 9, 9]), 0);
    }

    #[test]
    fn stat_names() {
        let all = GrpcStatsFilter {
            stats_for_all_methods: true,
            replace_dots_in_grpc_service_name: true,
            ..Default::default()
        };
        assert_eq!(
            names(&all, "/helloworld.Greeter/SayHello"),
            Some(("helloworld_Greeter".into(), "SayHello".into()))
        );
        assert_eq!(names(&GrpcStatsFilter::default(), "/a.B/C"), None);
        let listed = GrpcStatsFilter {
            allowlist: Some(vec![("a.B".into(), vec!["C".into()])]),
            ..Default::default()
        };
        assert_eq!(names(&listed, "/a.B/C"), Some(("a.B".into(), "C".into())));
        assert_eq!(names(&listed, "/a.B/D"), None);
        assert_eq!(names(&all, "/nomethod"), None);
    }
}
