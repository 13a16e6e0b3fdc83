//! An open connection (the TLS stream and the protocol ALPN chose: HTTP/1.x, or h2 with its
//! stream state) and `Failure`, how one request on a connection failed (error kind and
//! message). Opening connections and making requests on them is `request`'s.

use tokio::net::TcpStream;
use tokio_boring::SslStream;

use crate::h2::H2Conn;
use crate::report::ErrorKind;

pub(super) enum Proto {
    H1,
    H2(H2Conn),
}

pub(super) struct Conn {
    pub(super) stream: SslStream<TcpStream>,
    pub(super) proto: Proto,
}

pub(super) struct Failure(pub(super) ErrorKind, pub(super) String);
