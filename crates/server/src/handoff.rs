//! Handshakes below established traffic (`--handshake-priority idle`).
//!
//! In this mode each worker is two threads: a *handshake thread* in the kernel's `SCHED_IDLE`
//! class accepts connections and runs their TLS handshakes (and, through the provider's
//! per-thread queue, their key operations), and the worker's *serving thread* at normal
//! priority serves every established connection. When a handshake completes, its socket is
//! deregistered from the handshake thread's event loop, the connection (TLS state and all) is
//! sent over a channel, and the serving thread registers the socket with its own event loop
//! before serving it. The kernel preempts an idle-class thread as soon as a normal one wakes, so
//! a request on an established connection never waits behind handshake work on that core; new
//! handshakes get whatever CPU established connections leave.
//!
//! [`Socket`] is the accepted TCP socket in a form that can move between event loops;
//! [`Movable`] reaches it through the stream layers above it (PROXY/ClientHello prefix, TLS).

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::prefixed::Prefixed;

/// An established connection, ready to be served by the serving thread. Its first act, once
/// polled there, is to [`Movable::attach`] its socket to that thread's event loop.
pub(crate) type ServeJob = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

thread_local! {
    /// Set on a handshake thread: where its established connections go.
    static SERVING: RefCell<Option<mpsc::UnboundedSender<ServeJob>>> = const { RefCell::new(None) };
}

/// Make the calling (handshake) thread hand its established connections to `serving`.
pub(crate) fn set_serving_thread(serving: mpsc::UnboundedSender<ServeJob>) {
    SERVING.with(|s| *s.borrow_mut() = Some(serving));
}

/// Forget the serving thread (the handshake thread is stopping): lets its receiver finish.
pub(crate) fn clear_serving_thread() {
    SERVING.with(|s| *s.borrow_mut() = None);
}

/// Whether established connections of this thread are served elsewhere.
pub(crate) fn hands_off() -> bool {
    SERVING.with(|s| s.borrow().is_some())
}

/// Send `job` to this thread's serving thread. `Err` gives it back when there is none (or it
/// stopped): the caller then serves the connection itself.
pub(crate) fn hand_off(job: ServeJob) -> Result<(), ServeJob> {
    SERVING.with(|s| match s.borrow().as_ref() {
        Some(tx) => tx.send(job).map_err(|e| e.0),
        None => Err(job),
    })
}

/// The accepted TCP socket: registered with the event loop of the thread using it, or parked
/// (deregistered) while it travels between threads. I/O on a parked socket fails; no one
/// polls it then.
pub(crate) enum Socket {
    Live(TcpStream),
    Parked(std::net::TcpStream),
    /// Only while switching states (or after a failed switch).
    Gone,
}

impl Socket {
    fn live(&mut self) -> io::Result<&mut TcpStream> {
        match self {
            Socket::Live(s) => Ok(s),
            _ => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "socket is between event loops",
            )),
        }
    }
}

/// A stream whose socket can leave one event loop and join another.
pub(crate) trait Movable {
    /// Deregister the socket from this thread's event loop.
    fn detach(&mut self) -> io::Result<()>;
    /// Register the socket with the calling thread's event loop (inside a runtime).
    fn attach(&mut self) -> io::Result<()>;
}

impl Movable for Socket {
    fn detach(&mut self) -> io::Result<()> {
        match std::mem::replace(self, Socket::Gone) {
            Socket::Live(s) => {
                *self = Socket::Parked(s.into_std()?);
                Ok(())
            }
            other => {
                *self = other;
                Ok(())
            }
        }
    }

    fn attach(&mut self) -> io::Result<()> {
        match std::mem::replace(self, Socket::Gone) {
            Socket::Parked(s) => {
                *self = Socket::Live(TcpStream::from_std(s)?);
                Ok(())
            }
            other => {
                *self = other;
                Ok(())
            }
        }
    }
}

impl<S: Movable> Movable for Prefixed<S> {
    fn detach(&mut self) -> io::Result<()> {
        self.get_mut().detach()
    }
    fn attach(&mut self) -> io::Result<()> {
        self.get_mut().attach()
    }
}

impl<S: Movable> Movable for tokio_boring::SslStream<S> {
    fn detach(&mut self) -> io::Result<()> {
        self.get_mut().detach()
    }
    fn attach(&mut self) -> io::Result<()> {
        self.get_mut().attach()
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut().live() {
            Ok(s) => Pin::new(s).poll_read(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().live() {
            Ok(s) => Pin::new(s).poll_write(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().live() {
            Ok(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        matches!(self, Socket::Live(s) if s.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().live() {
            Ok(s) => Pin::new(s).poll_flush(cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().live() {
            Ok(s) => Pin::new(s).poll_shutdown(cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A socket detached on one runtime is served by another after `attach`.
    #[test]
    fn a_socket_moves_between_event_loops() {
        let first = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let (mut sock, mut peer) = first.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = l.local_addr().expect("addr");
            let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
            (
                Socket::Live(s.expect("accept").0),
                c.expect("connect").into_std().expect("std"),
            )
        });
        sock.detach().expect("detach");
        assert!(matches!(sock, Socket::Parked(_)));
        drop(first);
        let second = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        second.block_on(async move {
            let mut buf = [0u8; 4];
            assert!(
                sock.read(&mut buf).await.is_err(),
                "parked socket must not read"
            );
            sock.attach().expect("attach");
            std::io::Write::write_all(&mut peer, b"ping").expect("peer write");
            sock.read_exact(&mut buf).await.expect("read");
            assert_eq!(&buf, b"ping");
            sock.write_all(b"pong").await.expect("write");
            peer.set_nonblocking(false).expect("blocking");
            std::io::Read::read_exact(&mut peer, &mut buf).expect("peer read");
            assert_eq!(&buf, b"pong");
        });
    }
}
