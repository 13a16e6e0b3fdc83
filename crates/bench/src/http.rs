//! Minimal HTTP/1.1 pieces: URL splitting, request bytes, response framing.
//!
//! Pure functions over byte slices; the socket loop lives in `client/` (`client::conn`, `client::h1`).

use std::fmt;

/// A parsed `scheme://host[:port]/path` URL (no query splitting, no userinfo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub scheme: String,
    /// Host without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// Path plus query, always starting with `/`.
    pub path: String,
}

impl Url {
    /// Parses `scheme://host[:port][/path]`; schemes `http` (port 80) and `https` (443).
    pub fn parse(s: &str) -> Result<Url, String> {
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| format!("URL {s:?} has no scheme (expected https://host:port/path)"))?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            other => return Err(format!("URL {s:?}: unsupported scheme {other:?}")),
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        if authority.contains('@') {
            return Err(format!("URL {s:?}: userinfo is not supported"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("URL {s:?}: unterminated IPv6 literal"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => parse_port(p, s)?,
                None if after.is_empty() => default_port,
                None => return Err(format!("URL {s:?}: junk after IPv6 literal")),
            };
            (h.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), parse_port(p, s)?),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(format!("URL {s:?} has an empty host"));
        }
        Ok(Url {
            scheme,
            host,
            port,
            path,
        })
    }

    /// `Host` header value: host, bracketed if IPv6, with the port when not the default.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default = if self.scheme == "http" { 80 } else { 443 };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

fn parse_port(p: &str, url: &str) -> Result<u16, String> {
    p.parse::<u16>()
        .map_err(|_| format!("URL {url:?}: bad port {p:?}"))
}

/// The bytes of `GET path HTTP/1.1` with `Host` and either `Connection: close` or keep-alive.
pub fn get_request(path: &str, host_header: &str, close: bool) -> Vec<u8> {
    let conn = if close { "close" } else { "keep-alive" };
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: quickshake-bench\r\nAccept: */*\r\nConnection: {conn}\r\n\r\n"
    )
    .into_bytes()
}

/// How the response body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Exactly this many body bytes follow the head.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// The body runs to end of stream (HTTP/1.0 style, no length given).
    Eof,
}

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub framing: Framing,
    /// Whether the server lets the connection be reused after this response.
    pub keep_alive: bool,
    /// Bytes of the head including the final blank line.
    pub head_len: usize,
}

/// A malformed or unsupported response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError(pub String);

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

/// Largest response head accepted.
pub const MAX_HEAD: usize = 64 * 1024;

/// Parses a response head from the start of `buf`.
///
/// `Ok(None)`: more bytes are needed. `request_was_head`-style bodiless statuses
/// (1xx, 204, 304) get `Framing::Length(0)`.
pub fn parse_head(buf: &[u8]) -> Result<Option<ResponseHead>, HttpError> {
    let Some(end) = find_subslice(buf, b"\r\n\r\n") else {
        if buf.len() > MAX_HEAD {
            return Err(HttpError(format!("response head over {MAX_HEAD} bytes")));
        }
        return Ok(None);
    };
    let head_len = end + 4;
    let text = std::str::from_utf8(&buf[..end])
        .map_err(|_| HttpError("response head is not UTF-8".into()))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => {
            return Err(HttpError(format!(
                "bad status line {:?}",
                truncate(status_line, 80)
            )))
        }
    };
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .filter(|s| (100..1000).contains(s))
        .ok_or_else(|| HttpError(format!("bad status line {:?}", truncate(status_line, 80))))?;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut conn_close = false;
    let mut conn_keep_alive = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(HttpError(format!(
                "bad header line {:?}",
                truncate(line, 80)
            )));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let n: u64 = value
                .parse()
                .map_err(|_| HttpError(format!("bad Content-Length {value:?}")))?;
            if length.is_some_and(|old| old != n) {
                return Err(HttpError("conflicting Content-Length headers".into()));
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if value
                .rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
            {
                chunked = true;
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for tok in value.split(',') {
                let tok = tok.trim();
                if tok.eq_ignore_ascii_case("close") {
                    conn_close = true;
                } else if tok.eq_ignore_ascii_case("keep-alive") {
                    conn_keep_alive = true;
                }
            }
        }
    }
    let bodiless = (100..200).contains(&status) || status == 204 || status == 304;
    let framing = if bodiless {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::Eof
    };
    let keep_alive = framing != Framing::Eof && !conn_close && (!http10 || conn_keep_alive);
    Ok(Some(ResponseHead {
        status,
        framing,
        keep_alive,
        head_len,
    }))
}

/// Scans a chunked body held in `body` (starting right after the head).
///
/// `Ok(Some(n))`: the body, trailers included, is complete and `n` bytes long.
/// `Ok(None)`: more bytes are needed.
pub fn chunked_len(body: &[u8]) -> Result<Option<usize>, HttpError> {
    let mut pos = 0usize;
    loop {
        let Some(eol) = find_subslice(&body[pos..], b"\r\n") else {
            if body.len() - pos > 1024 {
                return Err(HttpError("chunk size line too long".into()));
            }
            return Ok(None);
        };
        let line = std::str::from_utf8(&body[pos..pos + eol])
            .map_err(|_| HttpError("chunk size line is not UTF-8".into()))?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(size_text, 16)
            .map_err(|_| HttpError(format!("bad chunk size {:?}", truncate(line, 40))))?;
        pos += eol + 2;
        if size == 0 {
            // Trailers: lines until an empty one.
            loop {
                let Some(eol) = find_subslice(&body[pos..], b"\r\n") else {
                    return Ok(None);
                };
                pos += eol + 2;
                if eol == 0 {
                    return Ok(Some(pos));
                }
            }
        }
        let size = usize::try_from(size).map_err(|_| HttpError("chunk too large".into()))?;
        let need = pos
            .checked_add(size)
            .and_then(|n| n.checked_add(2))
            .ok_or_else(|| HttpError("chunk too large".into()))?;
        if body.len() < need {
            return Ok(None);
        }
        if &body[need - 2..need] != b"\r\n" {
            return Err(HttpError("chunk not followed by CRLF".into()));
        }
        pos = need;
    }
}

fn find_subslice(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_forms() {
        let u = Url::parse("https://localhost:8443/x?y=1").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("localhost", 8443, "/x?y=1")
        );
        assert_eq!(u.host_header(), "localhost:8443");
        let u = Url::parse("https://example.com").unwrap();
        assert_eq!((u.port, u.path.as_str()), (443, "/"));
        assert_eq!(u.host_header(), "example.com");
        let u = Url::parse("http://[::1]:9001").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9001));
        assert_eq!(u.host_header(), "[::1]:9001");
        assert!(Url::parse("localhost:80").is_err());
        assert!(Url::parse("ftp://x/").is_err());
        assert!(Url::parse("https://h:99999/").is_err());
    }

    #[test]
    fn head_with_length() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let h = parse_head(r).unwrap().unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.framing, Framing::Length(2));
        assert!(h.keep_alive);
        assert_eq!(h.head_len, r.len() - 2);
        assert_eq!(parse_head(&r[..10]).unwrap(), None);
    }

    #[test]
    fn head_close_and_http10() {
        let h = parse_head(b"HTTP/1.1 503 x\r\nconnection: Close\r\ncontent-length: 0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.status, 503);
        assert!(!h.keep_alive);
        let h = parse_head(b"HTTP/1.0 200 ok\r\nContent-type: text/html\r\n\r\n<HTML>")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Eof);
        assert!(!h.keep_alive);
        let h = parse_head(b"HTTP/1.1 204 No Content\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Length(0));
        assert!(parse_head(b"SSH-2.0\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
    }

    #[test]
    fn chunked_bodies() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Chunked);
        let body = b"2\r\nok\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(chunked_len(body).unwrap(), Some(body.len()));
        for cut in 0..body.len() {
            assert_eq!(chunked_len(&body[..cut]).unwrap(), None, "cut {cut}");
        }
        assert!(chunked_len(b"zz\r\n").is_err());
        assert!(chunked_len(b"2\r\nokXX").is_err());
    }

    #[test]
    fn request_bytes() {
        let r = String::from_utf8(get_request("/p", "h:1", true)).unwrap();
        assert!(r.starts_with("GET /p HTTP/1.1\r\nHost: h:1\r\n"));
        assert!(r.contains("Connection: close\r\n"));
        assert!(r.ends_with("\r\n\r\n"));
    }
}
