//! Reads the server's own handshake counters from an Envoy-style admin `/stats` page.
//!
//! The page is text, one `name: value` per line. We sum every downstream listener's
//! `listener.<addr>.ssl.handshake` and `listener.<addr>.ssl.session_reused`, and its
//! `listener.<addr>.ssl.curves.<group>` by group. The one reader of these counters for the
//! benchmark: bench/bench.py gets them from `quickshake-bench` (its runs, or `observe`).

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http::{self, Framing, Url};

/// Server-side counters summed over listeners.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerCounters {
    pub handshakes: u64,
    pub session_reused: u64,
    /// How many `listener.*.ssl.handshake` lines were found (0 means the page had none).
    pub listeners: u32,
    /// Handshakes by key exchange group (`listener.*.ssl.curves.<group>`).
    pub curves: BTreeMap<String, u64>,
}

impl ServerCounters {
    /// Counter growth from `before` to `self` (saturating, in case the server restarted);
    /// groups that did not grow are left out.
    pub fn since(&self, before: &ServerCounters) -> ServerCounters {
        let curves = self
            .curves
            .iter()
            .map(|(g, &n)| {
                let was = before.curves.get(g).copied().unwrap_or(0);
                (g.clone(), n.saturating_sub(was))
            })
            .filter(|&(_, n)| n > 0)
            .collect();
        ServerCounters {
            handshakes: self.handshakes.saturating_sub(before.handshakes),
            session_reused: self.session_reused.saturating_sub(before.session_reused),
            listeners: self.listeners,
            curves,
        }
    }
}

/// Sums the listener SSL counters in an Envoy text stats page. Lines that are not
/// `name: integer` are ignored (histograms, text readouts).
pub fn parse_stats(text: &str) -> ServerCounters {
    let mut out = ServerCounters::default();
    for line in text.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        let Some(rest) = name.strip_prefix("listener.") else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        if rest.ends_with(".ssl.handshake") && rest.len() > ".ssl.handshake".len() {
            out.handshakes = out.handshakes.saturating_add(value);
            out.listeners += 1;
        } else if rest.ends_with(".ssl.session_reused") && rest.len() > ".ssl.session_reused".len()
        {
            out.session_reused = out.session_reused.saturating_add(value);
        } else if let Some((_, group)) = rest.split_once(".ssl.curves.") {
            let n = out.curves.entry(group.to_string()).or_insert(0);
            *n = n.saturating_add(value);
        }
    }
    out
}

/// The URL fetched for a `--server-stats` base URL: base + `/stats` (unless already there).
pub fn stats_url(base: &str) -> Result<Url, String> {
    let mut url = Url::parse(base)?;
    if url.scheme != "http" {
        return Err(format!(
            "--server-stats {base:?}: only plain http:// is supported"
        ));
    }
    let trimmed = url.path.trim_end_matches('/');
    if !trimmed.ends_with("/stats") {
        url.path = format!("{trimmed}/stats");
    }
    Ok(url)
}

/// Largest stats page accepted.
const MAX_PAGE: usize = 64 * 1024 * 1024;

/// Fetches and parses the stats page with a tiny HTTP/1.1 client.
pub async fn fetch(url: &Url, timeout: Duration) -> Result<ServerCounters, String> {
    match tokio::time::timeout(timeout, fetch_text(url)).await {
        Ok(r) => r.map(|t| parse_stats(&t)),
        Err(_) => Err(format!(
            "server stats {}:{}{}: timed out after {timeout:?}",
            url.host, url.port, url.path
        )),
    }
}

async fn fetch_text(url: &Url) -> Result<String, String> {
    let ctx = |e: &dyn std::fmt::Display| {
        format!("server stats http://{}{}: {e}", url.host_header(), url.path)
    };
    let mut s = TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|e| ctx(&e))?;
    s.set_nodelay(true).map_err(|e| ctx(&e))?;
    s.write_all(&http::get_request(&url.path, &url.host_header(), true))
        .await
        .map_err(|e| ctx(&e))?;
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut head = None;
    loop {
        if head.is_none() {
            head = http::parse_head(&buf).map_err(|e| ctx(&e))?;
        }
        if let Some(h) = &head {
            let body = &buf[h.head_len..];
            let done = match h.framing {
                Framing::Length(n) => (body.len() as u64 >= n).then_some(n as usize),
                Framing::Chunked => http::chunked_len(body).map_err(|e| ctx(&e))?,
                Framing::Eof => None,
            };
            if let Some(n) = done {
                if h.status != 200 {
                    return Err(ctx(&format!("HTTP status {}", h.status)));
                }
                let body = &buf[h.head_len..h.head_len + n];
                let text = if h.framing == Framing::Chunked {
                    dechunk(body)
                } else {
                    body.to_vec()
                };
                return Ok(String::from_utf8_lossy(&text).into_owned());
            }
        }
        if buf.len() > MAX_PAGE {
            return Err(ctx(&"stats page too large"));
        }
        let mut chunk = [0u8; 16 * 1024];
        let n = s.read(&mut chunk).await.map_err(|e| ctx(&e))?;
        if n == 0 {
            return match &head {
                Some(h) if h.framing == Framing::Eof && h.status == 200 => {
                    Ok(String::from_utf8_lossy(&buf[h.head_len..]).into_owned())
                }
                Some(h) if h.status != 200 => Err(ctx(&format!("HTTP status {}", h.status))),
                _ => Err(ctx(&"connection closed before the response was complete")),
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Strips chunk framing from a complete, already validated chunked body.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
        let line = String::from_utf8_lossy(&body[..eol]);
        let size =
            usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16).unwrap_or(0);
        body = &body[eol + 2..];
        if size == 0 || body.len() < size {
            break;
        }
        out.extend_from_slice(&body[..size]);
        body = body.get(size + 2..).unwrap_or(&[]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "\
cluster.backend.ssl.handshake: 77
listener.0.0.0.0_8443.ssl.handshake: 1200
listener.0.0.0.0_8443.ssl.session_reused: 3
listener.0.0.0.0_8443.ssl.connection_error: 9
listener.[__]_8443.ssl.handshake: 34
listener.[__]_8443.ssl.session_reused: 0
listener.0.0.0.0_8443.ssl.curves.X25519: 1100
listener.0.0.0.0_8443.ssl.curves.P-256: 100
listener.[__]_8443.ssl.curves.X25519: 34
listener.admin.downstream_cx_total: 5
listener.ssl.handshake: 999
http.ingress.downstream_rq_total: 10
listener.x.downstream_cx_length_ms: P0(nan,1.0) P25(nan,1.05)
garbage line
";

    #[test]
    fn sums_listener_counters_only() {
        let c = parse_stats(PAGE);
        assert_eq!(c.handshakes, 1234);
        assert_eq!(c.session_reused, 3);
        assert_eq!(c.listeners, 2);
        assert_eq!(c.curves["X25519"], 1134);
        assert_eq!(c.curves["P-256"], 100);
        assert_eq!(c.curves.len(), 2);
        let later = ServerCounters {
            handshakes: 1300,
            session_reused: 3,
            listeners: 2,
            curves: [("X25519".to_string(), 1200), ("P-256".to_string(), 100)].into(),
        };
        assert_eq!(later.since(&c).handshakes, 66);
        assert_eq!(later.since(&c).session_reused, 0);
        assert_eq!(
            later.since(&c).curves,
            [("X25519".to_string(), 66)].into(),
            "groups that did not grow are left out"
        );
        assert_eq!(c.since(&later).handshakes, 0);
        assert_eq!(parse_stats(""), ServerCounters::default());
    }

    #[test]
    fn stats_urls() {
        assert_eq!(stats_url("http://127.0.0.1:9001").unwrap().path, "/stats");
        assert_eq!(stats_url("http://127.0.0.1:9001/").unwrap().path, "/stats");
        assert_eq!(stats_url("http://h:1/stats").unwrap().path, "/stats");
        assert_eq!(stats_url("http://h:1/admin").unwrap().path, "/admin/stats");
        assert!(stats_url("https://h:1").is_err());
    }

    #[test]
    fn dechunks() {
        assert_eq!(dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), b"abcde");
    }
}
