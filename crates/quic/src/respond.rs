//! HTTP/3 responses, streamed. Each request runs in its own task ([`respond`]): the connection
//! manager answers it, the response's head goes to the connection task at once, then its body
//! a chunk at a time through a channel of [`CHUNKS_AHEAD`] chunks, as the upstream (or the
//! direct response) yields them. The connection task writes each response ([`Outgoing::write`])
//! as far as quiche's flow control lets it (`send_body` takes what the stream's capacity
//! allows) and takes the next chunk only once the last is written, so a slow client holds the
//! task at a full channel and the task stops reading the upstream: per stream, what is held is
//! quiche's stream buffer, one chunk being written and the channel's few, never the whole body.
//!
//! A body that fails midway resets the stream (H3_INTERNAL_ERROR) rather than ending it as
//! if complete; trailers go out as a trailing HEADERS frame.

use std::sync::Arc;

use bytes::{Buf, Bytes};
use http::{HeaderMap, Request, Response};
use http_body_util::BodyExt;
use quiche::h3::{self, Header};
use quickshake_http::{handle_request, ConnInfo, HttpRuntime};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, Notify};

use crate::h3::{response_fields, trailer_fields, H3Body};

/// Body chunks a response task may have ready ahead of the one being written.
pub(crate) const CHUNKS_AHEAD: usize = 4;
/// HTTP/3's H3_INTERNAL_ERROR (RFC 9114 section 8.1): a response body that failed midway.
const H3_INTERNAL_ERROR: u64 = 0x102;

/// What a response task sends after the head.
pub(crate) enum Chunk {
    Data(Bytes),
    Trailers(HeaderMap),
    /// The body failed (the upstream reset or timed out midway).
    Failed,
}

/// A response's head for the connection task: its stream, its HEADERS fields and, unless the
/// head ends the stream, where its body comes from.
pub(crate) struct Head {
    pub stream: u64,
    pub fields: Vec<Header>,
    pub body: Option<mpsc::Receiver<Chunk>>,
}

impl Head {
    /// A response without a body (the 400 to a malformed request).
    pub(crate) fn bodiless(stream: u64, resp: &Response<()>) -> Head {
        Head {
            stream,
            fields: response_fields(resp),
            body: None,
        }
    }
}

/// Answer one request: its head, then its body as it comes. `wake` wakes the connection task
/// after each step. Returns early when the connection or the stream is gone (the channel is
/// closed), which drops the body and with it the upstream request.
pub(crate) async fn respond(
    req: Request<H3Body>,
    rt: Arc<HttpRuntime>,
    info: Arc<ConnInfo>,
    draining: bool,
    stream: u64,
    heads: mpsc::UnboundedSender<Head>,
    wake: Arc<Notify>,
) {
    let Ok(resp) = handle_request(req, rt, info, draining).await;
    let (parts, mut body) = resp.into_parts();
    let fields = response_fields(&Response::from_parts(parts, ()));
    if hyper::body::Body::is_end_stream(&body) {
        let _ = heads.send(Head {
            stream,
            fields,
            body: None,
        });
        wake.notify_one();
        return;
    }
    let (tx, rx) = mpsc::channel(CHUNKS_AHEAD);
    if heads
        .send(Head {
            stream,
            fields,
            body: Some(rx),
        })
        .is_err()
    {
        return;
    }
    wake.notify_one();
    while let Some(frame) = body.frame().await {
        let chunk = match frame {
            Ok(f) => match f.into_data() {
                Ok(d) if d.is_empty() => continue,
                Ok(d) => Chunk::Data(d),
                Err(f) => match f.into_trailers() {
                    Ok(t) => Chunk::Trailers(t),
                    Err(_) => continue,
                },
            },
            Err(e) => {
                tracing::debug!(stream, error = %e, "HTTP/3 response body failed");
                Chunk::Failed
            }
        };
        let last = !matches!(chunk, Chunk::Data(_));
        if tx.send(chunk).await.is_err() {
            return;
        }
        wake.notify_one();
        if last {
            return;
        }
    }
    drop(tx);
    wake.notify_one();
}

/// Where a response stands after a [`Outgoing::write`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Waiting for flow control or for the next chunk.
    Blocked,
    /// All of it written, the stream finished.
    Done,
    /// Abandoned: the stream was reset (by the body's failure, or by the peer).
    Failed,
}

/// A response on its way out.
pub(crate) struct Outgoing {
    pub stream: u64,
    /// HEADERS not yet accepted.
    fields: Option<Vec<Header>>,
    body: Option<mpsc::Receiver<Chunk>>,
    /// The rest of the chunk being written.
    chunk: Bytes,
    /// A trailer section not yet accepted (it ends the stream).
    trailers: Option<Vec<Header>>,
}

impl Outgoing {
    pub(crate) fn new(head: Head) -> Outgoing {
        Outgoing {
            stream: head.stream,
            fields: Some(head.fields),
            body: head.body,
            chunk: Bytes::new(),
            trailers: None,
        }
    }

    /// Write what flow control takes: the head, then chunks as they are ready.
    pub(crate) fn write(
        &mut self,
        h3: &mut h3::Connection,
        conn: &mut quiche::Connection,
    ) -> Progress {
        let stream = self.stream;
        if let Some(fields) = &self.fields {
            let fin = self.body.is_none();
            match h3.send_response(conn, stream, fields, fin) {
                Ok(()) => self.fields = None,
                Err(h3::Error::StreamBlocked | h3::Error::Done) => return Progress::Blocked,
                Err(_) => return Progress::Failed,
            }
            if fin {
                return Progress::Done;
            }
        }
        loop {
            if !self.chunk.is_empty() {
                match h3.send_body(conn, stream, &self.chunk, false) {
                    Ok(n) => self.chunk.advance(n),
                    Err(h3::Error::Done) => return Progress::Blocked,
                    Err(_) => return Progress::Failed,
                }
                if !self.chunk.is_empty() {
                    return Progress::Blocked;
                }
            }
            if let Some(t) = &self.trailers {
                return match h3.send_additional_headers(conn, stream, t, true, true) {
                    Ok(()) => Progress::Done,
                    Err(h3::Error::StreamBlocked | h3::Error::Done) => Progress::Blocked,
                    Err(_) => Progress::Failed,
                };
            }
            let Some(rx) = self.body.as_mut() else {
                return Progress::Failed;
            };
            match rx.try_recv() {
                Ok(Chunk::Data(d)) => self.chunk = d,
                Ok(Chunk::Trailers(t)) => self.trailers = Some(trailer_fields(&t)),
                Ok(Chunk::Failed) => {
                    let _ =
                        conn.stream_shutdown(stream, quiche::Shutdown::Write, H3_INTERNAL_ERROR);
                    return Progress::Failed;
                }
                Err(TryRecvError::Empty) => return Progress::Blocked,
                // The body ended: an empty DATA frame carries the FIN.
                Err(TryRecvError::Disconnected) => {
                    return match h3.send_body(conn, stream, &[], true) {
                        Ok(_) => Progress::Done,
                        Err(h3::Error::Done) => Progress::Blocked,
                        Err(_) => Progress::Failed,
                    };
                }
            }
        }
    }
}
