//! Reading one HTTP/1.x response off a connection: skip interim 1xx heads, then consume the
//! body by its framing (length, chunked, or to EOF) so the connection can be reused.
//! Parsing itself is the socket-free `crate::http`.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::conn::Failure;
use crate::http::{self, Framing};
use crate::report::ErrorKind;

/// Reads one HTTP/1.x response; returns (status, connection reusable).
pub(super) async fn h1_exchange<S>(
    s: &mut S,
    req: &[u8],
    buf: &mut Vec<u8>,
) -> Result<(u16, bool), Failure>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let io = |what: &str, e: std::io::Error| Failure(ErrorKind::Io, format!("{what}: {e}"));
    s.write_all(req).await.map_err(|e| io("write", e))?;
    buf.clear();
    let mut chunk = [0u8; 16 * 1024];
    let head = loop {
        if let Some(h) = http::parse_head(buf).map_err(|e| Failure(ErrorKind::Http, e.0))? {
            if (100..200).contains(&h.status) && h.status != 101 {
                buf.drain(..h.head_len);
                continue;
            }
            break h;
        }
        let n = s.read(&mut chunk).await.map_err(|e| io("read", e))?;
        if n == 0 {
            return Err(Failure(
                ErrorKind::Io,
                "connection closed before the response head".into(),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    match head.framing {
        Framing::Length(len) => {
            let mut have = (buf.len() - head.head_len) as u64;
            while have < len {
                let n = s.read(&mut chunk).await.map_err(|e| io("read body", e))?;
                if n == 0 {
                    return Err(Failure(
                        ErrorKind::Io,
                        format!("connection closed after {have} of {len} body bytes"),
                    ));
                }
                have += n as u64;
            }
        }
        Framing::Chunked => {
            buf.drain(..head.head_len);
            while http::chunked_len(buf)
                .map_err(|e| Failure(ErrorKind::Http, e.0))?
                .is_none()
            {
                if buf.len() > 64 * 1024 * 1024 {
                    return Err(Failure(ErrorKind::Http, "chunked body over 64 MiB".into()));
                }
                let n = s.read(&mut chunk).await.map_err(|e| io("read body", e))?;
                if n == 0 {
                    return Err(Failure(
                        ErrorKind::Io,
                        "connection closed inside a chunked body".into(),
                    ));
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
        Framing::Eof => loop {
            let n = s.read(&mut chunk).await.map_err(|e| io("read body", e))?;
            if n == 0 {
                break;
            }
        },
    }
    Ok((head.status, head.keep_alive))
}
