//! A stream that first yields bytes already read from the socket (the ClientHello that chose
//! the filter chain), then reads from the socket itself, ahead: a read asking for less than
//! [`READ_AHEAD`] bytes fills a buffer that size first, so BoringSSL's reads of a record's
//! 5-byte header and then its body (two per record, each a `recvfrom`) are served from one
//! read of everything the socket holds (the client's whole flight). The buffer exists only
//! while it holds unread bytes, so an idle connection keeps none. Writes go straight through.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes read ahead when a read asks for fewer.
const READ_AHEAD: usize = 4096;

pub(crate) struct Prefixed<S> {
    prefix: Vec<u8>,
    pos: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    pub(crate) fn new(prefix: Vec<u8>, inner: S) -> Self {
        Prefixed {
            prefix,
            pos: 0,
            inner,
        }
    }

    /// The underlying stream (only before any prefix byte was read through `self`).
    pub(crate) fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The underlying stream; unread prefix bytes are dropped.
    pub(crate) fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pos < self.prefix.len() {
            let n = buf.remaining().min(self.prefix.len() - self.pos);
            let start = self.pos;
            buf.put_slice(&self.prefix[start..start + n]);
            self.pos += n;
            if self.pos == self.prefix.len() {
                self.prefix = Vec::new();
                self.pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        if buf.remaining() >= READ_AHEAD {
            return Pin::new(&mut self.inner).poll_read(cx, buf);
        }
        let mut ahead = vec![0u8; READ_AHEAD];
        let mut into = ReadBuf::new(&mut ahead);
        match Pin::new(&mut self.inner).poll_read(cx, &mut into) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        let n = into.filled().len();
        let take = n.min(buf.remaining());
        buf.put_slice(&ahead[..take]);
        if take < n {
            ahead.truncate(n);
            self.prefix = ahead;
            self.pos = take;
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(flavor = "current_thread")]
    async fn yields_prefix_then_inner() {
        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(b" world").await.expect("write");
        drop(a);
        let mut s = super::Prefixed::new(b"hello".to_vec(), b);
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        assert_eq!(out, "hello world");
    }

    /// Small reads (a TLS record header, then its body) are served from one read ahead, in
    /// order, across the prefix, the read-ahead buffer and direct large reads.
    #[tokio::test(flavor = "current_thread")]
    async fn small_reads_come_from_one_read_ahead() {
        let (mut a, b) = tokio::io::duplex(1 << 16);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        a.write_all(&data).await.expect("write");
        drop(a);
        let mut s = super::Prefixed::new(b"ab".to_vec(), b);
        let mut out = Vec::new();
        let mut five = [0u8; 5];
        let mut big = vec![0u8; 5000];
        loop {
            let n = s.read(&mut five).await.expect("read");
            out.extend_from_slice(&five[..n]);
            let m = s.read(&mut big).await.expect("read");
            out.extend_from_slice(&big[..m]);
            if n == 0 && m == 0 {
                break;
            }
        }
        let mut want = b"ab".to_vec();
        want.extend_from_slice(&data);
        assert_eq!(out, want);
    }
}
